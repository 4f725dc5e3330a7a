package estimator

import (
	"cmp"
	"fmt"
	"github.com/ctxguard/ctxguard/tokens"
	"math"
	"testing"

	"github.com/ctxguard/ctxguard/internal/shareddata"
	"github.com/ctxguard/ctxguard/tools/transcript"
)

// marginMinGrowth is the compared real growth from which a session's own
// aggregate error enters the margin: the sessions that grow towards the
// line (smaller ones are a few turns, whose aggregate is noise).
const marginMinGrowth = 10_000

// TestOverflowMargin recomputes the uncalibrated estimator's error on the
// shared data as tokens.OverflowMargin's doc comment describes it, and fails
// unless tokens.OverflowMargin is the worst underestimate rounded up to the next
// percent: below it the margin does not cover the estimator, above it the
// margin costs compaction more than the measurement asks.
func TestOverflowMargin(t *testing.T) {
	type figure struct {
		what string
		err  float64 // estimate/real - 1
	}
	var figs []figure
	add := func(err float64, format string, args ...any) {
		figs = append(figs, figure{fmt.Sprintf(format, args...), err})
	}
	var all []*transcript.Session
	for _, corpus := range []string{"claude-code", "codex"} {
		ss, err := transcript.Load([]string{shareddata.Dir(t, corpus)}, transcript.Options{})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ss...)
		r := Accuracy(ss, AccuracyOptions{})
		if r.Pairs < 500 {
			t.Fatalf("%s: %d growth pairs: the test measures too little", corpus, r.Pairs)
		}
		add(r.Estimate.Growth.Aggregate, "%s: growth, all %d pairs", corpus, r.Pairs)
		for _, s := range r.PerSession {
			if s.Real >= marginMinGrowth {
				add(float64(s.Estimated)/float64(s.Real)-1, "%s: growth, session %s (%d tokens)", corpus, s.ID, s.Real)
			}
		}
		// Absolute size, where the requests can be rebuilt with the
		// system prompt the client recorded (Codex rollouts): the largest
		// request of each session.
		if corpus != "codex" {
			continue
		}
		for _, s := range ss {
			b, err := transcript.NewBuilder(s, transcript.BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			real, est := 0, 0
			for k := range b.Len() {
				q, err := b.Request(k)
				if err != nil {
					t.Fatal(err)
				}
				if q.Usage != nil && q.Usage.Prompt() > real {
					real, est = q.Usage.Prompt(), tokens.Estimate(q.Body)
				}
			}
			if real >= marginMinGrowth {
				add(float64(est)/float64(real)-1, "%s: absolute, largest request of %s (%d tokens)", corpus, s.ID, real)
			}
		}
	}
	for _, f := range HeldOut(all, AccuracyOptions{}).Folds {
		for _, row := range f.Rows {
			if row.Real >= marginMinGrowth {
				add(row.Before, "held-out half %s: growth, %s %s (%d tokens)", f.Check, cmp.Or(row.Corpus, "all corpora"), cmp.Or(row.Model, "all models"), row.Real)
			}
		}
	}
	worst := figs[0]
	for _, f := range figs {
		if f.err < worst.err {
			worst = f
		}
	}
	for _, f := range figs {
		t.Logf("%+6.1f%%  %s", 100*f.err, f.what)
	}
	want := math.Ceil(-100*worst.err-1e-9) / 100
	t.Logf("worst underestimate %+.1f%% (%s): margin %.2f, tokens.OverflowMargin %.2f", 100*worst.err, worst.what, want, tokens.OverflowMargin)
	if len(figs) < 20 {
		t.Errorf("only %d figures measured", len(figs))
	}
	if tokens.OverflowMargin < -worst.err {
		t.Errorf("tokens.OverflowMargin %.2f does not cover the estimator's worst underestimate %+.1f%% (%s)", tokens.OverflowMargin, 100*worst.err, worst.what)
	}
	if math.Abs(tokens.OverflowMargin-want) > 1e-9 {
		t.Errorf("tokens.OverflowMargin %.2f, the measurement asks for %.2f: update it and its doc comment", tokens.OverflowMargin, want)
	}
}
