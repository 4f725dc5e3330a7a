package session

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
)

func TestKey(t *testing.T) {
	body := func(meta, first string) string {
		return `{"system":[{"type":"text","text":"sys"}],` + meta + `"messages":[{"role":"user","content":` + first + `},{"role":"assistant","content":"ok"}]}`
	}
	cc := `"metadata":{"user_id":"{\"device_id\":\"d\",\"session_id\":\"abc-123\"}"},`
	old := `"metadata":{"user_id":"user_ff_account_aa_session_0f-12"},`
	for _, tc := range []struct {
		name   string
		header http.Header
		body   string
		want   string
	}{
		{"claude code header", http.Header{"X-Claude-Code-Session-Id": {"s1"}}, body(cc, `"hi"`), "anthropic:h:s1"},
		{"codex header", http.Header{"Session-Id": {"c1"}, "Thread-Id": {"t1"}}, body("", `"hi"`), "anthropic:h:c1"},
		{"opencode header", http.Header{"X-Session-Id": {"o1"}}, body("", `"hi"`), "anthropic:h:o1"},
		{"metadata json", nil, body(cc, `"hi"`), "anthropic:m:abc-123"},
		{"metadata legacy", nil, body(old, `"hi"`), "anthropic:m:0f-12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := anthropic.Parse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := Key("anthropic", tc.header, c); got != tc.want {
				t.Errorf("Key = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPrefixKeyStable(t *testing.T) {
	// The first user message re-sent as a string without its marker must
	// keep the key; a different first message must change it.
	a, _ := anthropic.Parse([]byte(`{"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`))
	b, _ := anthropic.Parse([]byte(`{"system":"s","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x"},{"role":"user","content":"more"}]}`))
	c, _ := anthropic.Parse([]byte(`{"system":"s","messages":[{"role":"user","content":"bye"}]}`))
	ka, kb, kc := Key("anthropic", nil, a), Key("anthropic", nil, b), Key("anthropic", nil, c)
	if !strings.HasPrefix(ka, "anthropic:p:") || ka != kb {
		t.Errorf("keys %q and %q should be equal prefix keys", ka, kb)
	}
	if ka == kc {
		t.Errorf("different first messages gave the same key %q", ka)
	}
	if Key("anthropic", http.Header{}, nil) != "" {
		t.Error("no header, no body: want empty key")
	}
}

// TestKeyProtocols: requests of three protocols that share a session
// header, or a system prompt and first message, never share a key.
func TestKeyProtocols(t *testing.T) {
	parse := map[string]func([]byte) (*conversation.Conversation, error){
		"anthropic": func(b []byte) (*conversation.Conversation, error) {
			return anthropic.Parse(b)
		},
		"chat": func(b []byte) (*conversation.Conversation, error) { return chat.Parse(b) },
		"responses": func(b []byte) (*conversation.Conversation, error) {
			return responses.Parse(b)
		},
	}
	bodies := map[string]string{
		"anthropic": `{"model":"m","system":"be brief","messages":[{"role":"user","content":"hello"}]}`,
		"chat":      `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello"}]}`,
		"responses": `{"model":"m","instructions":"be brief","input":[{"role":"user","content":"hello"}]}`,
	}
	for _, h := range []http.Header{{"Session-Id": {"same"}}, nil} {
		seen := map[string]string{}
		for proto, body := range bodies {
			c, err := parse[proto]([]byte(body))
			if err != nil {
				t.Fatalf("%s: %v", proto, err)
			}
			k := Key(proto, h, c)
			if !strings.HasPrefix(k, proto+":") {
				t.Errorf("%s key %q does not name its protocol", proto, k)
			}
			if other, ok := seen[k]; ok {
				t.Errorf("%s and %s requests share the key %q", other, proto, k)
			}
			seen[k] = proto
		}
		// Without a body, the header's key still names the protocol.
		if h != nil && Key("chat", h, nil) == Key("anthropic", h, nil) {
			t.Errorf("a header alone gives one key to two protocols")
		}
	}
}
