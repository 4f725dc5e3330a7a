package price

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// approx compares dollar figures computed in floating point with the
// hand-computed ones.
var approx = cmpopts.EquateApprox(1e-12, 0)

// TestBill: each part at its rate, the long-prompt rates above the
// threshold; Cost is Bill of cache writes and reads. Every expected value
// is worked out by hand (USD per million tokens times tokens).
func TestBill(t *testing.T) {
	p := Price{Input: 3, CacheWrite: 3.75, CacheRead: 0.3,
		Long: &LongPrice{Above: 200_000, Input: 6, CacheWrite: 7.5, CacheRead: 0.6}}
	for _, tc := range []struct {
		name     string
		in, w, r int
		want     float64
	}{
		{"nothing", 0, 0, 0, 0},
		{"input: 0.1M × $3", 100_000, 0, 0, 0.3},
		{"writes: 0.1M × $3.75", 0, 100_000, 0, 0.375},
		{"reads: 0.1M × $0.30", 0, 0, 100_000, 0.03},
		// $0.30 + $0.1875 + $0.015; 200,000 in all is not over 200K.
		{"all three at the threshold", 100_000, 50_000, 50_000, 0.5025},
		// One token more: every part at the long rates, $0.60 + $0.375
		// + 50,001 × $0.60 / 1M = $0.0300006.
		{"one token over: long rates", 100_000, 50_000, 50_001, 1.0050006},
	} {
		if got := p.Bill(tc.in, tc.w, tc.r); !cmp.Equal(tc.want, got, approx) {
			t.Errorf("%s: Bill(%d, %d, %d) = %v, want %v", tc.name, tc.in, tc.w, tc.r, got, tc.want)
		}
	}
	for _, tc := range []struct {
		prompt, read int
		want         float64
	}{
		// 150,000 reads × $0.30 + 50,000 writes × $3.75 = $0.045 + $0.1875.
		{200_000, 150_000, 0.2325},
		// Over 200K: 200,000 writes × $7.50 + 50,000 reads × $0.60.
		{250_000, 50_000, 1.53},
	} {
		if got := p.Cost(tc.prompt, tc.read); !cmp.Equal(tc.want, got, approx) {
			t.Errorf("Cost(%d, %d) = %v, want %v", tc.prompt, tc.read, got, tc.want)
		}
	}
}

func TestOutputPrice(t *testing.T) {
	if got := (Price{Input: 1, Output: 5}).OutputPrice(); got != 5 {
		t.Errorf("stated output price: %v, want 5", got)
	}
	if got := (Price{Input: 3}).OutputPrice(); got != 15 {
		t.Errorf("unstated output price of a $3 input: %v, want 15 (5 × input)", got)
	}
}

// TestLookup: a model id finds its price by its canonical form, else by
// the longest table id it extends at a separator.
func TestLookup(t *testing.T) {
	tab := Default()
	for _, tc := range []struct {
		id, match string
		want      Price
	}{
		// The pricing page: Opus 4.5 $5 / $6.25 / $0.50.
		{"claude-opus-4-5-20251101", "claude-opus-4-5", Price{Input: 5, CacheWrite: 6.25, CacheRead: 0.5}},
		{"anthropic/claude-opus-4-5", "claude-opus-4-5", Price{Input: 5, CacheWrite: 6.25, CacheRead: 0.5}},
		{"claude-opus-4-5-foo", "claude-opus-4-5", Price{Input: 5, CacheWrite: 6.25, CacheRead: 0.5}},
		// GPT-5 and GPT-5-Codex $1.25 / cached $0.125, no write premium.
		{"gpt-5-codex", "gpt-5", Price{Input: 1.25, CacheWrite: 1.25, CacheRead: 0.125}},
		// GPT-5.2-Codex takes GPT-5.2's $1.75 / $0.175.
		{"gpt-5.2-codex", "gpt-5.2", Price{Input: 1.75, CacheWrite: 1.75, CacheRead: 0.175}},
		{"gpt-5-mini-2025-08-07", "gpt-5-mini", Price{Input: 0.25, CacheWrite: 0.25, CacheRead: 0.025, Output: 2}},
		// Gemini: no write premium, cached input a tenth; Flash-Lite is
		// not Flash, and the Gemini 3 Pro preview is Gemini 3 Pro.
		{"gemini-2.5-flash-lite", "gemini-2.5-flash-lite", Price{Input: 0.10, CacheWrite: 0.10, CacheRead: 0.01, Output: 0.40}},
		{"gemini-2.5-flash", "gemini-2.5-flash", Price{Input: 0.30, CacheWrite: 0.30, CacheRead: 0.03, Output: 2.50}},
		{"models/gemini-2.5-flash-preview-09-2025", "gemini-2.5-flash", Price{Input: 0.30, CacheWrite: 0.30, CacheRead: 0.03, Output: 2.50}},
		{"gemini-3-pro-preview", "gemini-3-pro", Price{Input: 2, CacheWrite: 2, CacheRead: 0.20, Output: 12,
			Long: &LongPrice{Above: 200_000, Input: 4, CacheWrite: 4, CacheRead: 0.40}}},
		{"gemini-3.1-pro-preview", "gemini-3.1-pro", Price{Input: 2, CacheWrite: 2, CacheRead: 0.20, Output: 12,
			Long: &LongPrice{Above: 200_000, Input: 4, CacheWrite: 4, CacheRead: 0.40}}},
	} {
		got, match, ok := tab.Lookup(tc.id)
		if !ok || match != tc.match {
			t.Errorf("Lookup(%q) matched %q (ok %v), want %q", tc.id, match, ok, tc.match)
			continue
		}
		if d := cmp.Diff(tc.want, got, approx); d != "" {
			t.Errorf("Lookup(%q) (-want +got):\n%s", tc.id, d)
		}
	}
	for _, id := range []string{"gpt-50", "my-local-llm", ""} {
		if _, match, ok := tab.Lookup(id); ok {
			t.Errorf("Lookup(%q) matched %q", id, match)
		}
	}
}

