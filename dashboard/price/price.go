// Package price holds the models' prompt prices that ctxguard's figures
// in dollars use (replay's reports, the dashboard), apart from replay so
// that packages the proxy imports can use them.
package price

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/ctxguard/ctxguard/model"
)

// Money. A request's prompt is billed per token at its model's rates: the
// tokens a cost model bills as cache reads at CacheRead, the rest at
// CacheWrite (the 5-minute write, which Claude Code uses). Input is kept
// for reference (a request without caching would pay it). Output tokens
// are not counted: a replay assumes the same answers, so they cost the
// same with and without ctxguard.
//
// The embedded table (Default) holds Anthropic's, OpenAI's and Google's
// list prices in USD per million tokens, read on 2026-11-22/23 from the
// sources named in the comments; a file (Load) can change or add
// models. OpenAI and Google have no cache-write premium: their entries
// bill a token not read from the cache at the input price (CacheWrite =
// Input), a cached one at the model's cached-input price.

// Price is one model's prompt prices in USD per million tokens.
type Price struct {
	Input      float64 `yaml:"input" json:"input"`
	CacheWrite float64 `yaml:"cache_write" json:"cache_write"`
	CacheRead  float64 `yaml:"cache_read" json:"cache_read"`
	// Output is the output price; only summarizer calls are billed for
	// output (a replay's own requests are compared on their prompts).
	Output float64 `yaml:"output,omitempty" json:"output,omitempty"`
	// Long, if set, replaces the three rates for a request whose prompt
	// is over Long.Above tokens (Haiku 5.5 over 100K, Sonnet 4.x over
	// 200K with the 1M window).
	Long *LongPrice `yaml:"long_prompt,omitempty" json:"long_prompt,omitempty"`
}

// LongPrice is a model's rates for long prompts.
type LongPrice struct {
	Above      int     `yaml:"above" json:"above"`
	Input      float64 `yaml:"input" json:"input"`
	CacheWrite float64 `yaml:"cache_write" json:"cache_write"`
	CacheRead  float64 `yaml:"cache_read" json:"cache_read"`
}

// SummaryOutputWeight is what an output token costs in input tokens when
// no price says (the list prices of the small models are 5x to 8x).
const SummaryOutputWeight = 5

// OutputPrice is Output, or SummaryOutputWeight times Input when unset.
func (p Price) OutputPrice() float64 {
	if p.Output > 0 {
		return p.Output
	}
	return SummaryOutputWeight * p.Input
}

// Cost returns the USD cost of a prompt of prompt tokens of which read
// are cache reads and the rest cache writes.
func (p Price) Cost(prompt, read int) float64 { return p.Bill(0, prompt-read, read) }

// Bill returns the USD cost of a prompt the API billed as input tokens
// at the input rate, write at the cache-write rate and read at the
// cache-read rate: the long-prompt rates when the prompt (their sum) is
// over Long.Above.
func (p Price) Bill(input, write, read int) float64 {
	in, w, r := p.Input, p.CacheWrite, p.CacheRead
	if l := p.Long; l != nil && input+write+read > l.Above {
		in, w, r = l.Input, l.CacheWrite, l.CacheRead
	}
	return (float64(input)*in + float64(write)*w + float64(read)*r) / 1e6
}

// Table maps model ids (canonical, see model.Canonical) to prices.
type Table map[string]Price

// oa returns an OpenAI price: cached input at its own rate, and no
// cache-write premium (OpenAI caches prefixes by itself and bills an
// uncached token at the input price).
func oa(input, cached float64) Price {
	return Price{Input: input, CacheWrite: input, CacheRead: cached}
}

// std returns a price with the standard multipliers: 5-minute cache write
// 1.25x input, cache read 0.1x input.
func std(input float64) Price {
	return Price{Input: input, CacheWrite: input * 1.25, CacheRead: input * 0.1}
}

