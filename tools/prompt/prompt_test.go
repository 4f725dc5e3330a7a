package prompt

import (
	"strings"
	"testing"
	"time"
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

// TestBreakpointCacheExpiry sends the same request again and again (its
// last block marked, so a hit reads all of it) at times that straddle a
// 5-minute lifetime: a hit reads every token, a miss none; each use,
// hit or miss, starts the lifetime again.
func TestBreakpointCacheExpiry(t *testing.T) {
	p, err := Parse(req(`{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	all := p.Tokens()
	t0 := time.Date(2026, 1, 17, 4, 0, 0, 0, time.UTC)
	var bc BreakpointCache
	for i, tc := range []struct {
		name string
		at   time.Time
		ttl  time.Duration
		want int
	}{
		{"first: nothing cached", t0, 5 * time.Minute, 0},
		{"exactly 5 minutes later: still warm", t0.Add(5 * time.Minute), 5 * time.Minute, all},
		{"5m1s after that: gone", t0.Add(10*time.Minute + time.Second), 5 * time.Minute, 0},
		{"a minute after the rewrite: warm", t0.Add(11*time.Minute + time.Second), 5 * time.Minute, all},
		{"an hour later with a 1-hour lifetime: warm", t0.Add(71*time.Minute + time.Second), time.Hour, all},
		{"a day later, no lifetime: warm", t0.Add(25 * time.Hour), 0, all},
		{"unknown time: warm", time.Time{}, 5 * time.Minute, all},
	} {
		if got := bc.ReadAt(p, tc.at, tc.ttl); got != tc.want {
			t.Errorf("%d %s: read %d, want %d", i, tc.name, got, tc.want)
		}
	}
}
