package chat

import (
	"hash/maphash"
	"testing"
)

// TestQuickKey: the key is the messages up to the first user message,
// system and developer messages included, by their text; a top-level
// system member is no part of this API.
func TestQuickKey(t *testing.T) {
	seed := maphash.MakeSeed()
	const start = `{"model":"gpt-5","messages":[{"role":"system","content":"You are opencode."},{"role":"user","content":"fix the bug"}`
	base, ok := Protocol.QuickKey(seed, []byte(start+`]}`))
	if !ok {
		t.Fatal("a Chat Completions request gives no key")
	}
	for _, tc := range []struct {
		name, body string
		same, ok   bool
	}{
		{"turns appended", start + `,{"role":"assistant","content":null,"tool_calls":[]},{"role":"tool","tool_call_id":"c","content":"x"}],"stream":true}`, true, true},
		{"the user's text as parts", `{"model":"gpt-5","messages":[{"role":"system","content":[{"type":"text","text":"You are opencode."}]},{"role":"user","content":[{"type":"text","text":"fix the bug"}]}]}`, true, true},
		{"a top-level system member is not read", `{"system":"x","model":"gpt-5","messages":[{"role":"system","content":"You are opencode."},{"role":"user","content":"fix the bug"}]}`, true, true},
		{"another system message", `{"model":"gpt-5","messages":[{"role":"system","content":"You are Codex."},{"role":"user","content":"fix the bug"}]}`, false, true},
		{"a developer message is not a system message", `{"model":"gpt-5","messages":[{"role":"developer","content":"You are opencode."},{"role":"user","content":"fix the bug"}]}`, false, true},
		{"a Responses request has no messages", `{"model":"gpt-5","input":"fix the bug"}`, false, false},
	} {
		got, ok := Protocol.QuickKey(seed, []byte(tc.body))
		if ok != tc.ok || (ok && (got == base) != tc.same) {
			t.Errorf("%s: ok %v, same key %v; want %v, %v", tc.name, ok, got == base, tc.ok, tc.same)
		}
	}
}
