package ctxguard

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/sessiongen"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

// smallWindow is a configuration whose model has a small window, so that
// generated sessions reach it: the line is 36K tokens.
func smallWindow() config.Config {
	cfg := config.Defaults()
	small := model.Limits{Window: 40_000, MaxOutput: 4_000, LongWindow: 40_000}
	cfg.Models.Default = small
	cfg.Models.Overrides = map[string]model.Limits{}
	for _, in := range model.Default().Models() {
		cfg.Models.Overrides[in.ID] = small
	}
	return cfg
}

// fakeSummarizer answers at once with a summary naming its input's size.
type fakeSummarizer struct {
	mu    sync.Mutex
	calls int
	keys  map[string]int
}

func (f *fakeSummarizer) Summarize(ctx context.Context, j *compact.Job) (compact.Summary, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	return compact.Summary{Text: fmt.Sprintf("1. User requests: ...\n(summary of %d bytes)", len(j.Input)), Model: "fake-small", InputTokens: len(j.Input) / 4, OutputTokens: 20}, nil
}

// generated returns generated sessions' request streams in protocol p.
func generated(t testing.TB, p protocol.Protocol, seeds int, turns int) [][][]byte {
	t.Helper()
	var out [][][]byte
	for seed := range uint64(seeds) {
		gen, err := sessiongen.Generate(rand.New(rand.NewPCG(seed, 11)), sessiongen.Options{Turns: turns, MaxResult: 8_000, Protocol: p.Name()})
		if err != nil {
			t.Fatal(err)
		}
		reqs, err := gen.Requests()
		if err != nil {
			t.Fatal(err)
		}
		var bodies [][]byte
		for _, r := range reqs {
			bodies = append(bodies, r.Body)
		}
		out = append(out, bodies)
	}
	return out
}

func TestCompactionSmoke(t *testing.T) {
	for _, p := range Protocols() {
		t.Run(p.Name(), func(t *testing.T) {
			cfg := smallWindow()
			st := store.NewMemory()
			g := newGuard(t, cfg, WithStore(st), WithSummarizer(&fakeSummarizer{}))
			h := http.Header{"X-Claude-Code-Session-Id": {"s"}}
			for si, bodies := range generated(t, p, 2, 150) {
				compactions := 0
				maxSent := 0
				for i, b := range bodies {
					res := g.RewriteBody(context.Background(), p, h, b)
					if res.Err != nil {
						t.Fatalf("session %d request %d: %v", si, i, res.Err)
					}
					if err := validRewrite(p, cfg, b, res.Body); err != nil {
						t.Fatalf("session %d request %d: %v", si, i, err)
					}
					if strings.Contains(string(res.Body), "ctxguard compacted the first") && !strings.Contains(string(b), "ctxguard compacted") {
						compactions++
					}
					maxSent = max(maxSent, tokens.Estimate(res.Body))
					g.compact.WaitIdle()
				}
				t.Logf("session %d: %d requests, %d with a summary, largest sent %d tokens (original last %d)", si, len(bodies), compactions, maxSent, tokens.Estimate(bodies[len(bodies)-1]))
			}
		})
	}
	_ = anthropic.Protocol
	_ = chat.Protocol
	_ = responses.Protocol
}
