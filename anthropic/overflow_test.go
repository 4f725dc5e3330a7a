package anthropic

import (
	"testing"

	"github.com/ctxguard/ctxguard/protocol"
)

func TestOverflow(t *testing.T) {
	or := Protocol.(protocol.OverflowReader)
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   protocol.Overflow
		ok     bool
	}{
		{"too long", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 215123 tokens > 200000 maximum"},"request_id":"req_1"}`, protocol.Overflow{Tokens: 215123, Limit: 200000}, true},
		{"too large", 413, `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`, protocol.Overflow{}, true},
		{"another invalid request", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 100000 > 64000, which is the maximum allowed"}}`, protocol.Overflow{}, false},
		{"overloaded", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, protocol.Overflow{}, false},
		{"413 of another kind", 413, `{"type":"error","error":{"type":"invalid_request_error","message":"x"}}`, protocol.Overflow{}, false},
		{"not JSON", 400, `prompt is too long: 2 tokens > 1 maximum`, protocol.Overflow{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := or.Overflow(tc.status, []byte(tc.body))
			if ok != tc.ok || got != tc.want {
				t.Fatalf("Overflow = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func FuzzOverflow(f *testing.F) {
	or := Protocol.(protocol.OverflowReader)
	f.Add(400, []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 3 tokens > 2 maximum"}}`))
	f.Add(413, []byte(`{"error":{"type":"request_too_large"}}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		o, ok := or.Overflow(status, body)
		if !ok && (o != protocol.Overflow{}) {
			t.Fatal("figures without an overflow")
		}
		if o.Tokens < 0 || o.Limit < 0 {
			t.Fatalf("negative figures %+v", o)
		}
	})
}
