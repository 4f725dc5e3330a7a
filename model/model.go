// Package model knows the limits of the models ctxguard serves: context
// window, maximum output, and whether the model binds returned thinking
// blocks to the exact prefix that produced them (so that an edit before a
// thinking block invalidates it). Every
// threshold elsewhere is derived from these figures, either directly (the
// dynamic defaults below) or through an Amount ("100k" or "40%").
//
// The registry is an embedded Go table (table.go, sources cited there)
// that a Config can patch and extend. Lookup never fails: a model the
// table does not know gets the configured default, marked Known == false.
//
// Registries are immutable once built and safe for concurrent use.
package model

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Provider names the API family of a model.
type Provider string

const (
	Anthropic Provider = "anthropic"
	OpenAI    Provider = "openai"
	Google    Provider = "google"
	Custom    Provider = "custom" // added by configuration
)

// Beta1M is the anthropic-beta value that opens the long window of models
// that have one (LongWindow).
const Beta1M = "context-1m-2025-08-07"

// BindingBeta is the anthropic-beta value that enables
// thinking.block_binding.prefix_mismatch_behavior on binding models.
const BindingBeta = "thinking-binding-controls-2026-08-01"

// Info describes one model.
type Info struct {
	// ID is the canonical id the entry is known by (for a lookup that
	// matched by date or family, the entry's id, not the one asked for).
	ID       string
	Provider Provider
	// Window is the context window in tokens (prompt plus output).
	Window int
	// LongWindow is the window available with the Beta1M header or the
	// "[1m]" suffix, 0 if the model has no larger window.
	LongWindow int
	// MaxOutput is the largest max_tokens the model accepts.
	MaxOutput int
	// Binding reports that the model enforces thinking-block binding.
	Binding bool
	// Known is false when the lookup fell back to the default.
	Known bool
	// Long is true when the long window was selected (suffix or beta), so
	// Window already equals LongWindow.
	Long bool
}

// CachePrices returns what the model's API bills for prompt-cache writes
// and reads, in thousandths of the base input price: Anthropic bills a
// write at 1.25x and a read at 0.1x; OpenAI caches by itself with no
// write premium and bills a read at the cached-input price (0.1x for the
// GPT-5 family); Google's implicit caching has no write premium either
// and bills a read at 0.1x ("Implicit caching provides a 90% discount on
// cached tokens compared to standard input tokens", "There are no
// storage costs for implicit caching":
// docs.cloud.google.com/gemini-enterprise-agent-platform/models/context-cache/context-cache-overview).
// Other providers get Anthropic's, the dearer write.
func (i Info) CachePrices() (write, read int) {
	if i.Provider == OpenAI || i.Provider == Google {
		return 1000, 100
	}
	return 1250, 100
}

// Prompt-cache lifetimes: how long a provider keeps a cached prompt
// prefix after its last use (each hit starts the time again).
const (
	// AnthropicCacheTTL is the default ("ephemeral", "5m") lifetime and
	// AnthropicExtendedCacheTTL the one a cache_control marker asks for
	// with "ttl":"1h", whose writes cost 2x the input price instead of
	// 1.25x. Source: platform.claude.com/docs/en/build-with-claude/prompt-caching
	// ("The cache has a minimum 5-minute lifetime", "1-hour cache
	// duration").
	AnthropicCacheTTL         = 5 * time.Minute
	AnthropicExtendedCacheTTL = time.Hour
	// OpenAICacheTTL is in-memory retention, the default: "cached
	// prefixes generally remain active for 5 to 10 minutes of
	// inactivity, up to a maximum of one hour during off-peak periods";
	// the bound that holds at any hour is taken. OpenAIExtendedCacheTTL
	// is what a request with "prompt_cache_retention":"24h" gets
	// ("extended prompt cache retention ... up to 24 hours"), at no extra
	// price. Source: platform.openai.com/docs/guides/prompt-caching.
	OpenAICacheTTL         = 5 * time.Minute
	OpenAIExtendedCacheTTL = 24 * time.Hour
	// GoogleCacheTTL is how long Gemini's implicit cache is taken to
	// keep a prefix. Google publishes no lifetime for it (ai.google.dev/
	// gemini-api/docs/caching: "send requests with similar prefix in a
	// short amount of time"; in-memory prefixes "are evicted as capacity
	// is reclaimed"), and no request asks for a longer one (explicit
	// cachedContents, with their own TTL, are a resource ctxguard leaves
	// alone): the in-memory bound of the other providers, 5 minutes, is
	// taken for both.
	GoogleCacheTTL = 5 * time.Minute
)

