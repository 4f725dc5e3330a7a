package proxy

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/record"
)

// TestRecordOutcome: the proxy records every rewritable exchange, with
// what the Rewriter made of it, or why it never saw the body.
func TestRecordOutcome(t *testing.T) {
	fake := anthropictest.NewServer(anthropictest.Options{})
	defer fake.Close()
	for _, tc := range []struct {
		name    string
		header  http.Header
		body    string
		outcome record.Outcome
		skipped string
		calls   int
	}{
		{"rewriter without a record", jsonHeader(), streamReq, record.Unchanged, "", 1},
		{"content coding it cannot decode", http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"x-unknown"}}, streamReq, record.Bypassed, "content coding", 0},
		{"gzip that is not gzip", http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}, "not gzip", record.Bypassed, "undecodable body", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := make(chan *record.Exchange, 1)
			rw := &identity{}
			srv, _ := newProxyServer(t, fake.URL, Options{Rewriter: rw, Record: func(x *record.Exchange) { recs <- x }})
			res, _ := do(t, rawClient(), "POST", srv.URL+"/v1/messages", tc.header, strings.NewReader(tc.body))
			select {
			case x := <-recs:
				if x.Outcome != tc.outcome || x.Skipped != tc.skipped || x.Status != res.StatusCode || x.Protocol != "anthropic" {
					t.Errorf("record: outcome %s skipped %q status %d (client %d) protocol %q", x.Outcome, x.Skipped, x.Status, res.StatusCode, x.Protocol)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no record")
			}
			if rw.n() != tc.calls {
				t.Errorf("Rewriter called %d times, want %d", rw.n(), tc.calls)
			}
		})
	}
}
