package compact

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/model"
)

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name              string
		cfg               Config
		window, maxOutput int
		want              limits
	}{
		{"200K window, 64K output", Defaults(), 200_000, 64_000,
			limits{line: 136_000, prepare: 81_600, swap: 102_000, force: 119_680, protect: 40_000, budget: 30_000, target: 17_000}},
		{"1M window", Defaults(), 1_000_000, 128_000,
			limits{line: 872_000, prepare: 523_200, swap: 654_000, force: 767_360, protect: 40_000, budget: 65_536, target: 65_536}},
		{"64K window, 8K output: protect 20% of the window, budget clamped up", Defaults(), 64_000, 8_000,
			limits{line: 56_000, prepare: 33_600, swap: 42_000, force: 49_280, protect: 12_800, budget: 20_000, target: 7_000}},
		{"tokens", Config{Enabled: true, Prepare: model.Tokens(10_000), Swap: model.Tokens(20_000), Protect: model.Tokens(5_000), SummaryBudget: model.Tokens(4_000)}, 200_000, 64_000,
			limits{line: 136_000, prepare: 10_000, swap: 20_000, force: 119_680, protect: 5_000, budget: 4_000, target: 4_000}},
		{"output above the window: half the window", Defaults(), 40_000, 64_000,
			limits{line: 20_000, prepare: 12_000, swap: 15_000, force: 17_600, protect: 8_000, budget: 20_000, target: 2_500}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.cfg.resolve(tc.window, tc.maxOutput), cmp.AllowUnexported(limits{})); d != "" {
				t.Errorf("limits (-want +got):\n%s", d)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"prepare above swap", func(c *Config) { c.Prepare = model.Fraction(0.9) }, "above swap"},
		{"negative wait", func(c *Config) { c.Wait = -time.Second }, "wait"},
		{"no swap", func(c *Config) { c.Swap = model.Amount{} }, "must be set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			tc.mod(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error about %q", err, tc.want)
			}
		})
	}
}

func TestCapText(t *testing.T) {
	s := strings.Repeat("é", 5000) // 10,000 bytes
	got := capText(s, 3000)
	if len(got) > 3100 || !strings.Contains(got, "bytes cut") {
		t.Fatalf("capped to %d bytes: %q...", len(got), got[:40])
	}
	if !strings.HasPrefix(got, "éé") || !strings.HasSuffix(got, "éé") || strings.ContainsRune(got, '\uFFFD') {
		t.Fatal("the cut split a character or lost the head or tail")
	}
	if capText("short", 3000) != "short" {
		t.Fatal("a short text changed")
	}
}
