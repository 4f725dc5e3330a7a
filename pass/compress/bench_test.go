package compress

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/internal/shareddata"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/pipeline"
)

// ccBody builds a request shaped like a long Claude Code session of about
// size bytes: ~37 KB of system prompt and tool schemas, then tool rounds
// that are mostly small real Bash, Read, Grep, Edit and WebFetch outputs
// (testdata/real), with now and then a big log, and a few results each
// rule rewrites (ANSI test output, a curl progress bar, an HTML page, a
// data: URI, a page snapshot).
func ccBody(tb testing.TB, size int) []byte {
	small := []call{
		{tool: "Bash", content: readFixture(tb, "bash-plain.txt")},
		{tool: "Read", content: readFixture(tb, "read-numbered.txt")},
		{tool: "Grep", content: readFixture(tb, "grep.txt")},
		{tool: "Edit", content: readFixture(tb, "edit.txt")},
		{tool: "Bash", content: "On branch main\nnothing to commit, working tree clean\n"},
		{tool: "TodoWrite", content: "Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress."},
		{tool: "Bash", content: readFixture(tb, "bash-error.txt"), isError: true},
		{tool: "WebFetch", content: readFixture(tb, "webfetch.txt")},
		{tool: "Grep", content: readFixture(tb, "grep-crlf.txt")},
		{tool: "Read", content: readFixture(tb, "read-numbered.txt")},
	}
	var ansi strings.Builder
	for i := 0; i < 120; i++ {
		ansi.WriteString("\x1b[32m✓\x1b[39m \x1b[2mtest/unit/case" + fmt.Sprint(i) + ".test.ts\x1b[22m \x1b[33m(12 tests)\x1b[39m \x1b[2m41ms\x1b[22m\n")
	}
	var snap strings.Builder
	snap.WriteString("### Page state\n- Page URL: https://shop.example.com/\n- Page Snapshot:\n```yaml\n")
	for i := 0; snap.Len() < 40_000; i++ {
		snap.WriteString(fmt.Sprintf("  - listitem [ref=e%d]:\n    - link \"Product %d\" [ref=e%da] [cursor=pointer]\n", i, i, i))
	}
	bigLog := strings.Repeat("2026-11-02T10:00:00Z INFO request served path=/api/items status=200 took=3ms\n", 500) // 39 KB
	special := map[int]call{
		7:  {tool: "Bash", content: ansi.String()},
		13: {tool: "Bash", content: readFixture(tb, "bash-curl-progress.txt")},
		29: {tool: "Bash", content: htmlPage(150)},
		41: {tool: "mcp__chrome__get_page", content: `<img src="data:image/png;base64,` + b64([]byte("\x89PNG\r\n\x1a\n"), 24_000) + `">`},
		53: {tool: "mcp__playwright__browser_snapshot", content: snap.String()},
	}
	var calls []call
	for i, total := 0, 40_000; total < size; i++ {
		c, ok := special[i%60]
		switch {
		case ok:
		case i%15 == 14:
			c = call{tool: "Bash", content: bigLog}
		default:
			c = small[i%len(small)]
		}
		calls = append(calls, c)
		total += len(fmt.Sprint(c.content)) + 300
	}
	body := reqBody(tb, calls...)
	// Pad the system prompt and tools to Claude Code's sizes.
	pad := strings.Repeat("Use the tools described below carefully. ", 170)
	return []byte(strings.Replace(string(body), `"text":"Tools guide"`, `"text":"Tools guide `+pad+`"`, 1))
}

// cpuTime is the CPU time (user + system) the process has used. The
// benchmarks report it per MB beside wall time because this machine is
// shared: when other jobs compete for its two cores, wall time inflates
// but the CPU the benchmark itself burns stays close to the truth.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportPerMB adds wall and CPU milliseconds per MB of body.
func reportPerMB(b *testing.B, size int, cpu time.Duration) {
	mb := float64(size) / (1 << 20)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/mb/1e6, "ms/MB")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/mb/1e6, "cpu-ms/MB")
}

var benchSizes = []struct {
	name string
	size int
}{{"100KB", 100 << 10}, {"1MB", 1 << 20}, {"5MB", 5 << 20}}

