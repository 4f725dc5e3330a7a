package model

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want Info
	}{
		{"claude-opus-4-8", Info{ID: "claude-opus-4-8", Provider: Anthropic, Window: 1_000_000, MaxOutput: 128_000, Known: true}},
		{"claude-sonnet-4-5-20250929", Info{ID: "claude-sonnet-4-5", Provider: Anthropic, Window: 200_000, LongWindow: 1_000_000, MaxOutput: 64_000, Known: true}},
		{"claude-sonnet-4-5-20250929[1m]", Info{ID: "claude-sonnet-4-5", Provider: Anthropic, Window: 1_000_000, LongWindow: 1_000_000, MaxOutput: 64_000, Known: true, Long: true}},
		{"claude-haiku-4-5@20251001", Info{ID: "claude-haiku-4-5", Provider: Anthropic, Window: 200_000, MaxOutput: 64_000, Known: true}},
		{"  Claude-Opus-4-5-20251101 ", Info{ID: "claude-opus-4-5", Provider: Anthropic, Window: 200_000, MaxOutput: 64_000, Known: true}},
		{"claude-opus-4-5[1m]", Info{ID: "claude-opus-4-5", Provider: Anthropic, Window: 200_000, MaxOutput: 64_000, Known: true}}, // no long window: suffix ignored
		{"claude-sonnet-5-5", Info{ID: "claude-sonnet-5-5", Provider: Anthropic, Window: 1_000_000, MaxOutput: 128_000, Binding: true, Known: true}},
		{"claude-fable-5-2", Info{ID: "claude-fable-5-2", Provider: Anthropic, Window: 1_000_000, MaxOutput: 128_000, Binding: true, Known: true}},
		{"claude-opus-4-1-20250805", Info{ID: "claude-opus-4-1", Provider: Anthropic, Window: 200_000, MaxOutput: 32_000, Known: true}},
		// family prefix at a separator, longest first
		{"claude-opus-4-10", Info{ID: "claude-opus-4", Provider: Anthropic, Window: 200_000, MaxOutput: 32_000, Known: true}},
		{"gpt-5.6-sol-fast", Info{ID: "gpt-5.6-sol", Provider: OpenAI, Window: 1_050_000, MaxOutput: 128_000, Known: true}},
		{"gpt-5-mini-2025-08-07", Info{ID: "gpt-5", Provider: OpenAI, Window: 400_000, MaxOutput: 128_000, Known: true}},
		{"gpt-5-chat-latest", Info{ID: "gpt-5-chat-latest", Provider: OpenAI, Window: 128_000, MaxOutput: 16_384, Known: true}},
		// The Codex models of the real rollouts (shared data).
		{"gpt-5-codex", Info{ID: "gpt-5", Provider: OpenAI, Window: 400_000, MaxOutput: 128_000, Known: true}},
		{"gpt-5.1-codex-max", Info{ID: "gpt-5.1", Provider: OpenAI, Window: 400_000, MaxOutput: 128_000, Known: true}},
		{"gpt-5.2-codex", Info{ID: "gpt-5.2", Provider: OpenAI, Window: 400_000, MaxOutput: 128_000, Known: true}},
		{"openai/gpt-4o-mini", Info{ID: "gpt-4o", Provider: OpenAI, Window: 128_000, MaxOutput: 16_384, Known: true}},
		{"models/gemini-3-pro-preview", Info{ID: "gemini-3-pro", Provider: Google, Window: 1_048_576, MaxOutput: 65_536, Known: true}},
		{"gemini-4-ultra", Info{ID: "gemini", Provider: Google, Window: 1_048_576, MaxOutput: 65_536, Known: true}},
		// not a separator: "gpt-50" is not gpt-5
		{"gpt-50", Info{ID: "gpt-50", Provider: Custom, Window: DefaultWindow, MaxOutput: DefaultMaxOutput}},
		{"my-local-llm", Info{ID: "my-local-llm", Provider: Custom, Window: DefaultWindow, MaxOutput: DefaultMaxOutput}},
		{"", Info{Provider: Custom, Window: DefaultWindow, MaxOutput: DefaultMaxOutput}},
	} {
		t.Run(tc.id, func(t *testing.T) {
			if d := cmp.Diff(tc.want, Lookup(tc.id)); d != "" {
				t.Errorf("Lookup(%q) (-want +got):\n%s", tc.id, d)
			}
		})
	}
}