// TestParse: a price file replaces whole entries, fills unstated cache
// rates (1.25x and 0.1x input; no write premium for OpenAI's models),
// keeps the base's other entries, and refuses what it cannot mean.
func TestParse(t *testing.T) {
	base := Table{"claude-opus-4-5": {Input: 5, CacheWrite: 6.25, CacheRead: 0.5}, "kept": {Input: 1}}
	got, err := Parse([]byte(`
my-model: {input: 2}
gpt-5.9-x: {input: 1}
claude-opus-4-5: {input: 4, cache_read: 0.2}
Claude-Haiku-5-5-20261007:
  input: 0.1
  long_prompt: {above: 100000, input: 0.5}
`), base)
	if err != nil {
		t.Fatal(err)
	}
	want := Table{
		"my-model":        {Input: 2, CacheWrite: 2.5, CacheRead: 0.2},
		"gpt-5.9-x":       {Input: 1, CacheWrite: 1, CacheRead: 0.1},
		"claude-opus-4-5": {Input: 4, CacheWrite: 5, CacheRead: 0.2},
		"claude-haiku-5-5": {Input: 0.1, CacheWrite: 0.125, CacheRead: 0.01,
			Long: &LongPrice{Above: 100_000, Input: 0.5, CacheWrite: 0.625, CacheRead: 0.05}},
		"kept": {Input: 1},
	}
	if d := cmp.Diff(want, got, approx); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if base["claude-opus-4-5"].Input != 5 {
		t.Error("Parse changed its base table")
	}
	if got, err := Parse(nil, base); err != nil || len(got) != len(base) {
		t.Errorf("an empty file: %d entries, %v", len(got), err)
	}
	for _, tc := range []struct{ file, want string }{
		{"m: {input: 1, cache_writes: 2}", "cache_writes"},
		{"m: {input: -1}", "non-negative"},
		{"m: {cache_read: 1}", "input price missing"},
		{"m: {input: 1, long_prompt: {above: 0, input: 2}}", "above must be positive"},
		{"m: {input: 1, long_prompt: {above: 10}}", "input price missing"},
		{"m: [1, 2]", "cannot unmarshal"},
	} {
		_, err := Parse([]byte(tc.file), base)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error about %q", tc.file, err, tc.want)
		}
	}
}

func TestLoad(t *testing.T) {
	path := t.TempDir() + "/prices.yaml"
	if _, err := Load(path, Default()); err == nil {
		t.Error("a missing file loaded")
	}
	if err := os.WriteFile(path, []byte("m: {input: -2}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, Default()); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("a bad file: %v, want an error naming %s", err, path)
	}
	if err := os.WriteFile(path, []byte("m: {input: 8}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tab, err := Load(path, Default())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Price{Input: 8, CacheWrite: 10, CacheRead: 0.8}, tab["m"], approx); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
