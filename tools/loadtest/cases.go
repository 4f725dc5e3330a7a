package loadtest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/internal/procs"
)

// caseOrder lists the cases in the order they run: by bytes in flight
// (size × concurrency), then size, then protocol and mode as given. Go
// returns memory to the system only slowly, so a case that follows a
// heavier one would start with that one's RSS; in this order each case's
// peak RSS is its own.
func caseOrder(protos []Protocol, sizes, concs []int, modes []Mode) []caseSpec {
	var cases []caseSpec
	for _, size := range sortedInts(sizes) {
		for _, c := range sortedInts(concs) {
			for _, p := range protos {
				for _, m := range modes {
					cases = append(cases, caseSpec{proto: p, size: size, conc: c, mode: m})
				}
			}
		}
	}
	slices.SortStableFunc(cases, func(a, b caseSpec) int { return cmp.Compare(a.size*a.conc, b.size*b.conc) })
	return cases
}

// caseSpec names a case.
type caseSpec struct {
	proto      Protocol
	size, conc int
	mode       Mode
}

func (c caseSpec) name() string {
	return fmt.Sprintf("%s %s c=%d %s", c.proto, sizeName(c.size), c.conc, c.mode)
}

// sessionID is worker w's Claude Code session id.
func sessionID(w int) string {
	return fmt.Sprintf("10ad7e57-0000-4000-8000-%012d", w)
}

// perWorker is how many requests each worker sends in one slot.
func perWorker(conc int) int {
	if conc == 1 {
		return 1
	}
	return 3
}

// permutations of the three targets, cycled through round by round.
var permutations = [6][3]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {2, 1, 0}, {1, 0, 2}}

// acc accumulates one target's samples in a case.
type acc struct {
	mu                      sync.Mutex
	lat, ttfb, relay        []time.Duration
	upBytes                 int64
	errors                  int
	firstErr                string
	rewritten, failed, skip int
	passes                  string
	tokBefore, tokAfter     int
	// busy is the wall time of the target's measured slots; sent counts
	// the requests sent to each of its instances.
	busy time.Duration
	sent []int
}

func (h *harness) runCase(ctx context.Context, src *Source, cs caseSpec, rounds int, budget time.Duration) (CaseResult, error) {
	res := CaseResult{Name: cs.name(), Protocol: cs.proto, Size: cs.size, Concurrency: cs.conc, Mode: cs.mode, Rounds: rounds}
	bodies := make([][]byte, cs.conc)
	for w := range bodies {
		b, err := src.Body(cs.proto, rounds, sessionID(w), cs.mode == Stream)
		if err != nil {
			return res, err
		}
		bodies[w] = b
	}
	res.BodyBytes = len(bodies[0])
	ans := h.ans[cs.proto]
	want := int64(len(ans.json))
	if cs.mode == Stream {
		want = int64(ans.sse)
	}

	reset := make([][]bool, len(h.targets))
	for i, t := range h.targets {
		for _, p := range t.procs {
			reset[i] = append(reset[i], procs.ResetPeak(p.Pid()))
		}
	}
	deadline := time.Now().Add(budget)
	accs := make([]*acc, len(h.targets))
	scratch := make([]*acc, len(h.targets)) // warm-up samples, dropped
	for i, t := range h.targets {
		accs[i] = &acc{sent: make([]int, len(t.urls))}
		scratch[i] = &acc{sent: make([]int, len(t.urls))}
	}
	cpu0 := make([][]time.Duration, len(h.targets))
	per := cs.conc * perWorker(cs.conc)
	for r := 0; ; r++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		warm := r < h.opt.Warmup
		if r == h.opt.Warmup {
			for i, t := range h.targets {
				cpu0[i] = make([]time.Duration, len(t.procs))
				for j, p := range t.procs {
					cpu0[i][j], _ = cpuTime(p.Pid())
				}
			}
		}
		for _, ti := range permutations[r%len(permutations)] {
			a := accs[ti]
			if warm {
				a = scratch[ti]
			}
			h.slot(ctx, h.targets[ti], cs, bodies, want, a)
		}
		if !warm {
			res.MeasuredRounds++
			if (res.MeasuredRounds+1)*per > h.opt.MaxRequests || time.Now().After(deadline) {
				break
			}
		}
	}
	for i, t := range h.targets {
		a := accs[i]
		tr := TargetResult{
			Target: t.name, Requests: len(a.lat) + a.errors, Errors: a.errors, FirstError: a.firstErr,
			Latency: Summarize(a.lat), TTFB: Summarize(a.ttfb), Relay: Summarize(a.relay),
		}
		if n := len(a.lat); n > 0 {
			tr.UpstreamBytes = a.upBytes / int64(n)
		}
		if a.busy > 0 {
			tr.ThroughputRPS = float64(len(a.lat)) / a.busy.Seconds()
		}
		if len(t.procs) > 0 {
			tr.Process = procStats(t.procs, cpu0[i], reset[i], a.sent, tr.Requests)
		}
		if len(t.procs) > 1 {
			tr.Instances = len(t.procs)
		}
		if t.name == Ctxguard {
			tr.Rewrite = &RewriteStats{Rewritten: a.rewritten, FailedOpen: a.failed, Skipped: a.skip,
				Passes: a.passes, TokensBefore: a.tokBefore, TokensAfter: a.tokAfter}
		}
		res.Targets = append(res.Targets, tr)
	}
	res.compare()
	return res, nil
}

