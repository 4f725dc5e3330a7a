package compact

import (
	"errors"
	"fmt"
	"time"

	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/tokens"
)

// Config is the compaction pass's configuration (YAML key `compact`).
//
// Every threshold is measured against the model's overflow line: its
// context window minus its maximum output (model.Info.Trigger), the
// largest prompt that still leaves room for a full answer. Prepare and
// Swap are fractions of that line (or token counts); Protect and
// SummaryBudget are fractions of the window (or token counts).
type Config struct {
	// Enabled switches the pass on.
	Enabled bool `yaml:"enabled"`
	// Prepare: once a request of a session reaches this size, the summary
	// of its oldest part is written in the background. Default 60% of the
	// overflow line.
	Prepare model.Amount `yaml:"prepare"`
	// Swap: the first request at or above this size whose summary is
	// ready carries it in place of the part it summarizes. Default 75%
	// of the overflow line.
	Swap model.Amount `yaml:"swap"`
	// Protect: the newest messages of at least this many tokens are never
	// summarized. Unset: 40,000 tokens, or 20% of the window when that is
	// smaller.
	Protect model.Amount `yaml:"protect"`
	// SummaryBudget bounds the summary's length in tokens, a model's and
	// the extractive one alike (and is the summarizer's output limit).
	// Unset: an eighth of the overflow line, within 500–65,536
	// (model.SummaryBudget).
	SummaryBudget model.Amount `yaml:"summary_budget"`
	// Wait is how long a request that would cross the overflow line waits
	// for a summary still being written before it uses the extractive
	// summary instead. Default 20s.
	Wait time.Duration `yaml:"wait"`
	// ColdSwap: a request between Prepare and Swap that found the
	// session's prompt cache cold (pipeline.Env.Cold) carries the summary
	// if it is ready: the upstream writes the whole prompt to the cache
	// then anyway, so the swap costs no cache write of its own.
	ColdSwap bool `yaml:"cold_swap"`
	// Summarizer says who writes the summaries.
	Summarizer SummarizerConfig `yaml:"summarizer"`
}

// Defaults returns the compaction configuration ctxguard ships with.
func Defaults() Config {
	return Config{
		Enabled:    true,
		Prepare:    model.Fraction(0.60),
		Swap:       model.Fraction(0.75),
		Wait:       20 * time.Second,
		ColdSwap:   true,
		Summarizer: DefaultSummarizer(),
	}
}

// Validate reports every problem in c, joined, or nil.
func (c Config) Validate() error {
	var errs []error
	for _, a := range []struct {
		name string
		v    model.Amount
	}{{"prepare", c.Prepare}, {"swap", c.Swap}, {"protect", c.Protect}, {"summary_budget", c.SummaryBudget}} {
		if err := a.v.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", a.name, err))
		}
	}
	if c.Enabled && (c.Prepare.IsZero() || c.Swap.IsZero()) {
		errs = append(errs, errors.New("prepare and swap must be set"))
	}
	if c.Prepare.IsFraction() == c.Swap.IsFraction() && !c.Prepare.IsZero() && !c.Swap.IsZero() &&
		c.Prepare.Resolve(1_000_000) > c.Swap.Resolve(1_000_000) {
		errs = append(errs, fmt.Errorf("prepare (%v) is above swap (%v)", c.Prepare, c.Swap))
	}
	if c.Wait < 0 {
		errs = append(errs, fmt.Errorf("wait: %v is negative", c.Wait))
	}
	if err := c.Summarizer.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// limits are the thresholds resolved for one request's model, in tokens.
type limits struct {
	line    int // the overflow line: window − max output
	prepare int // start the summary
	swap    int // swap it in when ready
	force   int // at or above: swap in now, extractive if need be
	protect int // newest tokens never summarized
	budget  int // what a summary may take, a model's or the extractive one
}

// Margin is the share of the overflow line kept free for the estimator's
// error: a request estimated at or above (1 − Margin) × line is treated as
// crossing it. It is tokens.OverflowMargin, which follows the estimator's
// measured error on real sessions against the API's usage (see there).
// Decisions never use the learned calibration (it differs between
// processes), so the margin is a constant.
const Margin = tokens.OverflowMargin

// resolve returns the limits for a model with the given window and
// maximum output.
func (c Config) resolve(window, maxOutput int) limits {
	if window <= 0 {
		window = model.DefaultWindow
	}
	line := model.Trigger(window, maxOutput)
	if line <= 0 {
		line = window / 2
	}
	l := limits{line: line}
	l.prepare = c.Prepare.Resolve(line)
	l.swap = max(c.Swap.Resolve(line), l.prepare)
	l.force = max(int(float64(line)*(1-Margin)), l.swap)
	l.protect = model.ProtectNewest(window)
	if !c.Protect.IsZero() {
		l.protect = c.Protect.Resolve(window)
	}
	l.budget = model.SummaryBudget(line)
	if !c.SummaryBudget.IsZero() {
		l.budget = max(c.SummaryBudget.Resolve(window), model.SummaryBudgetMin)
	}
	return l
}