func TestLookupRequest(t *testing.T) {
	r := Default()
	for _, tc := range []struct {
		id     string
		betas  []string
		window int
		long   bool
	}{
		{"claude-sonnet-4-5", nil, 200_000, false},
		{"claude-sonnet-4-5", []string{"interleaved-thinking-2025-05-14, context-1m-2025-08-07"}, 1_000_000, true},
		{"claude-sonnet-4-5", []string{"x", Beta1M}, 1_000_000, true},
		{"claude-sonnet-4-5", []string{"context-1m-2025-08-07x"}, 200_000, false},
		{"claude-haiku-4-5", []string{Beta1M}, 200_000, false}, // no long window
	} {
		t.Run(fmt.Sprint(tc.id, tc.betas), func(t *testing.T) {
			got := r.LookupRequest(tc.id, tc.betas...)
			if got.Window != tc.window || got.Long != tc.long {
				t.Errorf("window %d long %v, want %d %v", got.Window, got.Long, tc.window, tc.long)
			}
		})
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"claude-sonnet-4-5-20250929":      "claude-sonnet-4-5",
		"Anthropic/Claude-Sonnet-4-5[1m]": "claude-sonnet-4-5",
		"gpt-5-2025-08-07":                "gpt-5",
		"claude-haiku-4-5@20251001":       "claude-haiku-4-5",
		"claude-3-7-sonnet-latest":        "claude-3-7-sonnet",
		"gpt-5.6-sol":                     "gpt-5.6-sol",
		"x-1234567":                       "x-1234567",
	} {
		if got := Canonical(in); got != want {
			t.Errorf("Canonical(%q) = %q, want %q", in, got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestConfig(t *testing.T) {
	cfg := Defaults()
	cfg.Default = Limits{Window: 100_000, MaxOutput: 8_000}
	cfg.Overrides = map[string]Limits{
		"claude-opus-4-8": {Binding: ptr(true)},                   // patch a table entry
		"claude-opus-4-5": {MaxOutput: 32_000},                    // patch a field
		"acme-coder":      {Window: 64_000, MaxOutput: 4_000},     // new family
		"gpt-5":           {Window: 272_000, Binding: ptr(false)}, // patch a family: variants follow
	}
	r, err := NewRegistry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		want Info
	}{
		{"claude-opus-4-8", Info{ID: "claude-opus-4-8", Provider: Anthropic, Window: 1_000_000, MaxOutput: 128_000, Binding: true, Known: true}},
		{"claude-opus-4-5-20251101", Info{ID: "claude-opus-4-5", Provider: Anthropic, Window: 200_000, MaxOutput: 32_000, Known: true}},
		{"acme-coder-7b", Info{ID: "acme-coder", Provider: Custom, Window: 64_000, MaxOutput: 4_000, Known: true}},
		{"gpt-5-codex", Info{ID: "gpt-5", Provider: OpenAI, Window: 272_000, MaxOutput: 128_000, Known: true}},
		{"unknown", Info{ID: "unknown", Provider: Custom, Window: 100_000, MaxOutput: 8_000}},
	} {
		t.Run(tc.id, func(t *testing.T) {
			if d := cmp.Diff(tc.want, r.Lookup(tc.id)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	// The default registry is untouched by another registry's overrides.
	if Lookup("claude-opus-4-8").Binding {
		t.Error("override leaked into the default registry")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string // substrings of the error; nil means valid
	}{
		{"defaults", Defaults(), nil},
		{"zero default", Config{}, []string{"default.window", "default.max_output"}},
		{"output over window", Config{Default: Limits{Window: 1000, MaxOutput: 1000}}, []string{"default.max_output"}},
		{"bad override", Config{Default: Defaults().Default, Overrides: map[string]Limits{
			" ":   {Window: 5},
			"m":   {Window: 10, MaxOutput: 20},
			"n":   {Window: -1},
			"l":   {Window: 10, MaxOutput: 1, LongWindow: 5},
			"M-1": {}, "m-1": {}, // same canonical id
		}}, []string{`empty model id`, `overrides[m]: max_output 20`, `overrides[n]: limits`, `overrides[l]: long_window`, `name the same model`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if _, err := NewRegistry(tc.cfg); err == nil {
				t.Error("NewRegistry accepted an invalid config")
			}
		})
	}
	// A patch that is valid alone but not with the entry it patches.
	_, err := NewRegistry(Config{Default: Defaults().Default, Overrides: map[string]Limits{"claude-haiku-4-5": {Window: 50_000}}})
	if err == nil || !strings.Contains(err.Error(), "max_output 64000 must be below window 50000") {
		t.Errorf("err = %v", err)
	}
}

func TestConfigYAMLStrict(t *testing.T) {
	src := `
default:
  window: 128000
  max_output: 16000
  binding: false
overrides:
  claude-sonnet-4-5:
    long_window: 1000000
    binding: true
`
	var cfg Config
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	want := Config{Default: Limits{Window: 128000, MaxOutput: 16000, Binding: ptr(false)},
		Overrides: map[string]Limits{"claude-sonnet-4-5": {LongWindow: 1000000, Binding: ptr(true)}}}
	if d := cmp.Diff(want, cfg); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	dec = yaml.NewDecoder(strings.NewReader("default:\n  windw: 5\n"))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err == nil {
		t.Error("unknown field accepted")
	}
}

func TestDynamicDefaults(t *testing.T) {
	for _, tc := range []struct {
		window, maxOut                int
		trigger, budget, protectNewer int
	}{
		{200_000, 64_000, 136_000, 17_000, 40_000},
		{1_000_000, 128_000, 872_000, 65_536, 40_000},
		{100_000, 8_000, 92_000, 11_500, 20_000},
		{60_000, 70_000, 0, 3_750, 12_000},
		{524_288, 0, 524_288, 65_536, 40_000},
		{524_280, 0, 524_280, 65_535, 40_000},
	} {
		t.Run(fmt.Sprint(tc.window), func(t *testing.T) {
			in := Info{Window: tc.window, MaxOutput: tc.maxOut}
			got := [3]int{in.Trigger(), in.SummaryBudget(), in.ProtectNewest()}
			if want := [3]int{tc.trigger, tc.budget, tc.protectNewer}; got != want {
				t.Errorf("trigger, budget, protect = %v, want %v", got, want)
			}
		})
	}
}

func TestParseAmount(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Amount
		resolve int // at a 200,000 window
		err     bool
	}{
		{"100000", Tokens(100_000), 100_000, false},
		{"100_000", Tokens(100_000), 100_000, false},
		{"100k", Tokens(100_000), 100_000, false},
		{" 100K ", Tokens(100_000), 100_000, false},
		{"1.5M", Tokens(1_500_000), 1_500_000, false},
		{"0.5k", Tokens(500), 500, false},
		{"40%", Fraction(0.4), 80_000, false},
		{"12.5 %", Fraction(0.125), 25_000, false},
		{"100%", Fraction(1), 200_000, false},
		{"0.4", Fraction(0.4), 80_000, false},
		{"0.55", Fraction(0.55), 110_000, false},
		{"1.0", Tokens(1), 1, false},
		{"0", Amount{}, 0, false},
		{"", Amount{}, 0, true},
		{"-5", Amount{}, 0, true},
		{"101%", Amount{}, 0, true},
		{"0%", Amount{}, 0, true},
		{"1.5", Amount{}, 0, true},
		{"0.0001k", Amount{}, 0, true},
		{"lots", Amount{}, 0, true},
		{"NaN", Amount{}, 0, true},
		{"1e300", Amount{}, 0, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseAmount(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if got != tc.want {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
			if r := got.Resolve(200_000); r != tc.resolve {
				t.Errorf("Resolve = %d, want %d", r, tc.resolve)
			}
		})
	}
}

func TestAmountYAMLAndJSON(t *testing.T) {
	type cfg struct {
		Trigger Amount `yaml:"trigger" json:"trigger"`
		Keep    Amount `yaml:"keep" json:"keep"`
		Clear   Amount `yaml:"clear" json:"clear"`
		Unset   Amount `yaml:"unset" json:"unset"`
	}
	var y cfg
	if err := yaml.Unmarshal([]byte("trigger: 100000\nkeep: \"40%\"\nclear: 0.25\n"), &y); err != nil {
		t.Fatal(err)
	}
	want := cfg{Trigger: Tokens(100_000), Keep: Fraction(0.4), Clear: Fraction(0.25)}
	if y != want {
		t.Fatalf("yaml: got %+v", y)
	}
	out, err := yaml.Marshal(y)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff("trigger: 100000\nkeep: 40%\nclear: 25%\nunset: 0\n", string(out)); d != "" {
		t.Errorf("yaml out (-want +got):\n%s", d)
	}
	var back cfg
	if err := yaml.Unmarshal(out, &back); err != nil || back != y {
		t.Errorf("yaml round trip: %+v %v", back, err)
	}
	for _, bad := range []string{"trigger: [1]\n", "trigger: 1.5\n", "trigger: \"-3\"\n"} {
		if err := yaml.Unmarshal([]byte(bad), &y); err == nil {
			t.Errorf("yaml %q accepted", bad)
		}
	}
	var j cfg
	if err := json.Unmarshal([]byte(`{"trigger":"100k","keep":0.4,"clear":"25%","unset":null}`), &j); err != nil {
		t.Fatal(err)
	}
	if j != want {
		t.Fatalf("json: got %+v", j)
	}
	b, _ := json.Marshal(j)
	if d := cmp.Diff(`{"trigger":100000,"keep":"40%","clear":"25%","unset":0}`, string(b)); d != "" {
		t.Errorf("json out (-want +got):\n%s", d)
	}
}

func TestAmountValidate(t *testing.T) {
	for _, a := range []Amount{{tokens: -1}, {fraction: 1.5}, {fraction: -0.1}, {tokens: 1, fraction: 0.1}} {
		if a.Validate() == nil {
			t.Errorf("%#v valid", a)
		}
	}
	for _, a := range []Amount{{}, Tokens(5), Fraction(1)} {
		if err := a.Validate(); err != nil {
			t.Errorf("%#v: %v", a, err)
		}
	}
}

func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"100000", "100k", "1.5M", "40%", "0.4", "", "-1", "1e3", "100_000", "99.99%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAmount(s)
		if err != nil {
			return
		}
		if err := a.Validate(); err != nil {
			t.Fatalf("ParseAmount(%q) = %#v, invalid: %v", s, a, err)
		}
		if a.Resolve(1_000_000) < 0 {
			t.Fatalf("negative resolve for %q", s)
		}
		b, err := ParseAmount(a.String())
		if err != nil || b.Resolve(1_000_000) != a.Resolve(1_000_000) {
			t.Fatalf("String %q of %q does not round trip: %#v %v", a.String(), s, b, err)
		}
	})
}

// TestRegistryTable states what the embedded table must be rather than
// reprinting it: invariants every entry keeps, the sets the sources
// define (the models that bind thinking, those with a long window), and
// figures checked by hand against the source named next to each.
func TestRegistryTable(t *testing.T) {
	models := Default().Models()
	if len(models) == 0 {
		t.Fatal("the registry is empty")
	}
	seen := map[string]bool{}
	var binding, long []string
	for _, in := range models {
		if in.ID == "" || seen[in.ID] {
			t.Errorf("entry %q: empty or repeated id", in.ID)
		}
		seen[in.ID] = true
		// An entry Lookup could not find as itself would be dead weight.
		if got := Lookup(in.ID); got.ID != in.ID || !got.Known {
			t.Errorf("%s: Lookup finds %q (known %v)", in.ID, got.ID, got.Known)
		}
		switch in.Provider {
		case Anthropic, OpenAI, Google:
		default:
			t.Errorf("%s: provider %q is not a vendor", in.ID, in.Provider)
		}
		if f := Family(in.ID); f != string(in.Provider) {
			t.Errorf("%s: family %q, provider %q", in.ID, f, in.Provider)
		}
		// Every window today is between 128K and about 1M; a figure off
		// by a digit lands outside.
		if in.Window < 100_000 || in.Window > 2_000_000 {
			t.Errorf("%s: window %d is implausible", in.ID, in.Window)
		}
		if in.MaxOutput < 4_096 || in.MaxOutput >= in.Window {
			t.Errorf("%s: max output %d is implausible for a %d window", in.ID, in.MaxOutput, in.Window)
		}
		if in.LongWindow != 0 {
			if in.LongWindow <= in.Window {
				t.Errorf("%s: long window %d is not above the window %d", in.ID, in.LongWindow, in.Window)
			}
			long = append(long, in.ID)
		}
		if in.Binding {
			binding = append(binding, in.ID)
		}
	}
	// The models whose thinking blocks are bound to their prefix: the
	// supportedModels of
	// https://platform.claude.com/docs/en/build-with-claude/preserved-thinking/prefix-checks.
	wantBinding := []string{"claude-fable-5-1", "claude-fable-5-2", "claude-haiku-5-5", "claude-mythos-5-1", "claude-mythos-5-2", "claude-opus-5-5", "claude-sonnet-5-5"}
	if d := cmp.Diff(wantBinding, binding); d != "" {
		t.Errorf("binding models (-documented +table):\n%s", d)
	}
	// The models the context-1m-2025-08-07 beta opens to 1M
	// (platform.claude.com/docs/en/build-with-claude/context-windows).
	if d := cmp.Diff([]string{"claude-sonnet-4", "claude-sonnet-4-5"}, long); d != "" {
		t.Errorf("models with a long window (-documented +table):\n%s", d)
	}
	// Figures read from the sources by hand (TestLookup checks more).
	for _, tc := range []struct {
		source string
		want   Info
	}{
		{"models/haiku-5-5/overview: 1M / 128K", Info{ID: "claude-haiku-5-5", Provider: Anthropic, Window: 1_000_000, MaxOutput: 128_000, Binding: true, Known: true}},
		{"fable-5 introduction: 1M / 128K, no binding before 5.1", Info{ID: "claude-mythos-5", Provider: Anthropic, Window: 1_000_000, MaxOutput: 128_000, Known: true}},
		{"tygartmedia.com table: Sonnet 4.6 1M / 64K", Info{ID: "claude-sonnet-4-6", Provider: Anthropic, Window: 1_000_000, MaxOutput: 64_000, Known: true}},
		{"legacy model table: Haiku 3.5 200K / 8,192", Info{ID: "claude-3-5-haiku", Provider: Anthropic, Window: 200_000, MaxOutput: 8_192, Known: true}},
		{"legacy model table: Sonnet 3.7 200K / 64K", Info{ID: "claude-3-7-sonnet", Provider: Anthropic, Window: 200_000, MaxOutput: 64_000, Known: true}},
		{"docs.oxen.ai: GPT-5.5 1,050,000 / 128,000", Info{ID: "gpt-5.5", Provider: OpenAI, Window: 1_050_000, MaxOutput: 128_000, Known: true}},
		{"GPT-4.1: 1,047,576 / 32,768", Info{ID: "gpt-4.1", Provider: OpenAI, Window: 1_047_576, MaxOutput: 32_768, Known: true}},
		{"o3: 200,000 / 100,000", Info{ID: "o3", Provider: OpenAI, Window: 200_000, MaxOutput: 100_000, Known: true}},
		{"gpt-5.1-chat-latest: 128,000 / 16,384", Info{ID: "gpt-5.1-chat-latest", Provider: OpenAI, Window: 128_000, MaxOutput: 16_384, Known: true}},
		{"ai.google.dev models/gemini-2.5-pro: 1,048,576 / 65,536", Info{ID: "gemini-2.5-pro", Provider: Google, Window: 1_048_576, MaxOutput: 65_536, Known: true}},
		{"vercel.com gemini-3.8-flash: 1,000,000 / 65,536", Info{ID: "gemini-3.8-flash", Provider: Google, Window: 1_000_000, MaxOutput: 65_536, Known: true}},
	} {
		if d := cmp.Diff(tc.want, Lookup(tc.want.ID)); d != "" {
			t.Errorf("%s (%s) (-source +table):\n%s", tc.want.ID, tc.source, d)
		}
	}
}

func TestFamily(t *testing.T) {
	for id, want := range map[string]string{
		"":                           "",
		"claude-sonnet-4-5-20250929": "anthropic",
		"claude-opus-4-8":            "anthropic",
		"anthropic/claude-haiku-4-5": "anthropic",
		"us.anthropic.claude-sonnet-4-5-20250929-v1:0": "anthropic",
		"claude-sonnet-4-5@20250929":                   "anthropic",
		"gpt-5":                                        "openai",
		"gpt-5.1-codex-max":                            "openai",
		"openai/gpt-4.1-mini":                          "openai",
		"o3":                                           "openai",
		"o4-mini":                                      "openai",
		"codex-mini-latest":                            "openai",
		"gemini-2.5-pro":                               "google",
		"google/gemini-3-pro-preview":                  "google",
		"glm-4.6":                                      "glm",
		"qwen3.5-coder":                                "qwen3.5",
		"deepseek-chat":                                "deepseek",
	} {
		if got := Family(id); got != want {
			t.Errorf("Family(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestCacheTTL checks each provider's cache lifetimes, default and
// extended, against the figures the providers publish (5 minutes or 1
// hour at Anthropic; 5 minutes in memory or 24 hours at OpenAI).
func TestCacheTTL(t *testing.T) {
	for _, tc := range []struct {
		id       string
		extended bool
		want     time.Duration
	}{
		{"claude-sonnet-4-5-20250929", false, 5 * time.Minute},
		{"claude-sonnet-4-5-20250929", true, 60 * time.Minute},
		{"gpt-5.2-codex", false, 5 * time.Minute},
		{"gpt-5.2-codex", true, 24 * 60 * time.Minute},
		{"gemini-3-pro", false, 5 * time.Minute},
		{"gemini-2.5-flash", true, 5 * time.Minute}, // implicit caching has no extended lifetime
		{"some-unknown-model", true, 60 * time.Minute},
	} {
		if got := Lookup(tc.id).CacheTTL(tc.extended); got != tc.want {
			t.Errorf("%s extended=%v: CacheTTL = %v, want %v", tc.id, tc.extended, got, tc.want)
		}
	}
}

// TestCachePrices: Anthropic bills a write at 1.25x; OpenAI and Google
// (implicit caching) bill none; a read is 0.1x everywhere.
func TestCachePrices(t *testing.T) {
	for id, want := range map[string][2]int{
		"claude-sonnet-4-5": {1250, 100}, "gpt-5": {1000, 100}, "gemini-2.5-pro": {1000, 100}, "gemini-3-pro-preview": {1000, 100},
	} {
		if w, r := Lookup(id).CachePrices(); w != want[0] || r != want[1] {
			t.Errorf("%s: CachePrices %d, %d; want %v", id, w, r, want)
		}
	}
}