// Default returns the embedded price table.
func Default() Table {
	return Table{
		// Fable 5.2 (released 2026-11-09): $8 / $10 write / $0.20 read,
		// as listed by github.com/archid21/rightsize v0.10.2 and
		// docs.laozhang.ai (third party, quoting Anthropic's list price).
		// Mythos shares Fable's price in every earlier generation; assumed
		// here for Mythos 5.2.
		"claude-fable-5-2":  {Input: 8, CacheWrite: 10, CacheRead: 0.20},
		"claude-mythos-5-2": {Input: 8, CacheWrite: 10, CacheRead: 0.20},
		// platform.claude.com/docs/en/about-claude/pricing (model pricing
		// table): Fable/Mythos 5.1 $10 / $12.50 / $0.25 (reads 0.025x);
		// Fable/Mythos 5 $10 / $12.50 / $1; Opus 5 and Opus 4.5-4.8 $5 /
		// $6.25 / $0.50; Opus 4.1 and 4 $15 / $18.75 / $1.50.
		"claude-fable-5-1":  {Input: 10, CacheWrite: 12.5, CacheRead: 0.25},
		"claude-mythos-5-1": {Input: 10, CacheWrite: 12.5, CacheRead: 0.25},
		"claude-fable-5":    std(10),
		"claude-mythos-5":   std(10),
		"claude-opus-5":     std(5),
		"claude-opus-4-8":   std(5),
		"claude-opus-4-7":   std(5),
		"claude-opus-4-6":   std(5),
		"claude-opus-4-5":   std(5),
		"claude-opus-4-1":   std(15),
		"claude-opus-4":     std(15),
		// platform.claude.com/docs/en/models/opus-5-5/overview: $4 / $5 /
		// $0.20.
		"claude-opus-5-5": {Input: 4, CacheWrite: 5, CacheRead: 0.20},
		// platform.claude.com/docs/en/models/sonnet-5-5/overview: $2 /
		// $2.50; cache reads cut from $0.20 to $0.10 on 2026-10-07 (as
		// recorded by github.com/kurofune/claudit v1.9.2 and
		// github.com/TheKrush/PromptFuel v1.0.23; third party).
		"claude-sonnet-5-5": {Input: 2, CacheWrite: 2.5, CacheRead: 0.10},
		// Sonnet 5: $2 / $10 (the planned rise to $3 was called off;
		// apidog.com, third party, and the Opus 5 comparison table).
		"claude-sonnet-5": std(2),
		// platform.claude.com/docs/en/models/haiku-5-5/overview: $0.10 /
		// $0.125 up to 100,000 prompt tokens, $0.50 / $0.625 over; cache
		// reads $0.01 / $0.05 (claudit v1.9.2, third party).
		"claude-haiku-5-5": {Input: 0.10, CacheWrite: 0.125, CacheRead: 0.01,
			Long: &LongPrice{Above: 100_000, Input: 0.50, CacheWrite: 0.625, CacheRead: 0.05}},
		// Sonnet 4.6: $3 / $15, no long-context surcharge (deploybase.ai,
		// third party). Sonnet 4.5 and 4: $3 up to 200K prompt tokens, $6
		// over (docs.anthropic.com/en/docs/about-claude/pricing, long
		// context pricing). Sonnet 3.7 $3, Haiku 4.5 $1, Haiku 3.5 $0.80
		// (same page).
		"claude-sonnet-4-6": std(3),
		"claude-sonnet-4-5": {Input: 3, CacheWrite: 3.75, CacheRead: 0.30,
			Long: &LongPrice{Above: 200_000, Input: 6, CacheWrite: 7.5, CacheRead: 0.60}},
		"claude-sonnet-4": {Input: 3, CacheWrite: 3.75, CacheRead: 0.30,
			Long: &LongPrice{Above: 200_000, Input: 6, CacheWrite: 7.5, CacheRead: 0.60}},
		"claude-3-7-sonnet": std(3),
		// Haiku 4.5 output $5 (same pricing page); it writes summaries.
		"claude-haiku-4-5": {Input: 1, CacheWrite: 1.25, CacheRead: 0.1, Output: 5},
		"claude-3-5-haiku": {Input: 0.80, CacheWrite: 1, CacheRead: 0.08},

		// OpenAI (input / cached input; cache_write is the input price).
		// Variants without an entry (gpt-5-codex, gpt-5.1-codex-max,
		// gpt-5.2-codex, dated snapshots) take their base model's price by
		// the longest-prefix rule of Lookup, as OpenAI prices them.
		// developers.openai.com/api/docs/models/gpt-5-codex: GPT-5 and
		// GPT-5-Codex $1.25 / $0.125.
		"gpt-5": oa(1.25, 0.125),
		// GPT-5.1 $1.25 like GPT-5; GPT-5 nano $0.05 (SciCode dataset-builder
		// show_pricing.py on huggingface.co, third party); cached input
		// 0.1x as for the whole GPT-5 family (adk-model openai/pricing.rs,
		// third party).
		"gpt-5.1":    oa(1.25, 0.125),
		"gpt-5-nano": oa(0.05, 0.005),
		// github/docs data/tables/copilot/models-and-pricing.yml (third
		// party, quoting OpenAI's list prices): GPT-5 mini $0.25 / $0.025;
		// GPT-5.2, GPT-5.2-Codex and GPT-5.3-Codex $1.75 / $0.175; GPT-5.4
		// $2.50 / $0.25; GPT-4.1 $2.00 / $0.50.
		"gpt-5-mini":    {Input: 0.25, CacheWrite: 0.25, CacheRead: 0.025, Output: 2}, // output $2 (openai.com/api/pricing); it writes summaries
		"gpt-5.2":       oa(1.75, 0.175),
		"gpt-5.3-codex": oa(1.75, 0.175),
		"gpt-5.4":       oa(2.50, 0.25),
		"gpt-4.1":       oa(2.00, 0.50),
		// docs.apiyi.com/models (third party, a reseller's table of
		// OpenAI's rates): GPT-5.5 $5 / $0.50, GPT-5.5 pro $30 / $3,
		// GPT-5.6 sol $4 / $0.40, terra $2 / $0.20, luna $0.20 / $0.02.
		"gpt-5.5":       oa(5, 0.5),
		"gpt-5.5-pro":   oa(30, 3),
		"gpt-5.6-sol":   oa(4, 0.4),
		"gpt-5.6-terra": oa(2, 0.2),
		"gpt-5.6-luna":  oa(0.2, 0.02),
		// GPT-4o $2.50 / $1.25 (docs.rs openai-models 0.1.1, from
		// openai.com/api/pricing; third party). o3 $2 / $0.50 and o4-mini
		// $1.10 / $0.275: OpenAI's pricing page after the June 2025 o3 price
		// cut, not re-checked here.
		"gpt-4o":  oa(2.50, 1.25),
		"o3":      oa(2.00, 0.50),
		"o4-mini": oa(1.10, 0.275),

		// Google (input / cached input, per million tokens; no cache-write
		// premium: implicit caching bills a token not read from the cache
		// at the input price, a cached one at a tenth of it, model.Info.
		// CachePrices). ai.google.dev/gemini-api/docs/pricing, as listed
		// at the end of 2025 (not re-checked here): Gemini 3 Pro preview
		// $2 / $0.20 up to 200,000 prompt tokens, $4 / $0.40 over, output
		// $12; Gemini 2.5 Pro $1.25 / $0.125, $2.50 / $0.25 over 200,000,
		// output $10; 2.5 Flash $0.30 / $0.03, output $2.50; 2.5
		// Flash-Lite $0.10 / $0.01, output $0.40. Variants without an
		// entry (gemini-3-pro-preview, dated ids) take their base model's
		// price by the longest-prefix rule of Lookup.
		"gemini-3-pro": {Input: 2, CacheWrite: 2, CacheRead: 0.20, Output: 12,
			Long: &LongPrice{Above: 200_000, Input: 4, CacheWrite: 4, CacheRead: 0.40}},
		// Gemini 3.1 Pro preview (the Gemini CLI's Pro model): $2 / $4
		// over 200,000 prompt tokens, output $12 (inference.sh's
		// OpenRouter listing, updated 2026-10-11; third party); cached
		// input a tenth, as implicit caching bills it.
		"gemini-3.1-pro": {Input: 2, CacheWrite: 2, CacheRead: 0.20, Output: 12,
			Long: &LongPrice{Above: 200_000, Input: 4, CacheWrite: 4, CacheRead: 0.40}},
		"gemini-2.5-pro": {Input: 1.25, CacheWrite: 1.25, CacheRead: 0.125, Output: 10,
			Long: &LongPrice{Above: 200_000, Input: 2.50, CacheWrite: 2.50, CacheRead: 0.25}},
		"gemini-2.5-flash":      {Input: 0.30, CacheWrite: 0.30, CacheRead: 0.03, Output: 2.50},
		"gemini-2.5-flash-lite": {Input: 0.10, CacheWrite: 0.10, CacheRead: 0.01, Output: 0.40},
	}
}