// procStats measures a target's processes at the end of a case: the sum
// of their peak RSS, RSS and CPU time since cpu0 (per request of the
// target's), and, for more than one, each one's figures with sent[i]
// requests.
func procStats(ps []*procs.Proc, cpu0 []time.Duration, reset []bool, sent []int, requests int) *ProcStats {
	st := &ProcStats{PeakReset: true}
	var total time.Duration
	for j, p := range ps {
		in := InstanceStats{Requests: sent[j]}
		if cpu, err := cpuTime(p.Pid()); err == nil {
			in.CPUMs = ms(cpu - cpu0[j])
			total += cpu - cpu0[j]
		}
		in.PeakRSS, in.RSS, _ = procs.Memory(p.Pid())
		st.PeakRSS += in.PeakRSS
		st.RSS += in.RSS
		st.PeakReset = st.PeakReset && reset[j]
		if len(ps) > 1 {
			st.Instances = append(st.Instances, in)
		}
	}
	st.CPUPerRequestMs = ms(perRequest(total, requests))
	return st
}

// slot runs one slot: every worker sends its requests to t, one after
// the other. It adds the slot's wall time to a.busy.
func (h *harness) slot(ctx context.Context, t *target, cs caseSpec, bodies [][]byte, want int64, a *acc) {
	start := time.Now()
	var wg sync.WaitGroup
	for w := range cs.conc {
		wg.Go(func() {
			buf := make([]byte, 32<<10)
			for range perWorker(cs.conc) {
				h.do(ctx, t, cs, bodies[w], sessionID(w), want, buf, a)
			}
		})
	}
	wg.Wait()
	a.mu.Lock()
	a.busy += time.Since(start)
	a.mu.Unlock()
}

