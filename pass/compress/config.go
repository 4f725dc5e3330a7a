package compress

import (
	"errors"
	"fmt"
	"path"
)

// Config configures the compress pass. It is meant to be embedded in a
// larger YAML document (as `compress:`) and decoded with gopkg.in/yaml.v3
// over Defaults(), so every field left out of the YAML keeps its default.
// Lists (ExactTools, Tools) are replaced as a whole when they appear in the
// YAML: copy the defaults you want to keep.
//
// Sizes are counted in characters, meaning Unicode code points of the
// decoded tool result text. A limit of 0 means "no limit" wherever a field
// says so.
//
// Every rule has its own switch; with Enabled false, or with every rule
// switched off, the pass makes no edits at all.
type Config struct {
	// Enabled switches the whole pass. Default true.
	Enabled bool `yaml:"enabled"`

	// ANSI removes ANSI escape sequences (colours, cursor movement, OSC
	// hyperlinks keep their text) from tool results. They carry no
	// information for the model and cost 6 bytes each on the wire.
	// Default on. No marker is added: only presentation is removed.
	ANSI Toggle `yaml:"ansi"`

	// CarriageReturns collapses lines overwritten with bare carriage
	// returns (progress bars, spinners) to the text written after the last
	// carriage return of the line (its last non-blank redraw). CRLF line
	// endings are left as they are. Default on, no marker.
	CarriageReturns Toggle `yaml:"carriage_returns"`

	// Base64 replaces base64 data URIs and bare base64-encoded images in
	// text with a placeholder naming the media type and size.
	Base64 Base64Config `yaml:"base64"`

	// Images replaces image blocks inside tool_result arrays with a text
	// placeholder. Default off: screenshots are often what the agent asked
	// for.
	Images ImagesConfig `yaml:"images"`

	// HTML converts tool results that are whole HTML documents to Markdown.
	HTML HTMLConfig `yaml:"html"`

	// Snapshot shortens browser page snapshots (accessibility trees with
	// ref= markers, as Playwright MCP's browser_snapshot returns) to head
	// and tail.
	Snapshot SnapshotConfig `yaml:"snapshot"`

	// LineClip clips overlong lines, keeping their start.
	LineClip LineClipConfig `yaml:"line_clip"`

	// HeadLines keeps only the first lines of a result.
	HeadLines HeadLinesConfig `yaml:"head_lines"`

	// Cap limits the characters of one result, keeping head and tail.
	Cap CapConfig `yaml:"cap"`

	// ExactTools lists tool names (path.Match globs) whose results the
	// agent copies verbatim into later calls: file reads feed Edit's
	// old_string, so one changed character makes the edit fail. Their
	// results get only the character cap and, if switched on, image
	// replacement; every other rule leaves them alone, whatever Tools
	// says. Results that start with Claude Code's line-number gutter
	// ("     1→") are treated the same way whatever their tool.
	//
	// Default: Read, Write, Edit, MultiEdit, NotebookRead, NotebookEdit
	// and the read/write/edit tools of filesystem MCP servers
	// (mcp__*__read_file, mcp__*__read_text_file,
	// mcp__*__read_multiple_files, mcp__*__write_file, mcp__*__edit_file).
	ExactTools []string `yaml:"exact_tools"`

	// Tools holds per-tool overrides. The tool name is that of the
	// tool_use a result answers ("" when none matched). The first rule
	// whose Match fits the name wins; fields it leaves unset fall back to
	// the rule sections above. Defaults:
	//
	//   - Grep and mcp__*grep*: cap 20,000 chars, head limit 250 lines,
	//     lines clipped at 500 columns (Claude Code's own Grep limits:
	//     ripgrep --max-columns 500, head_limit 250, 20K chars).
	//   - WebFetch, mcp__*fetch*, mcp__*scrape*, mcp__*crawl*: cap
	//     100,000 chars (Claude Code's WebFetch limit).
	Tools []ToolRule `yaml:"tools"`
}

