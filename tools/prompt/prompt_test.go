package prompt

import (
	"strings"
	"testing"
)

func req(msgs ...string) []byte {
	return []byte(`{"model":"m","messages":[` + strings.Join(msgs, ",") + `],"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],"tools":[{"name":"Bash","input_schema":{}}]}`)
}

func TestExtends(t *testing.T) {
	first := req(`{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}`)
	for _, tc := range []struct {
		name string
		next []byte
		want bool
	}{
		{"marker moved, message folded to a string", req(`{"role":"user","content":"hi"}`, `{"role":"assistant","content":[{"type":"text","text":"ok","cache_control":{"type":"ephemeral"}}]}`), true},
		{"same message kept as a block", req(`{"role":"user","content":[{"type":"text","text":"hi"}]}`, `{"role":"assistant","content":"ok"}`), true},
		{"text changed", req(`{"role":"user","content":"hI"}`, `{"role":"assistant","content":"ok"}`), false},
		{"role changed", req(`{"role":"assistant","content":"hi"}`), false},
		{"a text block with citations is not a string", req(`{"role":"user","content":[{"type":"text","text":"hi","citations":[]}]}`), false},
		{"shorter", []byte(`{"model":"m","messages":[],"system":[{"type":"text","text":"sys"}],"tools":[{"name":"Bash","input_schema":{}}]}`), false},
	} {
		got, err := Extends(first, tc.next)
		if err != nil || got != tc.want {
			t.Errorf("%s: Extends = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := Extends(first, []byte(`{`)); err == nil {
		t.Error("no error for invalid JSON")
	}
}

// TestShared: a request sharing half of the previous one's last block
// reads that half (in proportion to its bytes) from the cache.
func TestShared(t *testing.T) {
	a, _ := Parse(req(`{"role":"user","content":"` + strings.Repeat("x", 400) + `"}`))
	b, _ := Parse(req(`{"role":"user","content":"` + strings.Repeat("x", 200) + strings.Repeat("y", 200) + `"}`))
	shared, ext := Shared(a, b)
	all, _ := Shared(a, a)
	if ext || shared <= 0 || shared >= all || b.Tokens() <= 0 {
		t.Errorf("shared %d of %d, extends %v", shared, all, ext)
	}
	if got := Cost(nil, a); got != CacheWrite*float64(a.Tokens()) {
		t.Errorf("first request costs %v", got)
	}
	if got := Cost(a, a); got != CacheRead*float64(a.Tokens()) {
		t.Errorf("a repeat costs %v", got)
	}
}
