package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/guardtest"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

// tooLongUpstream is a Messages API whose window is limit estimated
// tokens: a longer request gets the API's "prompt is too long" error. It
// returns the sizes of the requests it got.
func tooLongUpstream(t *testing.T, limit func() int) (*httptest.Server, func() []int) {
	fake := anthropictest.New(anthropictest.Options{})
	var mu sync.Mutex
	var sizes []int
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		n := tokens.Estimate(b)
		mu.Lock()
		sizes = append(sizes, n)
		mu.Unlock()
		if l := limit(); n > l {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: %d tokens > %d maximum"}}`, n, l)
			return
		}
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	return up, func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), sizes...)
	}
}

// TestMiddlewareRecovers: an in-process client (Transport, Middleware)
// recovers from a context overflow as the proxy does: the upstream
// refuses the rewritten request as too long, the Middleware sends it
// again once, compacted harder, and the client gets the retry's answer;
// the record says recovered and describes the retry. When even the
// compacted retry is too long, the client gets that answer and the
// record says why the recovery failed.
func TestMiddlewareRecovers(t *testing.T) {
	bodies := longSession(t)
	body := bodies[len(bodies)*2/3]
	cfg := config.Defaults()
	sent := newServer(t, cfg, withStore(store.NewMemory())).engine.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(4), body).TokensAfter
	for _, tc := range []struct {
		name    string
		limit   int // the upstream's window, in estimated tokens
		status  int
		outcome record.Outcome
		tries   int
	}{
		{"retry fits", sent * 4 / 5, http.StatusOK, record.Recovered, 2},
		{"retry too long too", 100, http.StatusBadRequest, record.RecoveryFailed, 2},
		{"fits at once", sent * 2, http.StatusOK, record.Rewritten, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, sizes := tooLongUpstream(t, func() int { return tc.limit })
			s := newServer(t, cfg, withSummarizer(blockingSummarizer{}))
			recs := make(chan *record.Exchange, 4)
			s.engine.Records().Subscribe(record.ObserverFunc(func(x *record.Exchange) { recs <- x }))
			client := &http.Client{Transport: s.Transport(nil)}
			req, _ := http.NewRequest(http.MethodPost, up.URL+"/v1/messages", bytes.NewReader(body))
			req.Header = guardtest.SessionHeader(4)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Anthropic-Version", "2023-06-01")
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, answer)
			}
			got := sizes()
			if len(got) != tc.tries || (tc.tries == 2 && got[1] >= got[0]) {
				t.Fatalf("the upstream got requests of %v tokens: want %d, the second smaller", got, tc.tries)
			}
			var x *record.Exchange
			select {
			case x = <-recs:
			case <-time.After(10 * time.Second):
				t.Fatal("no record published")
			}
			if x.Outcome != tc.outcome || x.TokensAfter != got[len(got)-1] || x.BytesOut == 0 {
				t.Errorf("record: outcome %s, tokens after %d, bytes out %d; want %s, %d (the last request's), > 0", x.Outcome, x.TokensAfter, x.BytesOut, tc.outcome, got[len(got)-1])
			}
			if (tc.outcome == record.RecoveryFailed) != (x.Reason != "") {
				t.Errorf("outcome %s with reason %q", x.Outcome, x.Reason)
			}
			// The retry's edit is the recovery's.
			if tc.outcome == record.Recovered && (!x.Event || x.Cause != record.CauseRecovery) {
				t.Errorf("a recovered exchange's record: event %v, cause %q; want an event, %q", x.Event, x.Cause, record.CauseRecovery)
			}
		})
	}
}
