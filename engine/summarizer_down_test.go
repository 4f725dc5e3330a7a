package engine

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/internal/breaker"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/store/storetest"
	"github.com/ctxguard/ctxguard/summarize"
)

// modelSummary marks the summaries the fake model API writes.
const modelSummary = "MODEL SUMMARY"

// TestCompactionSummarizerDown: compaction with ctxguard's own summarizer
// (package summarize, session mode) calling a model API that fails — it
// answers 500, hangs, or answers slower than summarizer.timeout — over
// real HTTP in the Messages wire format. After the first failure, the
// breaker of that upstream and model is open: no request of any session
// calls it or waits for it, every compaction carries the extractive
// summary, and the breaker's state says so. (With compact.wait at an
// hour for 500 and slow, a request that waited for the model would hang
// the test; with the model hung, compact.wait is short, the request that
// waits for it gives up once, and that opens the breaker.) Once the
// back-off passed (an injected clock), one call probes the API; when it
// answers again, compactions carry the model's summary again.
func TestCompactionSummarizerDown(t *testing.T) {
	for _, mode := range []string{"500", "hung", "slow"} {
		t.Run(mode, func(t *testing.T) {
			var mu sync.Mutex
			healthy := false
			api := anthropictest.NewServer(anthropictest.Options{Script: func(*anthropictest.Request) anthropictest.Turn {
				mu.Lock()
				ok := healthy
				mu.Unlock()
				answer := anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text(modelSummary)}}
				switch {
				case ok:
				case mode == "500":
					answer.Status = http.StatusInternalServerError
				default: // hung, or slower than the timeout: both end when the call does
					answer.Delay = time.Hour
				}
				return answer
			}})
			t.Cleanup(api.Close) // after the Guard's, which ends a hung call
			calls := func() int { return len(api.MessagesRequests()) }
			cfg := smallWindow()
			cfg.Upstreams.Anthropic = api.URL
			pass.Update(&cfg.Passes, func(s *compact.Config) {
				s.Summarizer.Retries = 0
				s.Wait = time.Hour
			})
			switch mode {
			case "hung":
				pass.Update(&cfg.Passes, func(s *compact.Config) { s.Wait = 200 * time.Millisecond })
			case "slow":
				pass.Update(&cfg.Passes, func(s *compact.Config) { s.Summarizer.Timeout = 200 * time.Millisecond })
			}
			clk := storetest.NewClock(time.Date(2026, 11, 3, 8, 0, 0, 0, time.UTC))
			g := newEngine(t, cfg, withClock(clk.Now))
			sc := g.current().summarizer.(*summarize.Client)
			state := func() breaker.State {
				bs := sc.Breakers()
				switch len(bs) {
				case 0:
					return breaker.Closed // no call yet
				case 1:
					return bs[0].State
				}
				t.Fatalf("%d breakers, want 1 (one upstream, one model)", len(bs))
				return 0
			}
			// send sends one request; a request that waits for the model
			// (an hour) fails the test instead.
			send := func(h http.Header, body []byte) Result {
				t.Helper()
				done := make(chan Result, 1)
				go func() { done <- g.RewriteBody(context.Background(), anthropic.Protocol, h, body) }()
				select {
				case res := <-done:
					if res.Err != nil {
						t.Fatal(res.Err)
					}
					return res
				case <-time.After(time.Minute):
					t.Fatal("a request waited for the summarizer")
					return Result{}
				}
			}
			idle := func() {
				if mode != "hung" { // a hung call ends with the Guard
					g.current().compactPass().WaitIdle()
				}
			}
			sessions := generated(t, anthropic.Protocol, 3, 300)
			header := func(i int) http.Header {
				return http.Header{"X-Claude-Code-Session-Id": {fmt.Sprint("down-", i)}, "X-Api-Key": {"sk-ant-down-test"}}
			}

			// Session 0 until the first failure.
			failedAt := -1
			for i, b := range sessions[0] {
				send(header(0), b)
				idle()
				if state() != breaker.Closed {
					failedAt = i
					break
				}
			}
			if failedAt < 0 {
				t.Fatal("the summarizer never failed")
			}
			after := calls()
			if want := 1; after != want {
				t.Errorf("%d calls until the first failure, want %d", after, want)
			}
			// The rest of session 0, and all of an unrelated session 1.
			extractive := 0
			for s, bodies := range [][][]byte{sessions[0][failedAt+1:], sessions[1]} {
				for i, b := range bodies {
					res := send(header(s), b)
					if strings.Contains(string(res.Body), modelSummary) {
						t.Fatalf("session %d request %d: a model's summary from a failing model", s, i)
					}
					if res.Compaction != "" {
						extractive++
					}
					idle()
				}
			}
			if n := calls(); n != after {
				t.Errorf("%d more calls to the failing model after the first failure", n-after)
			}
			if extractive < 2 {
				t.Fatalf("%d compactions after the first failure; the test needs two or more", extractive)
			}
			if st := state(); st == breaker.Closed {
				t.Fatalf("breaker %v while the model fails", st)
			}
			if mode == "hung" {
				return // the hung call probes until its timeout
			}
			// The model is back; past the back-off, one call probes it,
			// and session 2 gets the model's summaries.
			mu.Lock()
			healthy = true
			mu.Unlock()
			clk.Advance(summarize.BreakerBackoff)
			model := 0
			for i, b := range sessions[2] {
				res := send(header(2), b)
				if strings.Contains(string(res.Body), modelSummary) && res.Compaction != "" {
					model++
				}
				idle()
				if i == 0 && state() != breaker.Closed && calls() != after {
					t.Errorf("breaker %v after a probe the model answered", state())
				}
			}
			if model == 0 || state() != breaker.Closed {
				t.Errorf("%d compactions with the model's summary once it was back; breaker %v", model, state())
			}
		})
	}
}
