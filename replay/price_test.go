package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPriceLookup(t *testing.T) {
	tab := DefaultPrices()
	for _, tc := range []struct {
		id, want string
		input    float64
	}{
		{"claude-opus-4-5-20251101", "claude-opus-4-5", 5},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4-5", 3},
		{"Claude-Haiku-4-5", "claude-haiku-4-5", 1},
		{"anthropic/claude-opus-4-1", "claude-opus-4-1", 15},
		{"claude-opus-4", "claude-opus-4", 15},
		{"claude-sonnet-4-5[1m]", "claude-sonnet-4-5", 3},
		{"claude-opus-4-5-fast", "claude-opus-4-5", 5}, // longest prefix, not claude-opus-4
		{"claude-fable-5-2", "claude-fable-5-2", 8},
	} {
		p, id, ok := tab.Lookup(tc.id)
		if !ok || id != tc.want || p.Input != tc.input {
			t.Errorf("Lookup(%q) = %v %q %v, want %q at $%v", tc.id, p, id, ok, tc.want, tc.input)
		}
	}
	for _, id := range []string{"gpt-4o", "", "claude-opus-4x"} {
		if _, got, ok := tab.Lookup(id); ok {
			t.Errorf("Lookup(%q) matched %q", id, got)
		}
	}
	// Every entry is consistent: reads below input below writes.
	for id, p := range tab {
		if !(p.CacheRead < p.Input && p.Input < p.CacheWrite) {
			t.Errorf("%s: %+v", id, p)
		}
	}
}

func TestPriceCost(t *testing.T) {
	p := DefaultPrices()["claude-opus-4-5"]
	// 1M tokens, 600K read at $0.50, 400K written at $6.25: 0.30 + 2.50.
	if got := p.Cost(1_000_000, 600_000); !near(got, 2.8) {
		t.Errorf("opus cost %v, want 2.8", got)
	}
	h := DefaultPrices()["claude-haiku-5-5"]
	// Up to 100K prompt tokens: $0.125 write, $0.01 read; over: $0.625 / $0.05.
	if got := h.Cost(100_000, 50_000); !near(got, (50_000*0.01+50_000*0.125)/1e6) {
		t.Errorf("haiku 5.5 short cost %v", got)
	}
	if got := h.Cost(100_001, 50_000); !near(got, (50_000*0.05+50_001*0.625)/1e6) {
		t.Errorf("haiku 5.5 long cost %v", got)
	}
}

func TestParsePrices(t *testing.T) {
	base := DefaultPrices()
	yamlFile := `
claude-opus-4-5: {input: 4, cache_write: 5, cache_read: 0.4}
my-model-20260101: {input: 2}
claude-haiku-5-5:
  input: 0.2
  long_prompt: {above: 50000, input: 1}
`
	tab, err := ParsePrices([]byte(yamlFile), base)
	if err != nil {
		t.Fatal(err)
	}
	if p := tab["claude-opus-4-5"]; p != (Price{Input: 4, CacheWrite: 5, CacheRead: 0.4}) {
		t.Errorf("override: %+v", p)
	}
	// Left-out cache rates are 1.25x and 0.1x input; the date is dropped.
	if p := tab["my-model"]; p.Input != 2 || p.CacheWrite != 2.5 || !near(p.CacheRead, 0.2) || p.Long != nil {
		t.Errorf("new model: %+v", p)
	}
	if p := tab["claude-haiku-5-5"]; p.Input != 0.2 || p.Long == nil || p.Long.Above != 50_000 || p.Long.CacheWrite != 1.25 || !near(p.Long.CacheRead, 0.1) {
		t.Errorf("long tier: %+v %+v", p, p.Long)
	}
	if tab["claude-sonnet-4-5"] != base["claude-sonnet-4-5"] || base["claude-opus-4-5"].Input != 5 {
		t.Error("the base table changed or lost an entry")
	}

	jsonFile := `{"claude-opus-4-5": {"input": 6}}`
	if tab, err := ParsePrices([]byte(jsonFile), base); err != nil || tab["claude-opus-4-5"].CacheWrite != 7.5 {
		t.Errorf("JSON file: %v %+v", err, tab["claude-opus-4-5"])
	}
	if tab, err := ParsePrices(nil, base); err != nil || len(tab) != len(base) {
		t.Errorf("empty file: %v, %d entries", err, len(tab))
	}

	for _, bad := range []struct{ file, msg string }{
		{`claude-opus-4-5: {input: 5, output: 25}`, "output"},
		{`claude-opus-4-5: {input: -1}`, "non-negative"},
		{`claude-opus-4-5: {cache_read: 1}`, "input price missing"},
		{`claude-opus-4-5: {input: .nan}`, "non-negative"},
		{`claude-opus-4-5: {input: 1, long_prompt: {input: 2}}`, "above"},
		{`[1, 2]`, "cannot unmarshal"},
	} {
		if _, err := ParsePrices([]byte(bad.file), base); err == nil || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("%s: error %v, want one mentioning %q", bad.file, err, bad.msg)
		}
	}
}

func TestLoadPrices(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prices.yaml")
	if err := os.WriteFile(path, []byte("claude-opus-4-5: {input: 1, bogus: 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPrices(path, DefaultPrices()); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v does not name the file", err)
	}
	if _, err := LoadPrices(filepath.Join(t.TempDir(), "none.yaml"), nil); err == nil {
		t.Error("a missing file loaded")
	}
}
