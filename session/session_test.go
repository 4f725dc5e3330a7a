package session

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
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
		{"claude code header", http.Header{"X-Claude-Code-Session-Id": {"s1"}}, body(cc, `"hi"`), "h:s1"},
		{"codex header", http.Header{"Session-Id": {"c1"}, "Thread-Id": {"t1"}}, body("", `"hi"`), "h:c1"},
		{"opencode header", http.Header{"X-Session-Id": {"o1"}}, body("", `"hi"`), "h:o1"},
		{"metadata json", nil, body(cc, `"hi"`), "m:abc-123"},
		{"metadata legacy", nil, body(old, `"hi"`), "m:0f-12"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := anthropic.Parse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if got := Key(tc.header, c); got != tc.want {
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
	ka, kb, kc := Key(nil, a), Key(nil, b), Key(nil, c)
	if !strings.HasPrefix(ka, "p:") || ka != kb {
		t.Errorf("keys %q and %q should be equal prefix keys", ka, kb)
	}
	if ka == kc {
		t.Errorf("different first messages gave the same key %q", ka)
	}
	if Key(http.Header{}, nil) != "" {
		t.Error("no header, no body: want empty key")
	}
}