// Toggle is a rule with nothing to configure but its switch.
type Toggle struct {
	Enabled bool `yaml:"enabled"`
}

// Base64Config configures base64 replacement.
type Base64Config struct {
	// Enabled switches the rule. Default on.
	Enabled bool `yaml:"enabled"`
	// MinChars is the shortest base64 payload replaced. Default 256,
	// which is longer than any hash, checksum or typical API key (a
	// SHA-512 in base64 is 88 chars).
	MinChars int `yaml:"min_chars"`
	// Bare also replaces base64 runs that are not in a data: URI, but
	// only when the decoded bytes start with the signature of an image or
	// PDF (PNG, JPEG, GIF, WebP, PDF) and the run is not part of a longer
	// word. PGP keys, certificates, tokens and minified code have no such
	// signature and are kept. Runs wrapped over several lines are not
	// recognised. Default on.
	Bare bool `yaml:"bare"`
}

// ImagesConfig configures image block replacement.
type ImagesConfig struct {
	// Replace replaces each image block inside a tool_result array with a
	// text block naming its media type and size (a cache_control on the
	// image block moves to the text block). Default off.
	Replace bool `yaml:"replace"`
}

// HTMLConfig configures HTML reduction.
type HTMLConfig struct {
	// Enabled switches the rule. Default on. The rule fires only when the
	// whole result is an HTML document or fragment: after leading white
	// space it starts with <!DOCTYPE html, <html, or a common HTML element
	// (div, body, table, ...), it ends with '>', and it holds at least 8
	// tags of common HTML elements. Source code that mentions tags (JSX,
	// templates, diffs) starts otherwise and is left alone. A first line
	// says that the result was converted, so the agent knows to fetch the
	// raw markup again (e.g. through grep) if it needs it.
	Enabled bool `yaml:"enabled"`
	// Markdown converts to Markdown with
	// github.com/JohannesKaufmann/html-to-markdown/v2 (tables kept as
	// Markdown tables; head, script, style, iframe, noscript and form
	// inputs dropped). When false the markup is kept and only the content
	// of <script> and <style> elements is removed. Default true.
	Markdown bool `yaml:"markdown"`
	// MinChars is the smallest result considered. Default 1,024.
	MinChars int `yaml:"min_chars"`
	// MaxChars is the largest result converted (0 = no limit); larger
	// ones are left to the cap. The converter runs at about 12 MB/s, so
	// this bounds the time one result can take. Default 1,000,000.
	MaxChars int `yaml:"max_chars"`
	// CacheBytes bounds a memo of conversions keyed by the SHA-256 of the
	// input (0 = no memo). A session resends each page on every later
	// request; the memo makes all but the first conversion a hash and a
	// lookup. It never changes an output. Default 16 MiB.
	CacheBytes int `yaml:"cache_bytes"`
}

// SnapshotConfig configures browser snapshot shortening. A result is a
// snapshot when it holds "[ref=" markers and either mentions "Page
// Snapshot" (as Playwright MCP's output does) or holds at least 20 of
// them.
type SnapshotConfig struct {
	// Enabled switches the rule. Default on.
	Enabled bool `yaml:"enabled"`
	// TriggerChars: only snapshots longer than this are shortened.
	// Default 20,000.
	TriggerChars int `yaml:"trigger_chars"`
	// MaxChars is the most kept, marker included. Default 16,000.
	MaxChars int `yaml:"max_chars"`
	// HeadRatio is the share of MaxChars kept from the start. Default 0.7.
	HeadRatio float64 `yaml:"head_ratio"`
	// MaxTailChars bounds what is kept from the end. Default 3,000.
	MaxTailChars int `yaml:"max_tail_chars"`
}

// LineClipConfig configures line clipping.
type LineClipConfig struct {
	// Enabled switches the rule. Default on.
	Enabled bool `yaml:"enabled"`
	// MaxColumns is the longest line kept whole, in characters, for tools
	// without an override (0 = no clipping). Default 0: a long line in a
	// shell or MCP result is often the payload itself (single-line JSON
	// from an API, a web search's link list), so only search tools clip
	// (see Tools). A line is clipped only where that makes it shorter,
	// marker included.
	MaxColumns int `yaml:"max_columns"`
}

