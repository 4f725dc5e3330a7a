package cachelife

import (
	"testing"
)

// TestExtended: one case per place a body can ask for the extended
// lifetime, and the near misses that must not count.
func TestExtended(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want bool
	}{
		{"no marker", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`, false},
		{"5-minute markers", `{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"5m"}}]}]}`, false},
		{"1h on a system block", `{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral", "ttl" : "1h"}}],"messages":[]}`, true},
		{"1h on a tool", `{"tools":[{"name":"Bash","input_schema":{},"cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[]}`, true},
		{"1h on a message block", `{"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}`, true},
		{"1h on the body (automatic caching)", `{"cache_control":{"type":"ephemeral","ttl":"1h"},"messages":[]}`, true},
		{"ttl in a tool's input is not a marker", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"x","input":{"cache_control":{"ttl":"1h"}}}]}]}`, false},
		{"ttl quoted in text is not a marker", `{"messages":[{"role":"user","content":"\"cache_control\":{\"ttl\":\"1h\"}"}]}`, false},
		{"OpenAI 24h retention", `{"model":"gpt-5.2-codex","input":[],"prompt_cache_retention":"24h"}`, true},
		{"OpenAI in-memory retention", `{"model":"gpt-5.2-codex","input":[],"prompt_cache_retention":"in_memory"}`, false},
		{"retention inside an item is not the parameter", `{"input":[{"type":"message","prompt_cache_retention":"24h"}]}`, false},
		{"not JSON", `{"prompt_cache_retention":"24h"`, false},
		{"not an object", `["prompt_cache_retention","24h"]`, false},
	} {
		if got := Extended([]byte(tc.body)); got != tc.want {
			t.Errorf("%s: Extended = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// FuzzExtended: any bytes give an answer, never a panic.
func FuzzExtended(f *testing.F) {
	f.Add([]byte(`{"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}]}`))
	f.Add([]byte(`{"model":"gpt-5.2","input":[],"prompt_cache_retention":"24h"}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"ttl":"5m"}}]}]}`))
	f.Add([]byte(`{"ttl":`))
	f.Fuzz(func(t *testing.T, body []byte) {
		Extended(body)
	})
}
