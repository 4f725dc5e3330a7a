package clearing

import (
	"math/rand/v2"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
	"github.com/ctxguard/ctxguard/tools/sessiongen"
)

// TestFrame: the sizes the pass tells later passes (what compaction
// measures the window with) are within 5% of the estimate of the
// messages as sent, for every protocol, with nothing cleared.
func TestFrame(t *testing.T) {
	for _, p := range []protocol.Protocol{anthropic.Protocol, responses.Protocol, chat.Protocol} {
		for seed := range uint64(3) {
			gen, err := sessiongen.Generate(rand.New(rand.NewPCG(seed, 11)), sessiongen.Options{Turns: 100, MaxResult: 8000, Protocol: p.Name()})
			if err != nil {
				t.Fatal(err)
			}
			reqs, err := gen.Requests()
			if err != nil {
				t.Fatal(err)
			}
			body := reqs[len(reqs)-1].Body
			c, err := p.Parse(body)
			if err != nil {
				t.Fatal(err)
			}
			ps, err := New(Defaults(), &store.Blobs{Store: store.NewMemory()})
			if err != nil {
				t.Fatal(err)
			}
			a, err := ps.analyze(&pipeline.Request{Conv: c})
			if err != nil {
				t.Fatal(err)
			}
			pn := newPlanner(0, a.costs)
			s := newSizes(pn, plan{}, a.costs)
			got := s.Size(len(c.Messages), 0)
			want := tokens.Estimate(body[c.Messages[0].Span.Start:c.List.End])
			if r := float64(got) / float64(want); r < 0.95 || r > 1.05 {
				t.Errorf("%s seed %d: sizes say %d tokens, the estimate is %d (ratio %.3f)", p.Name(), seed, got, want, r)
			} else {
				t.Logf("%s seed %d: ratio %.3f", p.Name(), seed, r)
			}
		}
	}
}