// HeadLinesConfig configures the line head limit.
type HeadLinesConfig struct {
	// Enabled switches the rule. Default on.
	Enabled bool `yaml:"enabled"`
	// MaxLines is how many lines are kept, for tools without an override
	// (0 = no limit). Default 0: the end of a command's output (the test
	// summary, the error) matters as much as its start, and the cap keeps
	// both; only search tools get a head limit (see Tools).
	MaxLines int `yaml:"max_lines"`
}

// CapConfig configures the per-result character cap.
type CapConfig struct {
	// Enabled switches the rule. Default on.
	Enabled bool `yaml:"enabled"`
	// MaxChars is the most a result keeps, marker included, for tools
	// without an override (0 = no cap). Default 200,000.
	MaxChars int `yaml:"max_chars"`
	// HeadRatio is the share of the kept characters taken from the start;
	// the rest comes from the end, where errors and summaries are.
	// Default 0.7.
	HeadRatio float64 `yaml:"head_ratio"`
}

// ToolRule overrides settings for the tools whose name matches Match.
// Unset (nil) fields keep the value of the rule sections. A rule section
// that is switched off stays off whatever a ToolRule says.
type ToolRule struct {
	// Match is a path.Match glob over the tool name, e.g. "Grep" or
	// "mcp__playwright__*". Required.
	Match string `yaml:"match"`
	// Skip leaves results of these tools untouched by every rule.
	Skip bool `yaml:"skip,omitempty"`

	ANSI            *bool `yaml:"ansi,omitempty"`
	CarriageReturns *bool `yaml:"carriage_returns,omitempty"`
	Base64          *bool `yaml:"base64,omitempty"`
	HTML            *bool `yaml:"html,omitempty"`
	Snapshot        *bool `yaml:"snapshot,omitempty"`
	Images          *bool `yaml:"images,omitempty"`

	// MaxChars overrides cap.max_chars (0 = no cap).
	MaxChars *int `yaml:"max_chars,omitempty"`
	// MaxColumns overrides line_clip.max_columns (0 = no clipping).
	MaxColumns *int `yaml:"max_columns,omitempty"`
	// HeadLines overrides head_lines.max_lines (0 = no limit).
	HeadLines *int `yaml:"head_lines,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// Defaults returns the default configuration, documented field by field on
// Config. Each call returns a fresh value the caller may modify.
func Defaults() Config {
	return Config{
		Enabled:         true,
		ANSI:            Toggle{Enabled: true},
		CarriageReturns: Toggle{Enabled: true},
		Base64:          Base64Config{Enabled: true, MinChars: 256, Bare: true},
		Images:          ImagesConfig{Replace: false},
		HTML:            HTMLConfig{Enabled: true, Markdown: true, MinChars: 1024, MaxChars: 1_000_000, CacheBytes: 16 << 20},
		Snapshot: SnapshotConfig{
			Enabled:      true,
			TriggerChars: 20_000,
			MaxChars:     16_000,
			HeadRatio:    0.7,
			MaxTailChars: 3_000,
		},
		LineClip:  LineClipConfig{Enabled: true, MaxColumns: 0},
		HeadLines: HeadLinesConfig{Enabled: true, MaxLines: 0},
		Cap:       CapConfig{Enabled: true, MaxChars: 200_000, HeadRatio: 0.7},
		ExactTools: []string{
			"Read", "Write", "Edit", "MultiEdit", "NotebookRead", "NotebookEdit",
			"mcp__*__read_file", "mcp__*__read_text_file", "mcp__*__read_multiple_files",
			"mcp__*__write_file", "mcp__*__edit_file",
		},
		Tools: []ToolRule{
			{Match: "Grep", MaxChars: ptr(20_000), HeadLines: ptr(250), MaxColumns: ptr(500)},
			{Match: "mcp__*grep*", MaxChars: ptr(20_000), HeadLines: ptr(250), MaxColumns: ptr(500)},
			{Match: "WebFetch", MaxChars: ptr(100_000)},
			{Match: "mcp__*fetch*", MaxChars: ptr(100_000)},
			{Match: "mcp__*scrape*", MaxChars: ptr(100_000)},
			{Match: "mcp__*crawl*", MaxChars: ptr(100_000)},
		},
	}
}

// Smallest limits that still leave room for content next to a marker.
const (
	minCapChars    = 256
	minColumns     = 16
	minBase64Chars = 64
)

// Validate reports every invalid field, each error naming the field by its
// YAML path relative to this Config (e.g. "cap.max_chars",
// "tools[2].match").
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, a...)))
	}
	capField := func(field string, v int) {
		if v != 0 && v < minCapChars {
			bad(field, "must be 0 (no cap) or at least %d, got %d", minCapChars, v)
		}
	}
	colField := func(field string, v int) {
		if v != 0 && v < minColumns {
			bad(field, "must be 0 (no clipping) or at least %d, got %d", minColumns, v)
		}
	}
	lineField := func(field string, v int) {
		if v < 0 {
			bad(field, "must be 0 (no limit) or positive, got %d", v)
		}
	}
	ratio := func(field string, v float64) {
		if !(v >= 0 && v <= 1) {
			bad(field, "must be between 0 and 1, got %v", v)
		}
	}
	if c.Base64.MinChars < minBase64Chars {
		bad("base64.min_chars", "must be at least %d, got %d", minBase64Chars, c.Base64.MinChars)
	}
	if c.HTML.MinChars < 0 {
		bad("html.min_chars", "must not be negative, got %d", c.HTML.MinChars)
	}
	if c.HTML.MaxChars < 0 {
		bad("html.max_chars", "must be 0 (no limit) or positive, got %d", c.HTML.MaxChars)
	}
	if c.HTML.CacheBytes < 0 {
		bad("html.cache_bytes", "must be 0 (no memo) or positive, got %d", c.HTML.CacheBytes)
	}
	s := c.Snapshot
	if s.MaxChars < minCapChars {
		bad("snapshot.max_chars", "must be at least %d, got %d", minCapChars, s.MaxChars)
	}
	if s.TriggerChars < s.MaxChars {
		bad("snapshot.trigger_chars", "must be at least snapshot.max_chars (%d), got %d", s.MaxChars, s.TriggerChars)
	}
	ratio("snapshot.head_ratio", s.HeadRatio)
	if s.MaxTailChars < 0 {
		bad("snapshot.max_tail_chars", "must not be negative, got %d", s.MaxTailChars)
	}
	colField("line_clip.max_columns", c.LineClip.MaxColumns)
	lineField("head_lines.max_lines", c.HeadLines.MaxLines)
	capField("cap.max_chars", c.Cap.MaxChars)
	ratio("cap.head_ratio", c.Cap.HeadRatio)
	for i, p := range c.ExactTools {
		if err := checkGlob(p); err != nil {
			bad(fmt.Sprintf("exact_tools[%d]", i), "%v", err)
		}
	}
	for i, r := range c.Tools {
		f := func(name string) string { return fmt.Sprintf("tools[%d].%s", i, name) }
		if err := checkGlob(r.Match); err != nil {
			bad(f("match"), "%v", err)
		}
		if r.MaxChars != nil {
			capField(f("max_chars"), *r.MaxChars)
		}
		if r.MaxColumns != nil {
			colField(f("max_columns"), *r.MaxColumns)
		}
		if r.HeadLines != nil {
			lineField(f("head_lines"), *r.HeadLines)
		}
	}
	return errors.Join(errs...)
}

func checkGlob(p string) error {
	if p == "" {
		return errors.New("must not be empty")
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("invalid glob %q: %v", p, err)
	}
	return nil
}