// BenchmarkRun measures the pass alone on a parsed request.
func BenchmarkRun(b *testing.B) {
	p := mustNew(b, Defaults())
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			body := ccBody(b, sz.size)
			c := parse(b, body)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var edits int
			cpu0 := cpuTime()
			for b.Loop() {
				e, err := p.Run(&pipeline.Request{Conv: c})
				if err != nil {
					b.Fatal(err)
				}
				edits = len(e)
			}
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(edits), "edits")
			reportPerMB(b, len(body), cpu)
		})
	}
}

// BenchmarkPipeline measures what a request costs end to end with this
// pass: parse, run the pipeline, splice.
func BenchmarkPipeline(b *testing.B) {
	pl := pipeline.New(nil, mustNew(b, Defaults()))
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			body := ccBody(b, sz.size)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var saved int
			cpu0 := cpuTime()
			for b.Loop() {
				c, err := anthropic.Parse(body)
				if err != nil {
					b.Fatal(err)
				}
				res := pl.Run(&pipeline.Request{Conv: c})
				if res.Err != nil {
					b.Fatal(res.Err)
				}
				saved = len(body) - len(res.Body)
			}
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(saved), "saved-bytes")
			reportPerMB(b, len(body), cpu)
		})
	}
}

// BenchmarkRunNoChange is the common steady state of a result that no rule
// touches: small Bash, Read and Grep outputs only.
func BenchmarkRunNoChange(b *testing.B) {
	p := mustNew(b, Defaults())
	var calls []call
	for i := 0; i < 150; i++ {
		calls = append(calls,
			call{tool: "Bash", content: readFixture(b, "bash-plain.txt")},
			call{tool: "Read", content: readFixture(b, "read-numbered.txt")},
			call{tool: "Grep", content: readFixture(b, "grep.txt")})
	}
	body := reqBody(b, calls...)
	c := parse(b, body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		if e, err := p.Run(&pipeline.Request{Conv: c}); err != nil || len(e) != 0 {
			b.Fatal(err, len(e))
		}
	}
	reportPerMB(b, len(body), cpuTime()-cpu0)
}

// realSession returns the tool rounds of a real Claude Code transcript from
// the shared data folder (see package shareddata).
func realSession(b *testing.B, name string) []call {
	return sessionCalls(b, shareddata.File(b, "claude-code", name))
}

// BenchmarkRunReal runs the pass on the last request of a real 1.7 MB
// Claude Code session (all its tool results, real shapes and mix).
func BenchmarkRunReal(b *testing.B) {
	calls := realSession(b, "c76e5be5-ffd2-4901-a935-885527c83a61.jsonl")
	body := reqBody(b, calls...)
	c := parse(b, body)
	p := mustNew(b, Defaults())
	pl := pipeline.New(nil, p)
	b.Run("pass", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		var edits int
		cpu0 := cpuTime()
		for b.Loop() {
			e, err := p.Run(&pipeline.Request{Conv: c})
			if err != nil {
				b.Fatal(err)
			}
			edits = len(e)
		}
		cpu := cpuTime() - cpu0
		b.ReportMetric(float64(edits), "edits")
		reportPerMB(b, len(body), cpu)
	})
	b.Run("pipeline", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		var saved int
		cpu0 := cpuTime()
		for b.Loop() {
			c, err := anthropic.Parse(body)
			if err != nil {
				b.Fatal(err)
			}
			res := pl.Run(&pipeline.Request{Conv: c})
			if res.Err != nil {
				b.Fatal(res.Err)
			}
			saved = len(body) - len(res.Body)
		}
		cpu := cpuTime() - cpu0
		b.ReportMetric(float64(saved), "saved-bytes")
		reportPerMB(b, len(body), cpu)
	})
}

// BenchmarkParse is anthropic.Parse alone on the same bodies, to tell the
// pass's share of BenchmarkPipeline from the parser's.
func BenchmarkParse(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			body := ccBody(b, sz.size)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if _, err := anthropic.Parse(body); err != nil {
					b.Fatal(err)
				}
			}
			reportPerMB(b, len(body), cpuTime()-cpu0)
		})
	}
}
