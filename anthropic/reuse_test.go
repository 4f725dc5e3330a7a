package anthropic

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/convbuild/convbuildtest"
	"github.com/ctxguard/ctxguard/tools/transcript"
)

// equalParse checks that ParseAfter(b, prev, Stable(prev, b)) gives what
// Parse(b) gives, errors included.
func equalParse(t *testing.T, prev *conversation.Conversation, b []byte) int {
	t.Helper()
	return convbuildtest.SameParse(t, Protocol, prev, b)
}

func TestParseAfter(t *testing.T) {
	sessions, err := transcript.Load([]string{"../tools/transcript/testdata/claude-code", "../tools/transcript/testdata/swe-agent"}, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	reused := 0
	for _, s := range sessions {
		bld, err := transcript.NewBuilder(s, transcript.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var prev *conversation.Conversation
		for k := 0; k < bld.Len(); k++ {
			r, err := bld.Request(k)
			if err != nil {
				t.Fatal(err)
			}
			if prev != nil {
				reused += equalParse(t, prev, r.Body)
				// The same with one byte changed anywhere: stable
				// messages end before the change, or the parses agree on
				// the error.
				for i := 0; i < 3; i++ {
					m := bytes.Clone(r.Body)
					m[rng.IntN(len(m))] ^= byte(1 + rng.IntN(255))
					equalParse(t, prev, m)
				}
			}
			if prev, err = Parse(r.Body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if reused == 0 {
		t.Fatal("no message was reused: the test checks nothing")
	}
}

func TestStable(t *testing.T) {
	a := []byte(`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":[{"type":"text","text":"c","cache_control":{"type":"ephemeral"}}]}]}`)
	b := []byte(`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"},{"role":"assistant","content":"d"}]}`)
	c := []byte(`{"model":"m","messages":[{"role":"user","content":"X"}]}`)
	pa, _ := Parse(a)
	if got := Stable(pa, b); got != 2 {
		t.Errorf("Stable = %d, want 2 (the re-encoded last message is not stable)", got)
	}
	if got := Stable(pa, c); got != 0 {
		t.Errorf("Stable = %d, want 0", got)
	}
	if got := Stable(nil, b); got != 0 {
		t.Errorf("Stable(nil) = %d", got)
	}
}
