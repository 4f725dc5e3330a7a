package responses

import (
	"hash/maphash"
	"testing"
)

// TestQuickKey: the key is the top-level instructions and the input items
// up to the first user message, by their text, or a string input.
func TestQuickKey(t *testing.T) {
	seed := maphash.MakeSeed()
	const start = `{"model":"gpt-5-codex","instructions":"You are Codex.","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"sandbox"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the bug"}]}`
	base, ok := Protocol.QuickKey(seed, []byte(start+`]}`))
	if !ok {
		t.Fatal("a Responses request gives no key")
	}
	for _, tc := range []struct {
		name, body string
		same, ok   bool
	}{
		{"items appended", start + `,{"type":"reasoning","encrypted_content":"x"},{"type":"function_call","call_id":"c","name":"sh","arguments":"{}"}],"prompt_cache_key":"t"}`, true, true},
		{"the user's text as a string", `{"model":"gpt-5-codex","instructions":"You are Codex.","input":[{"type":"message","role":"developer","content":"sandbox"},{"role":"user","content":"fix the bug"}]}`, true, true},
		{"other instructions", `{"model":"gpt-5-codex","instructions":"You are opencode.","input":[{"type":"message","role":"developer","content":"sandbox"},{"role":"user","content":"fix the bug"}]}`, false, true},
		{"a Messages API system member is not read", `{"system":"x","model":"gpt-5-codex","instructions":"You are Codex.","input":[{"type":"message","role":"developer","content":"sandbox"},{"role":"user","content":"fix the bug"}]}`, true, true},
		{"a Chat Completions request has no input", `{"model":"gpt-5","messages":[{"role":"user","content":"fix the bug"}]}`, false, false},
	} {
		got, ok := Protocol.QuickKey(seed, []byte(tc.body))
		if ok != tc.ok || (ok && (got == base) != tc.same) {
			t.Errorf("%s: ok %v, same key %v; want %v, %v", tc.name, ok, got == base, tc.ok, tc.same)
		}
	}
	a, _ := Protocol.QuickKey(seed, []byte(`{"input":"hi","model":"m"}`))
	b, _ := Protocol.QuickKey(seed, []byte(`{"input":"ho","model":"m"}`))
	if a == b {
		t.Error("two string inputs share a key")
	}
}
