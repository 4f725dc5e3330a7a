package chat

import (
	"os"
	"testing"
)

// bigBody returns an opencode-shaped request of about 1 MB (session's
// rounds), or the body in $CTXGUARD_BENCH_BODY.
func bigBody(tb testing.TB) []byte {
	if p := os.Getenv("CTXGUARD_BENCH_BODY"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	// A round is about 6.5 KB.
	return session(1 << 20 / 6500)
}

func BenchmarkParse(b *testing.B) {
	body := bigBody(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		c, err := Parse(body)
		if err != nil {
			b.Fatal(err)
		}
		c.Release()
	}
}

// BenchmarkParseAfter parses the next request of a session: the body of
// the last one with two messages appended.
func BenchmarkParseAfter(b *testing.B) {
	body := bigBody(b)
	prev, err := Parse(body)
	if err != nil {
		b.Fatal(err)
	}
	end := prev.List.End - 1
	next := append(append(append([]byte(nil), body[:end]...),
		`,{"role":"assistant","content":"more"},{"role":"user","content":"go on"}`...), body[end:]...)
	st := Stable(prev, next)
	b.SetBytes(int64(len(next)))
	b.ReportAllocs()
	for b.Loop() {
		c, err := ParseAfter(next, prev, st)
		if err != nil {
			b.Fatal(err)
		}
		c.Release()
	}
}
