package estimator

import (
	"fmt"
	"github.com/ctxguard/ctxguard/tokens"
	"math"
	"slices"
	"strings"

	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/tools/transcript"
)

// Accuracy measurement.
//
// Assistant records in Claude Code transcripts carry the usage of the
// request that produced them, so input + cache creation + cache read is
// the real prompt size of that request. The transcripts lack Claude Code's
// system prompt and tool schemas, so the estimate cannot be compared with
// the whole prompt. Two comparisons cancel that fixed part:
//
//   - Growth: between consecutive requests k-1 and k of one history, the
//     prompt grows by exactly the messages in between (the assistant
//     message k-1 and the user message after it). The estimate of those
//     messages, as the request carries them, is compared with the growth
//     of the real prompt. The aggregate error is sum(estimates)/sum(real
//     growth) - 1 over all pairs; per-pair errors are reported for pairs
//     that grew by at least MinGrowth tokens, since smaller steps are
//     dominated by what the transcript does not record (the client's
//     per-turn reminders).
//   - Totals: within a run of consecutive pairs, the real prompt of request
//     k is compared with offset + the estimate of everything added since
//     the run's first request, with one offset per run fitted as the
//     median of the differences (it stands for the system prompt, tools
//     and the history before the run). The per-request error is relative
//     to the real prompt.
//
// A pair is left out when its messages are not fully known: a malformed
// line was skipped there (Gaps), a repair touched them, or a history
// restarted (compaction). It is also left out when the real prompt shrank
// (the client cleared old content itself, which the transcript does not
// record), and when the previous request's real prompt was below the
// largest of its history so far: Codex rollouts record, between a
// session's own requests, the usage of smaller side requests (a 3,599
// token prompt in a history of 10,376), and the growth from one of those
// says nothing about the estimate. These are the rules the live
// tokens.Calibration.ObserveSession learns by (tokens.GrowthTrack). Each such pair also
// starts a new run for the totals.
//
// "Calibrated" scales each session's estimates by the per-model factor a
// tokens.Calibration learned from the growth pairs of all the other sessions
// (leave one session out), so the calibrated figures are out of sample.
// HeldOut checks the same on a fixed split into halves.

// accStep is one request of a session as Accuracy sees it: the usage
// the API reported, the start of its history, and what it added to the
// request before it, as the request carries it.
type accStep struct {
	usage    *transcript.Usage
	hist     int
	added    [][]byte
	gap      bool // a malformed line was skipped among the added messages
	repaired bool // a repair touched them
}

// accSteps lists a session's requests: one per assistant message, adding
// the messages since the previous one; for a Codex rollout one per turn,
// adding the items since the previous turn's input ended.
func accSteps(s *transcript.Session, buf *[]byte) []accStep {
	var out []accStep
	if cx := s.Codex; cx != nil {
		for k, t := range cx.Turns {
			st := accStep{usage: t.Usage, hist: t.Start}
			if k > 0 {
				for i := max(cx.Turns[k-1].End, t.Start); i < t.End; i++ {
					st.added = append(st.added, cx.Items[i].Raw)
				}
			}
			out = append(out, st)
		}
		return out
	}
	hist, prev := 0, 0
	for i := range s.Messages {
		m := &s.Messages[i]
		if m.Reset {
			hist = i
		}
		if m.Role != transcript.Assistant {
			continue
		}
		st := accStep{usage: m.Usage, hist: hist, gap: m.Gaps > 0}
		for j := prev; j < i; j++ {
			*buf = s.AppendJSON((*buf)[:0], j)
			st.added = append(st.added, append([]byte(nil), *buf...))
			st.gap = st.gap || s.Messages[j].Gaps > 0
			st.repaired = st.repaired || s.Messages[j].Repaired
		}
		out = append(out, st)
		prev = i
	}
	return out
}

// AccuracyOptions tune Accuracy.
type AccuracyOptions struct {
	// Estimator replaces tokens.Estimate; nil uses tokens.Estimate.
	Estimator func([]byte) int
	// MinGrowth is the smallest real growth, in tokens, of a pair that
	// enters the per-pair growth errors; 0 means 200.
	MinGrowth int
}

// ErrorStats summarises relative errors (estimate/real - 1).
type ErrorStats struct {
	N         int     // items measured
	Aggregate float64 // sum of estimates / sum of real - 1
	Median    float64 // median signed error
	P50       float64 // median absolute error
	P90       float64 // 90th percentile of the absolute error
	Max       float64 // largest absolute error
}

// Figures are one estimator's errors under both comparisons.
type Figures struct {
	Growth ErrorStats
	Totals ErrorStats
}

// Exclusions counts requests whose growth was not compared, by reason.
type Exclusions struct {
	First    int // first request of a history (nothing to compare with)
	Gap      int // a malformed line was skipped among its new messages
	Repaired int // a repair touched its new messages
	Clearing int // the real prompt shrank
	// The previous request's real prompt was below the largest of its
	// history: its usage may be a side request's (Codex rollouts record
	// some) or follow a clearing the transcript does not record.
	OffPeak int
	NoUsage int // the transcript has no usage for it
}