// clientHeaders sets each client's own headers (Claude Code 2.1.197, Codex
// CLI 0.169.0, opencode 1.18.33), its session header too unless session
// is "".
func clientHeaders(hd http.Header, p Protocol, session string) {
	switch p {
	case Anthropic:
		hd["Accept"] = []string{"application/json"}
		hd["Anthropic-Version"] = []string{"2023-06-01"}
		hd["Anthropic-Beta"] = []string{"claude-code-20250219,context-management-2025-06-27,interleaved-thinking-2025-05-14"}
		hd["X-Api-Key"] = []string{"sk-ant-loadtest-not-a-real-key"}
		hd["User-Agent"] = []string{"claude-cli/2.1.197 (external, cli)"}
		if session != "" {
			hd["X-Claude-Code-Session-Id"] = []string{session}
		}
	case Responses:
		hd["Accept"] = []string{"text/event-stream"}
		hd["Authorization"] = []string{"Bearer sk-loadtest-not-a-real-key"}
		hd["Originator"] = []string{"codex_exec"}
		hd["User-Agent"] = []string{"codex_exec/0.169.0 (Linux; x86_64) (codex_exec; 0.169.0)"}
		if session != "" {
			hd["Session-Id"] = []string{session}
		}
	case Chat:
		hd["Authorization"] = []string{"Bearer sk-loadtest-not-a-real-key"}
		hd["User-Agent"] = []string{"opencode/1.18.33 ai-sdk/openai-compatible"}
		if session != "" {
			hd["X-Session-Id"] = []string{session}
		}
	}
}

// do sends one request and records it in a.
func (h *harness) do(ctx context.Context, t *target, cs caseSpec, body []byte, session string, want int64, buf []byte, a *acc) {
	id := "r" + strconv.FormatInt(h.ids.Add(1), 10)
	inst := t.rr.next(len(t.urls))
	a.mu.Lock()
	a.sent[inst]++
	a.mu.Unlock()
	url := t.urls[inst] + pathOf(cs.proto)
	if cs.proto == Anthropic {
		url += "?beta=true"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		a.fail(err.Error())
		return
	}
	hd := req.Header
	hd["Content-Type"] = []string{"application/json"}
	if h.opt.NoSessionHeader {
		session = ""
	}
	clientHeaders(hd, cs.proto, session)
	hd[idHeader] = []string{id}
	hd[modeHeader] = []string{string(cs.mode)}

	start := time.Now()
	resp, err := t.client.Do(req)
	if err != nil {
		h.up.take(id)
		a.fail(err.Error())
		return
	}
	var n int64
	var first time.Time
	var rerr error
	for {
		k, err := resp.Body.Read(buf)
		if k > 0 && n == 0 {
			first = time.Now()
		}
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			rerr = err
			break
		}
	}
	end := time.Now()
	resp.Body.Close()
	rec, ok := h.up.take(id)
	switch {
	case rerr != nil:
		a.fail("reading the answer: " + rerr.Error())
		return
	case resp.StatusCode != http.StatusOK:
		a.fail(fmt.Sprintf("status %d", resp.StatusCode))
		return
	case n != want:
		a.fail(fmt.Sprintf("answer of %d bytes, want %d", n, want))
		return
	case !ok:
		a.fail("the upstream did not see the request")
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lat = append(a.lat, end.Sub(start))
	a.ttfb = append(a.ttfb, first.Sub(start))
	a.relay = append(a.relay, first.Sub(rec.firstByte))
	a.upBytes += rec.received
	if t.name == Ctxguard {
		if resp.Header.Get("X-Ctxguard-Error-Id") != "" {
			a.failed++
		}
		if resp.Header.Get("X-Ctxguard-Skipped") != "" {
			a.skip++
		}
		if p := resp.Header.Get("X-Ctxguard-Passes"); p != "" {
			a.rewritten++
			a.passes = p
		}
		a.tokBefore, _ = strconv.Atoi(resp.Header.Get("X-Ctxguard-Tokens-Before"))
		a.tokAfter, _ = strconv.Atoi(resp.Header.Get("X-Ctxguard-Tokens-After"))
	}
}

func (a *acc) fail(msg string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errors++
	if a.firstErr == "" {
		a.firstErr = msg
	}
}

// cleanEnv is the harness's environment without CTXGUARD_* variables, so
// the proxies run with what the harness configures.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CTXGUARD_") {
			env = append(env, kv)
		}
	}
	return env
}

func machine() Machine {
	m := Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// loadAvg returns the first three fields of /proc/loadavg ("" if absent).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func relPath(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil {
		return r
	}
	return p
}

// sortedInts returns in sorted, without duplicates.
func sortedInts(in []int) []int {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
