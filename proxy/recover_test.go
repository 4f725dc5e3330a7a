package proxy

import (
	"bytes"
	"context"
	"errors"
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

// overflowing answers the retry body (small) with retryStatus and
// retryBody, or with a streamed success when retryStatus is 0, and any
// other body with status and errBody; retryStatus -1 closes the
// connection on the retry without an answer.
func overflowing(small []byte, status int, errBody string, retryStatus int, retryBody string) func(w http.ResponseWriter, r *http.Request, body []byte) {
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		st, b := status, errBody
		if bytes.Equal(body, small) {
			st, b = retryStatus, retryBody
		}
		switch st {
		case 0:
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
			return
		case -1:
			c, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				c.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(st)
		_, _ = w.Write([]byte(b))
	}
}

const (
	tooLongAnthropic  = `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 215000 tokens > 200000 maximum"}}`
	tooLongAgain      = `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 201234 tokens > 200000 maximum"}}`
	tooLargeAnthropic = `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`
	tooLongOpenAI     = `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	notOverflow       = `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}`
	overloaded        = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
)

// recovering is a Rewriter that sends the body as it is, describes it
// with X-Ctxguard-Tokens-After: first and, on overflow, offers a retry
// body (or none) whose Sent makes that header "retry".
type recovering struct {
	retry   []byte
	calls   atomic.Int32
	sent    atomic.Int32
	got     protocol.Overflow
	release atomic.Int32
}

func (rw *recovering) Rewrite(_ context.Context, _ *http.Request, _ protocol.Protocol, body []byte) Outcome {
	hdr := http.Header{"X-Ctxguard-Tokens-After": {"first"}}
	return Outcome{Body: body, RespHeader: hdr, Recover: func(_ context.Context, o protocol.Overflow) (Retry, error) {
		rw.calls.Add(1)
		rw.got = o
		if rw.retry == nil {
			return Retry{}, errors.New("nothing smaller")
		}
		return Retry{Body: rw.retry, Release: func() { rw.release.Add(1) }, Sent: func() {
			rw.sent.Add(1)
			hdr.Set("X-Ctxguard-Tokens-After", "retry")
		}}, nil
	}}
}

// TestRecoverOverflow: an overflow is retried once with the Rewriter's
// body. Only a 2xx retry is a recovery (X-Ctxguard-Recovered, outcome
// recovered); a retry refused too, one that cannot be sent, or no retry
// body is a failed recovery with its reason, and the client gets the
// upstream's answer byte for byte, described by the headers of the body
// that got it.
func TestRecoverOverflow(t *testing.T) {
	big := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 2000) + `"}]}`)
	small := []byte(`{"model":"m","messages":[{"role":"user","content":"summary"}]}`)
	for _, tc := range []struct {
		name        string
		proto       protocol.Protocol
		path        string
		status      int
		errBody     string
		retryStatus int // 0: success, -1: no answer
		retryBody   string
		retry       []byte
		wantCalls   int32
		wantUp      int // requests the upstream got
		wantCode    int
		wantBody    string // the answer, byte for byte, when not a success
		outcome     record.Outcome
		reason      string // in the record's Reason
		tokensAfter string // the header the answer carries
	}{
		{"anthropic recovered", anthropic.Protocol, "/v1/messages", 400, tooLongAnthropic, 0, "", small, 1, 2, 200, "", record.Recovered, "", "retry"},
		{"413 recovered", anthropic.Protocol, "/v1/messages", 413, tooLargeAnthropic, 0, "", small, 1, 2, 200, "", record.Recovered, "", "retry"},
		{"responses recovered", responses.Protocol, "/v1/responses", 400, tooLongOpenAI, 0, "", small, 1, 2, 200, "", record.Recovered, "", "retry"},
		{"chat recovered", chat.Protocol, "/v1/chat/completions", 400, tooLongOpenAI, 0, "", small, 1, 2, 200, "", record.Recovered, "", "retry"},
		{"the retry overflows too: one retry only, its error as it came", anthropic.Protocol, "/v1/messages", 400, tooLongAnthropic, 400, tooLongAgain, small, 1, 2, 400, tooLongAgain,
			record.RecoveryFailed, "too long too: 201234 tokens, limit 200000", "retry"},
		{"the retry gets another error", anthropic.Protocol, "/v1/messages", 400, tooLongAnthropic, 529, overloaded, small, 1, 2, 529, overloaded,
			record.RecoveryFailed, "got status 529", "retry"},
		{"the retry cannot be sent: the first error as it came", anthropic.Protocol, "/v1/messages", 400, tooLongAnthropic, -1, "", small, 1, 2, 400, tooLongAnthropic,
			record.RecoveryFailed, "could not be sent", "first"},
		{"no retry body: the error as it came", anthropic.Protocol, "/v1/messages", 400, tooLongAnthropic, 0, "", nil, 1, 1, 400, tooLongAnthropic,
			record.RecoveryFailed, "nothing smaller", "first"},
		{"another 400: untouched", anthropic.Protocol, "/v1/messages", 400, notOverflow, 0, "", small, 0, 1, 400, notOverflow, record.Unchanged, "", "first"},
		{"a huge error body is no overflow", anthropic.Protocol, "/v1/messages", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 2 tokens > 1 maximum","pad":"` + strings.Repeat("p", 70_000) + `"}}`, 0, "", small, 0, 1, 400, "",
			record.Unchanged, "", "first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, overflowing(small, tc.status, tc.errBody, tc.retryStatus, tc.retryBody))
			rw := &recovering{retry: tc.retry}
			recs := make(chan *record.Exchange, 2)
			_, s, _ := newProxy(t, up.URL, Options{Rewriter: rw, Protocols: []protocol.Protocol{tc.proto}, Record: func(x *record.Exchange) { recs <- x }})
			res, body := do(t, rawClient(), http.MethodPost, s.URL+tc.path, http.Header{"Content-Type": {"application/json"}}, bytes.NewReader(big))
			if res.StatusCode != tc.wantCode {
				t.Fatalf("status %d, want %d: %.200s", res.StatusCode, tc.wantCode, body)
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
			recovered := tc.outcome == record.Recovered
			if got := res.Header.Get(RecoveredHeader); (got == "1") != recovered || (!recovered && got != "") {
				t.Errorf("%s = %q, want it only on a recovery", RecoveredHeader, got)
			}
			if got := res.Header.Get("X-Ctxguard-Tokens-After"); got != tc.tokensAfter {
				t.Errorf("X-Ctxguard-Tokens-After: %q, want the %s body's", got, tc.tokensAfter)
			}
			want := int32(0)
			if tc.tokensAfter == "retry" {
				want = 1
			}
			if n := rw.sent.Load(); n != want {
				t.Errorf("Sent called %d times, want %d", n, want)
			}
			if tc.wantBody != "" && string(body) != tc.wantBody {
				t.Errorf("the error was not forwarded byte for byte: %.200s", body)
			}
			// The record says what the client saw.
			select {
			case x := <-recs:
				if x.Outcome != tc.outcome || x.Status != tc.wantCode || x.Protocol != tc.proto.Name() || x.Path != tc.path {
					t.Errorf("record: outcome %s status %d protocol %s path %s; want outcome %s", x.Outcome, x.Status, x.Protocol, x.Path, tc.outcome)
				}
				if !strings.Contains(x.Reason, tc.reason) || (tc.reason == "") != (x.Reason == "") {
					t.Errorf("record: reason %q, want one with %q", x.Reason, tc.reason)
				}
				if want := len(big); tc.tokensAfter == "retry" {
					want = len(small)
					if x.BytesOut != int64(want) {
						t.Errorf("record: %d bytes sent, the retry had %d", x.BytesOut, want)
					}
				} else if x.BytesOut != int64(want) {
					t.Errorf("record: %d bytes sent, the first body had %d", x.BytesOut, want)
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
