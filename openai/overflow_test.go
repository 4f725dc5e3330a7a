package openai

import (
	"testing"

	"github.com/ctxguard/ctxguard/protocol"
)

func TestOverflow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   protocol.Overflow
		ok     bool
	}{
		{"chat, with numbers", 400, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, protocol.Overflow{Tokens: 130512, Limit: 128000}, true},
		{"completion requested", 400, `{"error":{"message":"This model's maximum context length is 8192 tokens, however you requested 9000 tokens (8000 in your prompt; 1000 for the completion).","code":"context_length_exceeded"}}`, protocol.Overflow{Tokens: 9000, Limit: 8192}, true},
		{"responses, no numbers", 400, `{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}`, protocol.Overflow{}, true},
		{"another code", 400, `{"error":{"message":"bad","code":"invalid_value"}}`, protocol.Overflow{}, false},
		{"another status", 500, `{"error":{"message":"x","code":"context_length_exceeded"}}`, protocol.Overflow{}, false},
		{"not JSON", 400, `<html>`, protocol.Overflow{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Overflow(tc.status, []byte(tc.body))
			if ok != tc.ok || got != tc.want {
				t.Fatalf("Overflow = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func FuzzOverflow(f *testing.F) {
	f.Add(400, []byte(`{"error":{"message":"maximum context length is 1 tokens. resulted in 2 tokens","code":"context_length_exceeded"}}`))
	f.Add(413, []byte(`{}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		o, ok := Overflow(status, body)
		if !ok && (o != protocol.Overflow{}) {
			t.Fatal("figures without an overflow")
		}
		if o.Tokens < 0 || o.Limit < 0 {
			t.Fatalf("negative figures %+v", o)
		}
	})
}