// CacheTTL returns how long the model's provider keeps a cached prompt
// prefix after its last use: its default lifetime, or the extended one
// a request can ask for (Anthropic's "ttl":"1h", OpenAI's
// prompt_cache_retention "24h"; Google has none: GoogleCacheTTL).
// Providers other than OpenAI and Google get Anthropic's figures.
func (i Info) CacheTTL(extended bool) time.Duration {
	switch {
	case i.Provider == Google:
		return GoogleCacheTTL
	case i.Provider == OpenAI && extended:
		return OpenAIExtendedCacheTTL
	case i.Provider == OpenAI:
		return OpenAICacheTTL
	case extended:
		return AnthropicExtendedCacheTTL
	}
	return AnthropicCacheTTL
}

// Trigger is the dynamic compaction trigger: the window minus the maximum
// output, the largest prompt that still leaves room for a full answer.
func (i Info) Trigger() int { return Trigger(i.Window, i.MaxOutput) }

// SummaryBudget is the token budget of a compaction summary for this
// model (see SummaryBudget): an eighth of its overflow line, or of half
// its window when its maximum output leaves no line.
func (i Info) SummaryBudget() int {
	line := i.Trigger()
	if line <= 0 {
		line = i.Window / 2
	}
	return SummaryBudget(line)
}

// ProtectNewest is how many of the newest tokens compaction keeps verbatim
// for this model's window (see ProtectNewest).
func (i Info) ProtectNewest() int { return ProtectNewest(i.Window) }

// Trigger returns window − maxOutput, or 0 if that is negative.
func Trigger(window, maxOutput int) int { return max(window-maxOutput, 0) }

// Dynamic-default constants from the brief.
const (
	ProtectTokens      = 40_000 // newest tokens kept verbatim
	SummaryDivisor     = 8      // summary budget: this fraction (1/8) of the overflow line
	SummaryBudgetMin   = 500
	SummaryBudgetMax   = 65_536
	DefaultWindow      = 200_000
	DefaultMaxOutput   = 32_000
	maxReasonableLimit = 100_000_000
)

// SummaryBudget returns the token budget of a compaction summary (a
// model's or the extractive one) for a model whose overflow line (window −
// max output) is line: an eighth of the line, within 500–65,536. After a
// compaction the request holds the summary, the protected newest
// messages and the system prompt and tools; a summary this size keeps it
// well below the line at which the next compaction is prepared.
func SummaryBudget(line int) int {
	return min(max(line/SummaryDivisor, SummaryBudgetMin), SummaryBudgetMax)
}

// ProtectNewest returns 40,000, or 20% of the window if that is smaller,
// so a small window is never mostly protected.
func ProtectNewest(window int) int { return min(ProtectTokens, max(window/5, 0)) }

// Limits is one model's figures as configuration gives them. Zero fields
// (and a nil Binding) keep the value of the entry they patch, or of the
// default for a model the table does not know.
type Limits struct {
	Window     int   `yaml:"window,omitempty" json:"window,omitempty"`
	MaxOutput  int   `yaml:"max_output,omitempty" json:"max_output,omitempty"`
	LongWindow int   `yaml:"long_window,omitempty" json:"long_window,omitempty"`
	Binding    *bool `yaml:"binding,omitempty" json:"binding,omitempty"`
}

// Config patches the embedded table. Overrides are keyed by model id; a
// key that names a table entry (exactly, by a dated id, or as a family
// prefix) patches that entry's figures and is matched like it; any other
// key adds an entry that is matched the same way (exactly, dated, or as a
// prefix of longer ids). Default applies to models nothing matches.
type Config struct {
	Default   Limits            `yaml:"default" json:"default"`
	Overrides map[string]Limits `yaml:"overrides,omitempty" json:"overrides,omitempty"`
}

// Defaults returns the configuration ctxguard uses when none is given: no
// overrides, and a 200K-window, 32K-output, non-binding default.
func Defaults() Config {
	f := false
	return Config{Default: Limits{Window: DefaultWindow, MaxOutput: DefaultMaxOutput, Binding: &f}}
}

