package anthropic

import (
	"hash/maphash"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/protocol"
)

// TestQuickKey: the key is the top-level system and the messages up to
// the first user message, by their text: appended turns, and Claude
// Code's re-encoding of a message, keep it; another system prompt or
// first prompt changes it.
func TestQuickKey(t *testing.T) {
	seed := maphash.MakeSeed()
	const sys = `"system":[{"type":"text","text":"You are Claude Code."},{"type":"text","text":"rules","cache_control":{"type":"ephemeral"}}]`
	base, ok := Protocol.QuickKey(seed, []byte(`{"model":"claude-sonnet-4-5",`+sys+`,"messages":[{"role":"user","content":"fix the bug"}]}`))
	if !ok {
		t.Fatal("a Messages request gives no key")
	}
	for _, tc := range []struct {
		name, body string
		same, ok   bool
	}{
		{"turns appended", `{"model":"claude-sonnet-4-5",` + sys + `,"messages":[{"role":"user","content":[{"type":"text","text":"fix the bug","cache_control":{"type":"ephemeral"}}]},{"role":"assistant","content":"on it"},{"role":"user","content":"thanks"}]}`, true, true},
		{"the system prompt's cache marker moved", `{"model":"claude-sonnet-4-5","system":[{"type":"text","text":"You are Claude Code.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"rules"}],"messages":[{"role":"user","content":"fix the bug"}]}`, true, true},
		{"another first prompt", `{"model":"claude-sonnet-4-5",` + sys + `,"messages":[{"role":"user","content":"write tests"}]}`, false, true},
		{"another system prompt", `{"model":"claude-sonnet-4-5","system":"be brief","messages":[{"role":"user","content":"fix the bug"}]}`, false, true},
		{"the Responses API's instructions are not the system prompt", `{"model":"claude-sonnet-4-5","instructions":"x",` + sys + `,"messages":[{"role":"user","content":"fix the bug"}]}`, true, true},
		{"a Responses request has no messages", `{"model":"gpt-5","input":"fix the bug"}`, false, false},
		{"not JSON", `{"model":`, false, false},
	} {
		got, ok := Protocol.QuickKey(seed, []byte(tc.body))
		if ok != tc.ok || (ok && (got == base) != tc.same) {
			t.Errorf("%s: ok %v, same key %v; want %v, %v", tc.name, ok, got == base, tc.ok, tc.same)
		}
	}
}

func TestFeatures(t *testing.T) {
	c, err := Parse([]byte(`{"model":"m","messages":[{"role":"user","content":"Your task is to create a detailed summary of the conversation so far."}]}`))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Anthropic-Beta": {"a,b", "context-1m-2025-08-07"}}
	got := Protocol.Features(h, c)
	if d := cmp.Diff([]string{"a,b", "context-1m-2025-08-07"}, got.Betas); d != "" || !got.ClientCompaction {
		t.Errorf("features %+v (betas -want +got:\n%s)", got, d)
	}
	c, _ = Parse([]byte(`{"model":"m","messages":[{"role":"user","content":"fix it"}]}`))
	if got := Protocol.Features(nil, c); got.ClientCompaction || got.Betas != nil {
		t.Errorf("a plain request: %+v", got)
	}
}

// TestCallKey: a call of ctxguard's own with a configured key sends it in
// x-api-key, with the API version; one in a session's name sends the
// session's credentials.
func TestCallKey(t *testing.T) {
	caller := Protocol.(protocol.Caller)
	h := http.Header{}
	caller.CallHeader(h, nil)
	caller.CallKey(h, "sk-ant-key")
	if d := cmp.Diff(http.Header{"X-Api-Key": {"sk-ant-key"}, "Anthropic-Version": {Version}}, h); d != "" {
		t.Errorf("configured key (-want +got):\n%s", d)
	}
	h = http.Header{}
	caller.CallHeader(h, http.Header{"Authorization": {"Bearer oauth"}, "Anthropic-Version": {"2024-01-01"}, "Anthropic-Beta": {"x"}})
	if d := cmp.Diff(http.Header{"Authorization": {"Bearer oauth"}, "Anthropic-Version": {"2024-01-01"}}, h); d != "" {
		t.Errorf("session's credentials (-want +got):\n%s", d)
	}
}
