package compress

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

func TestDefaultsValid(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Fatal(err)
	}
	// Defaults returns fresh slices.
	a := Defaults()
	a.Tools[0].Match = "changed"
	a.ExactTools[0] = "changed"
	if b := Defaults(); b.Tools[0].Match != "Grep" || b.ExactTools[0] != "Read" {
		t.Error("Defaults shares slices between calls")
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(c *Config)
		want string // substring of the error naming the field
	}{
		{"cap too small", func(c *Config) { c.Cap.MaxChars = 10 }, "cap.max_chars: must be 0 (no cap) or at least 256, got 10"},
		{"cap ratio", func(c *Config) { c.Cap.HeadRatio = 1.5 }, "cap.head_ratio"},
		{"snapshot trigger below max", func(c *Config) { c.Snapshot.TriggerChars = 1000 }, "snapshot.trigger_chars"},
		{"snapshot max", func(c *Config) { c.Snapshot.MaxChars = 0; c.Snapshot.TriggerChars = 0 }, "snapshot.max_chars"},
		{"snapshot ratio", func(c *Config) { c.Snapshot.HeadRatio = -0.1 }, "snapshot.head_ratio"},
		{"snapshot tail", func(c *Config) { c.Snapshot.MaxTailChars = -1 }, "snapshot.max_tail_chars"},
		{"columns", func(c *Config) { c.LineClip.MaxColumns = 3 }, "line_clip.max_columns"},
		{"head lines", func(c *Config) { c.HeadLines.MaxLines = -1 }, "head_lines.max_lines"},
		{"base64 min", func(c *Config) { c.Base64.MinChars = 8 }, "base64.min_chars"},
		{"html min", func(c *Config) { c.HTML.MinChars = -1 }, "html.min_chars"},
		{"html max", func(c *Config) { c.HTML.MaxChars = -1 }, "html.max_chars"},
		{"empty match", func(c *Config) { c.Tools = append(c.Tools, ToolRule{}) }, "tools[6].match: must not be empty"},
		{"bad glob", func(c *Config) { c.Tools[1].Match = "mcp__[" }, "tools[1].match: invalid glob"},
		{"bad exact glob", func(c *Config) { c.ExactTools = []string{"["} }, "exact_tools[0]: invalid glob"},
		{"tool cap", func(c *Config) { c.Tools[0].MaxChars = ptr(5) }, "tools[0].max_chars"},
		{"tool columns", func(c *Config) { c.Tools[0].MaxColumns = ptr(1) }, "tools[0].max_columns"},
		{"tool head", func(c *Config) { c.Tools[0].HeadLines = ptr(-3) }, "tools[0].head_lines"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.want)
			}
			if _, err := New(c); err == nil {
				t.Error("New accepted an invalid config")
			}
		})
	}
	t.Run("zero limits are off, not errors", func(t *testing.T) {
		c := Defaults()
		c.Cap.MaxChars, c.LineClip.MaxColumns, c.HeadLines.MaxLines = 0, 0, 0
		c.Tools = []ToolRule{{Match: "X", MaxChars: ptr(0), MaxColumns: ptr(0), HeadLines: ptr(0)}}
		if err := c.Validate(); err != nil {
			t.Error(err)
		}
	})
}

func decodeStrict(t *testing.T, src string) (Config, error) {
	t.Helper()
	c := Defaults()
	dec := yaml.NewDecoder(bytes.NewReader([]byte(src)))
	dec.KnownFields(true)
	err := dec.Decode(&c)
	return c, err
}

func TestYAML(t *testing.T) {
	c, err := decodeStrict(t, `
ansi: {enabled: false}
cap: {max_chars: 50000}
images: {replace: true}
tools:
  - match: "mcp__playwright__*"
    images: false
    max_chars: 30000
  - match: Bash
    skip: true
`)
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.ANSI.Enabled = false
	want.Cap.MaxChars = 50000
	want.Images.Replace = true
	want.Tools = []ToolRule{
		{Match: "mcp__playwright__*", Images: ptr(false), MaxChars: ptr(30000)},
		{Match: "Bash", Skip: true},
	}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("decoded config (-want +got):\n%s", diff)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
	t.Run("unknown field rejected", func(t *testing.T) {
		if _, err := decodeStrict(t, "cap: {max_char: 5}\n"); err == nil {
			t.Error("typo accepted")
		}
	})
	t.Run("defaults round trip", func(t *testing.T) {
		out, err := yaml.Marshal(Defaults())
		if err != nil {
			t.Fatal(err)
		}
		c, err := decodeStrict(t, string(out))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Defaults(), c); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

func TestResolve(t *testing.T) {
	p := mustNew(t, Defaults())
	cases := []struct {
		tool string
		want settings
	}{
		{"Bash", settings{text: true, ansi: true, cr: true, base64: true, bare: true, html: true, snapshot: true, maxChars: 200_000}},
		{"Grep", settings{text: true, ansi: true, cr: true, base64: true, bare: true, html: true, snapshot: true, maxChars: 20_000, maxCols: 500, headLines: 250}},
		{"mcp__ripgrep__grep_search", settings{text: true, ansi: true, cr: true, base64: true, bare: true, html: true, snapshot: true, maxChars: 20_000, maxCols: 500, headLines: 250}},
		{"WebFetch", settings{text: true, ansi: true, cr: true, base64: true, bare: true, html: true, snapshot: true, maxChars: 100_000}},
		{"mcp__fetch__fetch", settings{text: true, ansi: true, cr: true, base64: true, bare: true, html: true, snapshot: true, maxChars: 100_000}},
		{"Read", settings{text: true, exact: true, maxChars: 200_000}},
		{"mcp__filesystem__read_text_file", settings{text: true, exact: true, maxChars: 200_000}},
		{"", settings{text: true, ansi: true, cr: true, base64: true, bare: true, html: true, snapshot: true, maxChars: 200_000}},
	}
	for _, tc := range cases {
		t.Run(tc.tool, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, p.resolve(tc.tool), cmp.AllowUnexported(settings{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("override order and section switches", func(t *testing.T) {
		cfg := Defaults()
		cfg.HTML.Enabled = false
		cfg.Tools = []ToolRule{
			{Match: "mcp__*", HTML: ptr(true), MaxChars: ptr(1000)},
			{Match: "mcp__x__*", MaxChars: ptr(5000)},
			{Match: "Read", HeadLines: ptr(10)},
			{Match: "Skipped", Skip: true},
		}
		p := mustNew(t, cfg)
		if s := p.resolve("mcp__x__y"); s.maxChars != 1000 || s.html {
			t.Errorf("first match must win and a switched-off section stays off: %+v", s)
		}
		if s := p.resolve("Read"); !s.exact || s.headLines != 0 {
			t.Errorf("exact tools get only the cap: %+v", s)
		}
		if s := p.resolve("Skipped"); !s.skip {
			t.Errorf("skip: %+v", s)
		}
	})
}