// Validate reports every problem in c, joined, or nil.
func (c Config) Validate() error {
	var errs []error
	d := c.Default
	if d.Window <= 0 || d.Window > maxReasonableLimit {
		errs = append(errs, fmt.Errorf("model.default.window: %d must be in (0, %d]", d.Window, maxReasonableLimit))
	}
	if d.MaxOutput <= 0 || (d.Window > 0 && d.MaxOutput >= d.Window) {
		errs = append(errs, fmt.Errorf("model.default.max_output: %d must be positive and below the window", d.MaxOutput))
	}
	if d.LongWindow != 0 && d.LongWindow < d.Window {
		errs = append(errs, fmt.Errorf("model.default.long_window: %d is below the window", d.LongWindow))
	}
	keys := make([]string, 0, len(c.Overrides))
	for k := range c.Overrides {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	seen := map[string]string{}
	for _, k := range keys {
		l := c.Overrides[k]
		ck, _ := canonical(k)
		switch {
		case ck == "":
			errs = append(errs, fmt.Errorf("model.overrides: empty model id %q", k))
			continue
		case seen[ck] != "":
			errs = append(errs, fmt.Errorf("model.overrides: %q and %q name the same model", seen[ck], k))
		}
		seen[ck] = k
		if l.Window < 0 || l.Window > maxReasonableLimit || l.MaxOutput < 0 || l.MaxOutput > maxReasonableLimit || l.LongWindow < 0 || l.LongWindow > maxReasonableLimit {
			errs = append(errs, fmt.Errorf("model.overrides[%s]: limits must be in [0, %d]", k, maxReasonableLimit))
		}
		if l.Window > 0 && l.MaxOutput >= l.Window {
			errs = append(errs, fmt.Errorf("model.overrides[%s]: max_output %d must be below window %d", k, l.MaxOutput, l.Window))
		}
		if l.LongWindow > 0 && l.Window > 0 && l.LongWindow < l.Window {
			errs = append(errs, fmt.Errorf("model.overrides[%s]: long_window %d is below window %d", k, l.LongWindow, l.Window))
		}
	}
	return errors.Join(errs...)
}

// Registry answers lookups against the embedded table patched by a Config.
type Registry struct {
	exact    map[string]Info
	prefixes []Info // every entry, longest id first
	def      Info
}

// NewRegistry validates cfg and builds a registry from the embedded table
// and cfg.
func NewRegistry(cfg Config) (*Registry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Registry{exact: map[string]Info{}}
	r.def = Info{Window: cfg.Default.Window, MaxOutput: cfg.Default.MaxOutput, LongWindow: cfg.Default.LongWindow, Provider: Custom}
	if cfg.Default.Binding != nil {
		r.def.Binding = *cfg.Default.Binding
	}
	for _, in := range builtin {
		in.Known = true
		r.exact[in.ID] = in
	}
	keys := make([]string, 0, len(cfg.Overrides))
	for k := range cfg.Overrides {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		l := cfg.Overrides[k]
		id, _ := canonical(k)
		base, ok := r.match(id)
		if !ok {
			base = r.def
			base.Provider = Custom
		}
		base.ID, base.Known = id, true
		if l.Window > 0 {
			base.Window = l.Window
		}
		if l.MaxOutput > 0 {
			base.MaxOutput = l.MaxOutput
		}
		if l.LongWindow > 0 {
			base.LongWindow = l.LongWindow
		}
		if l.Binding != nil {
			base.Binding = *l.Binding
		}
		if base.MaxOutput >= base.Window {
			return nil, fmt.Errorf("model.overrides[%s]: max_output %d must be below window %d", k, base.MaxOutput, base.Window)
		}
		if base.LongWindow != 0 && base.LongWindow < base.Window {
			return nil, fmt.Errorf("model.overrides[%s]: long_window %d is below window %d", k, base.LongWindow, base.Window)
		}
		r.exact[id] = base
	}
	for _, in := range r.exact {
		r.prefixes = append(r.prefixes, in)
	}
	slices.SortFunc(r.prefixes, func(a, b Info) int {
		if len(a.ID) != len(b.ID) {
			return len(b.ID) - len(a.ID)
		}
		return strings.Compare(a.ID, b.ID)
	})
	return r, nil
}

var defaultRegistry = func() *Registry {
	r, err := NewRegistry(Defaults())
	if err != nil {
		panic(err)
	}
	return r
}()

// Default returns the registry built from the embedded table and
// Defaults().
func Default() *Registry { return defaultRegistry }

// Lookup looks id up in the default registry.
func Lookup(id string) Info { return defaultRegistry.Lookup(id) }

// Lookup finds the entry for id, trying in order: the exact id; the id
// without a date suffix ("-20250929", "-2025-08-07", "@20251001") or a
// "-latest" suffix; the longest entry that is a prefix of the id ending at
// a separator ("-", ".", "_", ":", "@"), so "gpt-5.6-sol-fast" finds
// "gpt-5.6-sol" and "gemini-3-pro-preview" finds "gemini-3-pro". Matching
// ignores case, surrounding space and a "provider/" path prefix. A "[1m]"
// suffix selects the long window when the model has one. If nothing
// matches, the default is returned with ID set to the canonical id and
// Known false.
func (r *Registry) Lookup(id string) Info {
	cid, long := canonical(id)
	in, ok := r.match(cid)
	if !ok {
		in = r.def
		in.ID = cid
	}
	if long && in.LongWindow > 0 {
		in.Window, in.Long = in.LongWindow, true
	}
	return in
}

// LookupRequest is Lookup for a request that carries the given
// anthropic-beta values (each may itself be a comma-separated list, as in
// the header): Beta1M selects the long window.
func (r *Registry) LookupRequest(id string, betas ...string) Info {
	in := r.Lookup(id)
	if in.Long || in.LongWindow == 0 {
		return in
	}
	for _, b := range betas {
		for v := range strings.SplitSeq(b, ",") {
			if strings.TrimSpace(v) == Beta1M {
				in.Window, in.Long = in.LongWindow, true
				return in
			}
		}
	}
	return in
}

func (r *Registry) match(id string) (Info, bool) {
	if id == "" {
		return Info{}, false
	}
	if in, ok := r.exact[id]; ok {
		return in, true
	}
	u := undated(id)
	if in, ok := r.exact[u]; ok {
		return in, true
	}
	for _, in := range r.prefixes {
		if len(in.ID) < len(u) && strings.HasPrefix(u, in.ID) && isSep(u[len(in.ID)]) {
			return in, true
		}
	}
	return Info{}, false
}

func isSep(c byte) bool { return c == '-' || c == '.' || c == '_' || c == ':' || c == '@' }

// canonical lowercases and trims id, drops a "provider/" prefix and reports
// and strips a "[1m]" suffix.
func canonical(id string) (string, bool) {
	s := strings.ToLower(strings.TrimSpace(id))
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	long := false
	if t, ok := strings.CutSuffix(s, "[1m]"); ok {
		s, long = strings.TrimSpace(t), true
	}
	return s, long
}

// Canonical returns the id Lookup matches on: lowercased, without a
// provider prefix, a "[1m]" suffix or a date suffix. Two ids with the same
// canonical form are the same model (calibration keys use it).
func Canonical(id string) string {
	s, _ := canonical(id)
	return undated(s)
}

// undated strips one trailing date or "-latest" suffix.
func undated(s string) string {
	if t, ok := strings.CutSuffix(s, "-latest"); ok {
		return t
	}
	digits := func(x string) bool {
		for i := 0; i < len(x); i++ {
			if x[i] < '0' || x[i] > '9' {
				return false
			}
		}
		return true
	}
	// -YYYYMMDD or @YYYYMMDD
	if n := len(s); n > 9 && (s[n-9] == '-' || s[n-9] == '@') && digits(s[n-8:]) {
		return s[:n-9]
	}
	// -YYYY-MM-DD
	if n := len(s); n > 11 && s[n-11] == '-' && s[n-6] == '-' && s[n-3] == '-' &&
		digits(s[n-10:n-6]) && digits(s[n-5:n-3]) && digits(s[n-2:]) {
		return s[:n-11]
	}
	return s
}

// Models returns the registry's entries sorted by id.
func (r *Registry) Models() []Info {
	out := make([]Info, 0, len(r.exact))
	for _, in := range r.exact {
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Family names the family of model id whose thinking signatures one
// another's API settles (see package pass/thinking): "anthropic" (every
// Claude model), "openai" (GPT, o-series, codex), "google" (Gemini,
// Gemma), else the provider of a model the registry knows, else the first
// '-'-separated word of its canonical id. A cloud's region and provider
// prefix ("us.anthropic.claude-...", "openai.gpt-oss-...") is skipped. It
// is "" for an empty id.
func Family(id string) string {
	c := Canonical(id)
	if c == "" {
		return ""
	}
	first, _, _ := strings.Cut(c, "-")
	if i := strings.LastIndexByte(first, '.'); i >= 0 && i+1 < len(first) && first[i+1] >= 'a' && first[i+1] <= 'z' {
		first = first[i+1:] // a Bedrock-style "us.anthropic." prefix, not a version ("qwen3.5")
	}
	switch {
	case first == "claude":
		return string(Anthropic)
	case first == "gpt" || first == "codex" || first == "chatgpt" || (len(first) >= 2 && first[0] == 'o' && first[1] >= '1' && first[1] <= '9'):
		return string(OpenAI)
	case first == "gemini" || first == "gemma":
		return string(Google)
	}
	if in := Lookup(c); in.Known && in.Provider != Custom {
		return string(in.Provider)
	}
	return first
}
