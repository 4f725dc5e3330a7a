package compact

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/store"
)

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name              string
		cfg               Config
		window, maxOutput int
		want              limits
	}{
		{"200K window, 64K output", Defaults(), 200_000, 64_000,
			limits{line: 136_000, prepare: 81_600, swap: 102_000, force: 119_680, protect: 40_000, budget: 17_000}},
		{"1M window", Defaults(), 1_000_000, 128_000,
			limits{line: 872_000, prepare: 523_200, swap: 654_000, force: 767_360, protect: 40_000, budget: 65_536}},
		{"64K window, 8K output: protect 20% of the window", Defaults(), 64_000, 8_000,
			limits{line: 56_000, prepare: 33_600, swap: 42_000, force: 49_280, protect: 12_800, budget: 7_000}},
		{"tokens", Config{Enabled: true, Prepare: model.Tokens(10_000), Swap: model.Tokens(20_000), Protect: model.Tokens(5_000), SummaryBudget: model.Tokens(4_000)}, 200_000, 64_000,
			limits{line: 136_000, prepare: 10_000, swap: 20_000, force: 119_680, protect: 5_000, budget: 4_000}},
		{"output above the window: half the window", Defaults(), 40_000, 64_000,
			limits{line: 20_000, prepare: 12_000, swap: 15_000, force: 17_600, protect: 8_000, budget: 2_500}},
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

// TestDocsCompactionTable: docs/how-it-works.md's table of compaction limits
// (and its statement of the summary budget) is what the code resolves,
// for each model it names (whose window and maximum output are the
// registry's) and for replay's 64K window.
func TestDocsCompactionTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/how-it-works.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Compaction\n")
	if !ok {
		t.Fatal("docs/how-it-works.md has no ## Compaction section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	if want := "the summary budget an\neighth of the overflow line, within 500–65,536 tokens"; !strings.Contains(section, want) || model.SummaryDivisor != 8 || model.SummaryBudgetMin != 500 || model.SummaryBudgetMax != 65_536 {
		t.Errorf("docs/how-it-works.md's statement of the summary budget (%q) is not the code's (1/%d of the line, within %d–%d)", want, model.SummaryDivisor, model.SummaryBudgetMin, model.SummaryBudgetMax)
	}
	num := func(s string) int {
		n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(s), ",", ""))
		if err != nil {
			t.Fatalf("%q is not a number", s)
		}
		return n
	}
	size := func(s string) int {
		a, err := model.ParseAmount(s)
		if err != nil {
			t.Fatalf("%q is not a size", s)
		}
		return a.TokenCount()
	}
	row := regexp.MustCompile(`^\| (.+?) \((\S+) / (\S+)\) \|(( [0-9,]+ \|){6})$`)
	rows := 0
	for line := range strings.SplitSeq(section, "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rows++
		window, maxOut := size(m[2]), size(m[3])
		if name := m[1]; !strings.HasPrefix(name, "`") {
			in := model.Default().Lookup(name)
			if in.Window != window || in.MaxOutput != maxOut {
				t.Errorf("%s: docs/how-it-works.md'says %d / %d, the registry %d / %d", name, window, maxOut, in.Window, in.MaxOutput)
			}
		}
		cells := strings.Split(strings.Trim(m[4], " |"), "|")
		var got []int
		for _, c := range cells {
			got = append(got, num(c))
		}
		l := Defaults().resolve(window, maxOut)
		if want := []int{l.line, l.prepare, l.swap, l.force, l.protect, l.budget}; !slices.Equal(got, want) {
			t.Errorf("docs/how-it-works.md row %q: %v, the code resolves %v", m[1], got, want)
		}
	}
	if rows < 4 {
		t.Errorf("%d rows of the compaction table read, want 4", rows)
	}
}

// jobSummarizer hands the jobs it gets to a test.
type jobSummarizer struct{ jobs chan *pass.Job }

func (s *jobSummarizer) Summarize(ctx context.Context, j *pass.Job) (pass.Summary, error) {
	s.jobs <- j
	return pass.Summary{Text: "a summary", Model: "small"}, nil
}

// TestOneBudget (defect 6): a model's summary and the extractive one have
// one budget, the one docs/how-it-works.md's table states (TestDocsCompactionTable):
// the extractive summary of a long span fills it (it was capped at an
// eighth of the line while the docs and the summarizer's limit said 15%
// of the window), and the summarizer is asked for no more.
func TestOneBudget(t *testing.T) {
	lim := Defaults().resolve(64_000, 8_000)
	msgs := []string{`{"role":"user","content":"run them all"}`}
	for i := range 3000 {
		id := "c" + strconv.Itoa(i)
		msgs = append(msgs, `{"role":"assistant","content":[{"type":"tool_use","id":"`+id+`","name":"Bash","input":{"command":"echo step `+strconv.Itoa(i)+` of the long run"}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+id+`","content":"ok"}]}`)
	}
	msgs = append(msgs, `{"role":"assistant","content":"done"}`)
	c, err := anthropic.Parse([]byte(`{"model":"m","messages":[` + strings.Join(msgs, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	sum := &jobSummarizer{jobs: make(chan *pass.Job, 1)}
	p, err := New(Defaults(), Options{Blobs: &store.Blobs{Store: store.NewMemory()}, Summarizer: sum})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s := &planState{p: p, r: &pipeline.Request{Conv: c}, lim: lim, now: &current{}, pending: &compaction{end: len(c.Messages) - 1, key: "compact/onebudget"}}
	rec := s.extractive()
	if n := rec.Tokens; n > lim.budget || n < lim.budget*3/4 {
		t.Errorf("the extractive summary message of a long span takes %d tokens; the budget is %d", n, lim.budget)
	}
	if s.p.jobs.start(s, &pipeline.Env{Protocol: "anthropic"}) == nil {
		t.Fatal("no summary job started")
	}
	j := <-sum.jobs
	m := regexp.MustCompile(`under about (\d+) tokens`).FindStringSubmatch(j.System)
	if m == nil {
		t.Fatalf("the prompt names no length:\n%s", j.System)
	}
	if asked, _ := strconv.Atoi(m[1]); j.MaxTokens != lim.budget || asked > lim.budget || asked < lim.budget/2 {
		t.Errorf("the summarizer is asked for %d tokens with a limit of %d; the budget is %d", asked, j.MaxTokens, lim.budget)
	}
}
