package engine

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/digest"

	"github.com/ctxguard/ctxguard/internal/guardtest"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/store"
)

// fetchSession returns the requests of a session whose third request
// brings a large WebFetch result, then goes on.
func fetchSession() [][]byte {
	page := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 2000) // ~90 KB
	msgs := []string{`{"role":"user","content":"what does the page say?"}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"WebFetch","input":{"url":"https://example.com","prompt":"what does it say about foxes?"}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":` + string(jsonscan.AppendQuote(nil, page)) + `}]}`,
	}
	var out [][]byte
	for i := 0; i < 4; i++ {
		out = append(out, []byte(`{"model":"claude-sonnet-4-5","max_tokens":1000,"messages":[`+strings.Join(msgs, ",")+`]}`))
		msgs = append(msgs, fmt.Sprintf(`{"role":"assistant","content":"answer %d"}`, i), fmt.Sprintf(`{"role":"user","content":"next %d"}`, i))
	}
	return out
}

// TestDigest: the request that brings a large result of a listed tool gets
// the small model's answer in its place; every later request, and another
// Guard on the store, send the same; a result the summarizer failed on
// stays whole for good.
func TestDigest(t *testing.T) {
	cfg := config.Defaults()
	pass.Update(&cfg.Passes, func(s *digest.Config) { s.Enabled = true })
	bodies := fetchSession()
	for _, mode := range []string{"fast", "fail"} {
		t.Run(mode, func(t *testing.T) {
			st := store.NewMemory()
			sum := &ctlSummarizer{mode: mode}
			g := newEngine(t, cfg, withStore(st), withSummarizer(sum))
			var sent [][]byte
			for i, b := range bodies {
				res := g.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(2), b)
				if err := validRewrite(anthropic.Protocol, cfg, b, res.Body); err != nil {
					t.Fatal(err)
				}
				digested := strings.Contains(string(res.Body), "had a small model read this WebFetch result")
				if digested != (mode == "fast") {
					t.Fatalf("request %d: digested %v", i, digested)
				}
				sent = append(sent, bytes.Clone(res.Body))
			}
			if sum.count() != 1 {
				t.Errorf("%d summarizer calls for one result", sum.count())
			}
			// Another Guard on the store, whose summarizer now works.
			g2 := newEngine(t, cfg, withStore(st), withSummarizer(&ctlSummarizer{mode: "fast"}))
			for i, b := range bodies {
				if res := g2.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(2), b); !bytes.Equal(res.Body, sent[i]) {
					t.Fatalf("request %d: another Guard sent other bytes", i)
				}
			}
		})
	}
}
