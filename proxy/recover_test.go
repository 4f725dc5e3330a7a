package proxy

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
)

// windowed answers bodies up to max bytes with a streamed success, and
// longer ones with the given error.
func windowed(max int, status int, errBody string) func(w http.ResponseWriter, r *http.Request, body []byte) {
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		if len(body) > max {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(errBody))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
	}
}

const (
	tooLongAnthropic  = `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 215000 tokens > 200000 maximum"}}`
	tooLargeAnthropic = `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`
	tooLongOpenAI     = `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	notOverflow       = `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}`
)

// recovering is a Rewriter that sends the body as it is and, on overflow,
// offers a retry body (or none).
type recovering struct {
	retry   []byte
	calls   atomic.Int32
	got     protocol.Overflow
	release atomic.Int32
}

func (rw *recovering) Rewrite(_ context.Context, _ *http.Request, _ protocol.Protocol, body []byte) Outcome {
	return Outcome{Body: body, Recover: func(_ context.Context, o protocol.Overflow) ([]byte, func(), bool) {
		rw.calls.Add(1)
		rw.got = o
		if rw.retry == nil {
			return nil, nil, false
		}
		return rw.retry, func() { rw.release.Add(1) }, true
	}}
}

func TestRecoverOverflow(t *testing.T) {
	big := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`)
	small := []byte(`{"model":"m","messages":[{"role":"user","content":"summary"}]}`)
	for _, tc := range []struct {
		name      string
		proto     protocol.Protocol
		path      string
		max       int // what the upstream takes
		status    int
		errBody   string
		retry     []byte
		wantCalls int32
		wantUp    int // requests the upstream got
		wantCode  int
		recovered bool
	}{
		{"anthropic recovered", anthropic.Protocol, "/v1/messages", 1000, 400, tooLongAnthropic, small, 1, 2, 200, true},
		{"413 recovered", anthropic.Protocol, "/v1/messages", 1000, 413, tooLargeAnthropic, small, 1, 2, 200, true},
		{"responses recovered", responses.Protocol, "/v1/responses", 1000, 400, tooLongOpenAI, small, 1, 2, 200, true},
		{"chat recovered", chat.Protocol, "/v1/chat/completions", 1000, 400, tooLongOpenAI, small, 1, 2, 200, true},
		{"the retry overflows too: one retry only", anthropic.Protocol, "/v1/messages", 10, 400, tooLongAnthropic, small, 1, 2, 400, true},
		{"no retry body: the error as it came", anthropic.Protocol, "/v1/messages", 1000, 400, tooLongAnthropic, nil, 1, 1, 400, false},
		{"another 400: untouched", anthropic.Protocol, "/v1/messages", 1000, 400, notOverflow, small, 0, 1, 400, false},
		{"a huge error body is no overflow", anthropic.Protocol, "/v1/messages", 1000, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 2 tokens > 1 maximum","pad":"` + strings.Repeat("p", 70_000) + `"}}`, small, 0, 1, 400, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, windowed(tc.max, tc.status, tc.errBody))
			rw := &recovering{retry: tc.retry}
			recs := make(chan *record.Exchange, 2)
			_, s, _ := newProxy(t, up.URL, Options{Rewriter: rw, Protocols: []protocol.Protocol{tc.proto}, Record: func(x *record.Exchange) { recs <- x }})
			res, body := do(t, rawClient(), http.MethodPost, s.URL+tc.path, http.Header{"Content-Type": {"application/json"}}, bytes.NewReader(big))
			if res.StatusCode != tc.wantCode {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.wantCode, body)
			}
			if n := rw.calls.Load(); n != tc.wantCalls {
				t.Errorf("Recover called %d times, want %d", n, tc.wantCalls)
			}
			rs := up.received()
			if len(rs) != tc.wantUp {
				t.Fatalf("upstream got %d requests, want %d", len(rs), tc.wantUp)
			}
			if tc.wantUp == 2 && !bytes.Equal(rs[1].Body, small) {
				t.Errorf("the retry sent %q", rs[1].Body)
			}
			if got := res.Header.Get(RecoveredHeader) == "1"; got != tc.recovered {
				t.Errorf("%s = %q", RecoveredHeader, res.Header.Get(RecoveredHeader))
			}
			if tc.wantCode != 200 && tc.wantUp == 1 && string(body) != tc.errBody {
				t.Errorf("the error was not forwarded byte for byte: %.200s", body)
			}
			// The record says what the client saw.
			select {
			case x := <-recs:
				if (x.Outcome == record.Recovered) != tc.recovered || x.Status != tc.wantCode || x.Protocol != tc.proto.Name() || x.Path != tc.path {
					t.Errorf("record: outcome %s status %d protocol %s path %s", x.Outcome, x.Status, x.Protocol, x.Path)
				}
				if tc.recovered && x.BytesOut != int64(len(small)) {
					t.Errorf("record: %d bytes sent, the retry had %d", x.BytesOut, len(small))
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no record")
			}
			if tc.name == "anthropic recovered" && (rw.got != protocol.Overflow{Tokens: 215000, Limit: 200000}) {
				t.Errorf("overflow read as %+v", rw.got)
			}
		})
	}
}
