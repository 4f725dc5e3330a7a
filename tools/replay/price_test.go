package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/protocol"
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
		// OpenAI: variants take their base model's price.
		{"gpt-5-codex", "gpt-5", 1.25},
		{"gpt-5.1-codex-max", "gpt-5.1", 1.25},
		{"gpt-5.2-codex", "gpt-5.2", 1.75},
		{"gpt-5-mini-2025-08-07", "gpt-5-mini", 0.25},
		{"openai/gpt-4.1", "gpt-4.1", 2},
		{"gpt-4o", "gpt-4o", 2.5},
		{"o4-mini", "o4-mini", 1.1},
	} {
		p, id, ok := tab.Lookup(tc.id)
		if !ok || id != tc.want || p.Input != tc.input {
			t.Errorf("Lookup(%q) = %v %q %v, want %q at $%v", tc.id, p, id, ok, tc.want, tc.input)
		}
	}
	for _, id := range []string{"gpt-4x", "", "claude-opus-4x"} {
		if _, got, ok := tab.Lookup(id); ok {
			t.Errorf("Lookup(%q) matched %q", id, got)
		}
	}
	// Every entry is consistent: reads below input; writes above input
	// (Anthropic) or at it (OpenAI and Gemini: no write premium).
	for id, p := range tab {
		openai := model.Lookup(id).Provider == model.OpenAI
		implicit := openai || model.Lookup(id).Provider == model.Google
		if !(p.CacheRead < p.Input && (p.Input < p.CacheWrite || implicit && p.Input == p.CacheWrite)) {
			t.Errorf("%s: %+v", id, p)
		}
		if openai != strings.HasPrefix(id, "gpt-") && openai != (id[0] == 'o') {
			t.Errorf("%s: provider %v", id, model.Lookup(id).Provider)
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

func TestOpenAICost(t *testing.T) {
	p := DefaultPrices()["gpt-5.2"]
	// 1M tokens, 600K cached at $0.175, 400K uncached at $1.75 (no
	// write premium): 0.105 + 0.70.
	if got := p.Cost(1_000_000, 600_000); !near(got, 0.805) {
		t.Errorf("gpt-5.2 cost %v, want 0.805", got)
	}
	// A price file entry for an OpenAI model defaults writes to input.
	tab, err := ParsePrices([]byte("gpt-5.2-codex: {input: 2}\nmy-model: {input: 2}\n"), DefaultPrices())
	if err != nil {
		t.Fatal(err)
	}
	if g := tab["gpt-5.2-codex"]; g.CacheWrite != 2 || !near(g.CacheRead, 0.2) {
		t.Errorf("gpt-5.2-codex from file: %+v", g)
	}
	if g := tab["my-model"]; g.CacheWrite != 2.5 {
		t.Errorf("my-model from file: %+v", g)
	}
	// The cost model a replay picks by protocol.
	for _, tc := range []struct {
		proto protocol.Protocol
		model string
		want  CacheModel
	}{
		{anthropic.Protocol, "claude-opus-4-5", AnthropicCache},
		{responses.Protocol, "gpt-5.2-codex", CacheModel{Read: 0.1, Write: 1, Automatic: true}},
		{responses.Protocol, "gpt-4.1", CacheModel{Read: 0.25, Write: 1, Automatic: true}},
		{responses.Protocol, "gpt-4o", CacheModel{Read: 0.5, Write: 1, Automatic: true}},
		{responses.Protocol, "unknown-model", CacheModel{Read: 0.1, Write: 1, Automatic: true}},
	} {
		got := cacheModel(tc.proto, tc.model, DefaultPrices())
		if !near(got.Read, tc.want.Read) || got.Write != tc.want.Write || got.Automatic != tc.want.Automatic {
			t.Errorf("cacheModel(%s, %s) = %+v, want %+v", tc.proto.Name(), tc.model, got, tc.want)
		}
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
