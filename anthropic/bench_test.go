package anthropic

import (
	"os"
	"testing"

	"github.com/ctxguard/ctxguard/tools/transcript"
)

// claudeCodeBody returns a Claude Code-shaped request of at least n bytes
// rebuilt from a real session in transcript's testdata.
func claudeCodeBody(tb testing.TB, n int) []byte {
	tb.Helper()
	ss, err := transcript.Load([]string{"../tools/transcript/testdata/claude-code", "../tools/transcript/testdata/swe-agent"}, transcript.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	var best []byte
	for _, s := range ss {
		b, err := transcript.NewBuilder(s, transcript.BuildOptions{})
		if err != nil || b.Len() == 0 {
			continue
		}
		r, _ := b.Request(b.Len() - 1)
		if len(r.Body) > len(best) {
			best = r.Body
		}
	}
	if len(best) == 0 {
		tb.Skip("no testdata sessions")
	}
	return best
}

func BenchmarkParse(b *testing.B) {
	body := claudeCodeBody(b, 0)
	if p := os.Getenv("CTXGUARD_BENCH_BODY"); p != "" {
		body, _ = os.ReadFile(p)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(body); err != nil {
			b.Fatal(err)
		}
	}
}