// SessionAccuracy is one session's growth comparison.
type SessionAccuracy struct {
	ID        string
	Model     string
	Requests  int     // requests with usage
	Pairs     int     // growth pairs compared
	Real      int     // summed real growth of those pairs
	Estimated int     // summed estimate (uncalibrated)
	Factor    float64 // calibration factor applied (learned without this session)
}

// AccuracyReport is the result of Accuracy.
type AccuracyReport struct {
	Sessions   int
	Requests   int
	Pairs      int
	MinGrowth  int
	Excluded   Exclusions
	Baseline   Figures // characters / 4 (payloads billed as tokens.Estimate bills them)
	Estimate   Figures // tokens.Estimate, uncalibrated
	Calibrated Figures // tokens.Estimate scaled by the leave-one-out calibration
	// Factors are the calibration factors learned from all sessions.
	Factors    []tokens.ModelFactor
	PerSession []SessionAccuracy
}

type accPair struct {
	est, chars, real int
}

type accPoint struct {
	p, est, chars int // real prompt; estimate and characters added since the run's anchor
}

type accSession struct {
	id, path, model string
	format          transcript.Format
	requests        int
	pairs           []accPair
	runs            [][]accPoint
}

// Accuracy measures the estimator against the usage recorded in the
// sessions (see the comment above for the method). Sessions without usage
// (SWE-agent) contribute nothing.
func Accuracy(sessions []*transcript.Session, opt AccuracyOptions) *AccuracyReport {
	est := opt.Estimator
	if est == nil {
		est = tokens.Estimate
	}
	if opt.MinGrowth <= 0 {
		opt.MinGrowth = 200
	}
	rep := &AccuracyReport{MinGrowth: opt.MinGrowth}
	all := accCollect(sessions, est, &rep.Excluded)

	// tokens.Calibration factors: all sessions for the report, leave-one-out for
	// the calibrated figures.
	rep.Factors = fitCalibration(all, -1).Snapshot()
	factors := make([]float64, len(all))
	for i, a := range all {
		factors[i] = fitCalibration(all, i).Factor(a.model)
	}

	one := func(int) float64 { return 1 }
	rep.Baseline = figures(all, func(p accPair) int { return p.chars }, func(q accPoint) int { return q.chars }, one, 0.25, opt.MinGrowth)
	rep.Estimate = figures(all, func(p accPair) int { return p.est }, func(q accPoint) int { return q.est }, one, 1, opt.MinGrowth)
	rep.Calibrated = figures(all, func(p accPair) int { return p.est }, func(q accPoint) int { return q.est }, func(i int) float64 { return factors[i] }, 1, opt.MinGrowth)

	for i, a := range all {
		sa := SessionAccuracy{ID: a.id, Model: a.model, Requests: a.requests, Pairs: len(a.pairs), Factor: factors[i]}
		for _, p := range a.pairs {
			sa.Real += p.real
			sa.Estimated += p.est
		}
		rep.PerSession = append(rep.PerSession, sa)
		rep.Sessions++
		rep.Requests += a.requests
		rep.Pairs += len(a.pairs)
	}
	return rep
}

// fitCalibration returns a tokens.Calibration that never forgets, fed with the
// growth pairs of every session but skip.
func fitCalibration(all []*accSession, skip int) *tokens.Calibration {
	c := tokens.NewCalibrationHalfLife(0)
	for j, b := range all {
		if j == skip {
			continue
		}
		for _, p := range b.pairs {
			c.ObserveGrowth(b.model, p.est, p.real)
		}
	}
	return c
}

// accCollect walks the sessions' requests and returns, per session with
// usage, its growth pairs and its runs for the totals, counting in excl
// the requests whose growth was not compared.
func accCollect(sessions []*transcript.Session, est func([]byte) int, excl *Exclusions) []*accSession {
	var all []*accSession
	var buf []byte
	for _, s := range sessions {
		a := &accSession{id: s.ID, path: s.Path, format: s.Format, model: model.Canonical(s.Model)}
		var track tokens.GrowthTrack
		started, hist, cum := false, 0, 0
		var run []accPoint
		cut := func(p int) {
			if len(run) > 1 {
				a.runs = append(a.runs, run)
			}
			run = []accPoint{{p: p}}
		}
		for _, st := range accSteps(s, &buf) {
			if st.usage == nil {
				excl.NoUsage++
				started = false
				continue
			}
			p := st.usage.Prompt()
			a.requests++
			if !started || hist != st.hist {
				track, cum, started, hist = tokens.GrowthTrack{}, 0, true, st.hist
			}
			var e, c int
			for _, chunk := range st.added {
				e += est(chunk)
				c += tokens.BaselineChars(chunk)
			}
			// The estimate of a history only grows (its messages are
			// appended), so the track sees the real prompt's drops.
			cum += e
			_, d, why := track.Next(a.model, cum, p)
			switch {
			case why == tokens.GrowthFirst:
				excl.First++
				cut(p)
			case st.gap:
				excl.Gap++
				cut(p)
			case st.repaired:
				excl.Repaired++
				cut(p)
			case why == tokens.GrowthDrop:
				excl.Clearing++
				cut(p)
			case why == tokens.GrowthOffPeak:
				excl.OffPeak++
				cut(p)
			default:
				a.pairs = append(a.pairs, accPair{est: e, chars: c, real: d})
				last := run[len(run)-1]
				run = append(run, accPoint{p: p, est: last.est + e, chars: last.chars + c})
			}
		}
		cut(0)
		if a.requests == 0 {
			continue
		}
		all = append(all, a)
	}
	return all
}