// Lookup finds the price of a model id: by its canonical form, else by
// the longest table id that is a prefix of it followed by a separator
// ("claude-opus-4-5-foo" is priced as claude-opus-4-5). It returns the
// table id that matched.
func (t Table) Lookup(id string) (Price, string, bool) {
	c := model.Canonical(id)
	if p, ok := t[c]; ok {
		return p, c, true
	}
	best := ""
	for k := range t {
		if len(k) > len(best) && len(k) < len(c) && strings.HasPrefix(c, k) && strings.ContainsRune("-._:@", rune(c[len(k)])) {
			best = k
		}
	}
	if best == "" {
		return Price{}, "", false
	}
	return t[best], best, true
}

// Models returns the table's ids, sorted.
func (t Table) Models() []string {
	ids := make([]string, 0, len(t))
	for k := range t {
		ids = append(ids, k)
	}
	slices.Sort(ids)
	return ids
}

// Load returns base overlaid with the price file at path (YAML, or
// JSON, which is YAML too): a mapping from model id to its prices,
//
//	claude-opus-4-5: {input: 5, cache_write: 6.25, cache_read: 0.5}
//	my-model:        {input: 2}   # cache_write 1.25x and cache_read 0.1x input
//	claude-haiku-5-5:
//	  input: 0.1
//	  long_prompt: {above: 100000, input: 0.5}
//
// An entry replaces the model's whole entry; cache rates left out default
// to 1.25x (write) and 0.1x (read) of input, in long_prompt too (for a
// model the registry knows as OpenAI's, write defaults to 1x input). Unknown
// keys and negative prices are errors.
func Load(path string, base Table) (Table, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := Parse(data, base)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Parse is Load for the file's contents.
func Parse(data []byte, base Table) (Table, error) {
	type longIn struct {
		Above      int      `yaml:"above"`
		Input      *float64 `yaml:"input"`
		CacheWrite *float64 `yaml:"cache_write"`
		CacheRead  *float64 `yaml:"cache_read"`
	}
	type priceIn struct {
		Input      *float64 `yaml:"input"`
		CacheWrite *float64 `yaml:"cache_write"`
		CacheRead  *float64 `yaml:"cache_read"`
		Long       *longIn  `yaml:"long_prompt"`
	}
	var in map[string]priceIn
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&in); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	rates := func(id string, input, w, r *float64) (float64, float64, float64, error) {
		if input == nil {
			return 0, 0, 0, fmt.Errorf("%s: input price missing", id)
		}
		x := [3]float64{*input, *input * 1.25, *input * 0.1}
		if model.Lookup(id).Provider == model.OpenAI {
			x[1] = *input // OpenAI: no cache-write premium
		}
		if w != nil {
			x[1] = *w
		}
		if r != nil {
			x[2] = *r
		}
		for _, v := range x {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, 0, 0, fmt.Errorf("%s: price %v is not a non-negative number", id, v)
			}
		}
		return x[0], x[1], x[2], nil
	}
	out := Table{}
	for k, v := range base {
		out[k] = v
	}
	ids := make([]string, 0, len(in))
	for id := range in {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		v := in[id]
		var p Price
		var err error
		if p.Input, p.CacheWrite, p.CacheRead, err = rates(id, v.Input, v.CacheWrite, v.CacheRead); err != nil {
			return nil, err
		}
		if v.Long != nil {
			l := &LongPrice{Above: v.Long.Above}
			if l.Above <= 0 {
				return nil, fmt.Errorf("%s: long_prompt.above must be positive", id)
			}
			if l.Input, l.CacheWrite, l.CacheRead, err = rates(id+" long_prompt", v.Long.Input, v.Long.CacheWrite, v.Long.CacheRead); err != nil {
				return nil, err
			}
			p.Long = l
		}
		out[model.Canonical(id)] = p
	}
	return out, nil
}