// figures computes both comparisons for one estimator: pe and qe pick the
// estimate of a pair and of a run point, factor(i) scales session i, and
// unit converts the picked value to tokens (0.25 for characters).
func figures(all []*accSession, pe func(accPair) int, qe func(accPoint) int, factor func(int) float64, unit float64, minGrowth int) Figures {
	var f Figures
	var sumE, sumR float64
	var gErr, tErr []float64
	var tE, tR float64
	for i, a := range all {
		c := factor(i) * unit
		for _, p := range a.pairs {
			e := c * float64(pe(p))
			sumE += e
			sumR += float64(p.real)
			if p.real >= minGrowth {
				gErr = append(gErr, e/float64(p.real)-1)
			}
		}
		for _, run := range a.runs {
			diffs := make([]float64, len(run))
			for k, q := range run {
				diffs[k] = float64(q.p) - c*float64(qe(q))
			}
			off := median(diffs)
			for _, q := range run {
				if q.p <= 0 {
					continue
				}
				e := c*float64(qe(q)) + off
				tE += e
				tR += float64(q.p)
				tErr = append(tErr, e/float64(q.p)-1)
			}
		}
	}
	f.Growth = stats(gErr)
	if sumR > 0 {
		f.Growth.Aggregate = sumE/sumR - 1
	}
	f.Totals = stats(tErr)
	if tR > 0 {
		f.Totals.Aggregate = tE/tR - 1
	}
	return f
}

func stats(errs []float64) ErrorStats {
	s := ErrorStats{N: len(errs)}
	if len(errs) == 0 {
		return s
	}
	s.Median = median(errs)
	abs := make([]float64, len(errs))
	for i, e := range errs {
		abs[i] = math.Abs(e)
	}
	slices.Sort(abs)
	s.P50 = quantile(abs, 0.5)
	s.P90 = quantile(abs, 0.9)
	s.Max = abs[len(abs)-1]
	return s
}

func median(v []float64) float64 {
	c := slices.Clone(v)
	slices.Sort(c)
	return quantile(c, 0.5)
}

// quantile of sorted values, linear between the closest ranks.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	x := q * float64(len(sorted)-1)
	i := int(x)
	if i+1 >= len(sorted) {
		return sorted[len(sorted)-1]
	}
	return sorted[i] + (x-float64(i))*(sorted[i+1]-sorted[i])
}

// String renders the report as a table for the replay command.
func (r *AccuracyReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "token estimate vs API usage: %d sessions, %d requests, %d growth pairs compared\n", r.Sessions, r.Requests, r.Pairs)
	x := r.Excluded
	fmt.Fprintf(&b, "not compared: %d first of a history, %d with skipped lines, %d repaired, %d client clearing, %d after a smaller request, %d without usage\n",
		x.First, x.Gap, x.Repaired, x.Clearing, x.OffPeak, x.NoUsage)
	fmt.Fprintf(&b, "%-22s %10s %10s %10s %10s %10s %10s\n", "", "growth agg", "growth p50", "growth p90", "totals p50", "totals p90", "totals max")
	row := func(name string, f Figures) {
		fmt.Fprintf(&b, "%-22s %+9.1f%% %9.1f%% %9.1f%% %9.1f%% %9.1f%% %9.1f%%\n", name,
			100*f.Growth.Aggregate, 100*f.Growth.P50, 100*f.Growth.P90, 100*f.Totals.P50, 100*f.Totals.P90, 100*f.Totals.Max)
	}
	row("characters/4", r.Baseline)
	row("estimate", r.Estimate)
	row("estimate, calibrated", r.Calibrated)
	fmt.Fprintf(&b, "(growth p50/p90 over %d pairs that grew by at least %d tokens; totals over %d requests)\n", r.Estimate.Growth.N, r.MinGrowth, r.Estimate.Totals.N)
	var fs []string
	for _, f := range r.Factors {
		fs = append(fs, fmt.Sprintf("%s %.3f (%d growth pairs, %d rejected)", f.Model, f.Factor, f.Growth, f.GrowthRejected))
	}
	fmt.Fprintf(&b, "calibration: %s\n", strings.Join(fs, "; "))
	return b.String()
}
