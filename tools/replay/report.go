package replay

import (
	"github.com/ctxguard/ctxguard/tools/estimator"

	"slices"

	"github.com/ctxguard/ctxguard/tools/transcript"
)

// ReportVersion is the version of the JSON report's layout. Fields may be
// added without a change; a change means a field changed or went away.
const ReportVersion = 1

// Report is the outcome of Run: per session and in total. Encoded as JSON
// it is `ctxguard replay --json`.
type Report struct {
	Version int `json:"version"`
	// Passes are the pipeline's passes in order.
	Passes []string `json:"passes"`
	// Files is the number of transcript files the sessions came from.
	Files int `json:"files"`
	// Requests is the number of requests the transcripts hold.
	Requests int `json:"requests"`
	// Load sums what loading skipped and repaired.
	Load LoadStats `json:"load"`
	// Total sums every session.
	Total Summary `json:"total"`
	// Prices are the rates used (USD per million tokens), by model.
	Prices PriceTable `json:"prices"`
	// CacheTTL is how long the replay's prompt cache kept a prefix
	// (RunOptions.CacheTTL): "provider" (each request's provider and
	// model, and the lifetime the request asked for), "never" (the
	// time-blind model), or a fixed duration.
	CacheTTL string `json:"cache_ttl"`
	// Window and Line are the window replay --window set and its
	// overflow line (window − max output); 0 when not set.
	Window int `json:"window,omitempty"`
	Line   int `json:"overflow_line,omitempty"`
	// Unpriced lists request models the price table lacks; their money
	// figures are 0.
	Unpriced []string `json:"unpriced_models,omitempty"`
	// Estimator is the token estimator's accuracy against the usage the
	// transcripts recorded (nil when none did).
	Estimator *Estimator      `json:"estimator,omitempty"`
	Sessions  []SessionReport `json:"sessions"`
}

// LoadStats are a transcript's loading counts (transcript.Stats).
type LoadStats struct {
	Lines     int `json:"lines"`
	Malformed int `json:"malformed_lines"`
	Ignored   int `json:"ignored_records"`
	Synthetic int `json:"synthetic_replies"`
	Sidechain int `json:"sidechain_records_skipped"`
	Merged    int `json:"merged_records"`
	Resets    int `json:"compactions"`
	// Repairs counts each kind of repair made (transcript package doc),
	// kinds with none left out.
	Repairs map[string]int `json:"repairs"`
}

// repairKinds names transcript.Repairs' fields, with what each means.
var repairKinds = []struct {
	key, what string
	get       func(transcript.Repairs) int
}{
	{"missing_result", "tool calls without a result answered with an error result", func(r transcript.Repairs) int { return r.MissingResult }},
	{"orphan_result", "results of calls not in the previous message removed", func(r transcript.Repairs) int { return r.OrphanResult }},
	{"duplicate_result", "second results for one call removed", func(r transcript.Repairs) int { return r.DuplicateResult }},
	{"duplicate_id", "reused tool call ids renamed", func(r transcript.Repairs) int { return r.DuplicateID }},
	{"reordered", "user messages with tool results moved first", func(r transcript.Repairs) int { return r.Reordered }},
	{"missing_user", "placeholder user messages inserted between assistant turns", func(r transcript.Repairs) int { return r.MissingUser }},
	{"empty_text", "empty text blocks removed", func(r transcript.Repairs) int { return r.EmptyText }},
	{"empty_message", "empty messages removed", func(r transcript.Repairs) int { return r.EmptyMessage }},
	{"bad_block", "malformed blocks removed", func(r transcript.Repairs) int { return r.BadBlock }},
	{"bad_input", "tool arguments that were not objects wrapped", func(r transcript.Repairs) int { return r.BadInput }},
	{"cache_control", "recorded cache_control markers removed", func(r transcript.Repairs) int { return r.CacheControl }},
	{"redacted_signature", "redacted thinking signatures replaced by a hash of their text", func(r transcript.Repairs) int { return r.RedactedSignature }},
}

func loadStats(s transcript.Stats) LoadStats {
	l := LoadStats{Lines: s.Lines, Malformed: s.Malformed, Ignored: s.Ignored, Synthetic: s.Synthetic,
		Sidechain: s.Sidechain, Merged: s.Merged, Resets: s.Resets, Repairs: map[string]int{}}
	for _, k := range repairKinds {
		if n := k.get(s.Repairs); n > 0 {
			l.Repairs[k.key] = n
		}
	}
	return l
}

func (l *LoadStats) add(o LoadStats) {
	l.Lines += o.Lines
	l.Malformed += o.Malformed
	l.Ignored += o.Ignored
	l.Synthetic += o.Synthetic
	l.Sidechain += o.Sidechain
	l.Merged += o.Merged
	l.Resets += o.Resets
	if l.Repairs == nil {
		l.Repairs = map[string]int{}
	}
	for k, v := range o.Repairs {
		l.Repairs[k] += v
	}
}

func (l LoadStats) repairs() int {
	n := 0
	for _, v := range l.Repairs {
		n += v
	}
	return n
}

// Summary is the measurement of a session, or of all of them.
type Summary struct {
	Requests   int     `json:"requests"`
	OrigTokens int     `json:"orig_tokens"`
	SentTokens int     `json:"sent_tokens"`
	TokenRatio float64 `json:"token_ratio"`
	PeakOrig   int     `json:"peak_orig_tokens"`
	PeakSent   int     `json:"peak_sent_tokens"`
	// Cache-aware cost in base-input-token units (byte-prefix model),
	// time-aware unless Report.CacheTTL is "never": a request that came
	// after its cache expired writes its whole prompt again.
	OrigCost  float64 `json:"orig_cost"`
	SentCost  float64 `json:"sent_cost"`
	CostRatio float64 `json:"cost_ratio"`
	// The prefix model with a cache that never expires (time-blind,
	// what replay measured before it knew time), and the requests that
	// found the cache cold (expired; 0 when time-blind).
	OrigBlindCost  float64 `json:"orig_blind_cost"`
	SentBlindCost  float64 `json:"sent_blind_cost"`
	BlindCostRatio float64 `json:"blind_cost_ratio"`
	Cold           int     `json:"cold_requests"`
	// ColdEvents counts the edit events sent at cold requests: they
	// cost no cache write the client would not have paid anyway.
	ColdEvents int `json:"cold_events"`
	// The same when the cache hits only at breakpoints.
	OrigBPCost  float64 `json:"orig_bp_cost"`
	SentBPCost  float64 `json:"sent_bp_cost"`
	BPCostRatio float64 `json:"bp_cost_ratio"`
	// Money (USD) at the models' own rates, both cost models.
	OrigUSD   float64 `json:"orig_usd"`
	SentUSD   float64 `json:"sent_usd"`
	OrigBPUSD float64 `json:"orig_bp_usd"`
	SentBPUSD float64 `json:"sent_bp_usd"`
	// The same for the time-blind prefix model.
	OrigBlindUSD float64 `json:"orig_blind_usd"`
	SentBlindUSD float64 `json:"sent_blind_usd"`
	// Events are edit events of the sent stream; OrigEvents breaks in the
	// original stream (0 unless the transcript rewound); ReportedEvents
	// the events the pipeline announced.
	Events         int `json:"events"`
	OrigEvents     int `json:"orig_events"`
	ReportedEvents int `json:"reported_events"`
	// Compactions counts requests whose history the client restarted.
	Compactions int `json:"compactions"`
	// Summaries counts ctxguard's compactions (requests carrying a new
	// summary); SummaryIn and SummaryOut are the summarizer's tokens,
	// priced into the sent cost.
	Summaries  int `json:"summaries"`
	SummaryIn  int `json:"summary_input_tokens"`
	SummaryOut int `json:"summary_output_tokens"`
	// OverLine and OrigOverLine count requests above the overflow line
	// (replay --window), sent and original.
	OverLine     int `json:"over_line"`
	OrigOverLine int `json:"orig_over_line"`
	Invalid      int `json:"invalid"`
	// FailOpen counts requests sent unchanged after a pass failed.
	FailOpen int `json:"fail_open"`
	// Passes are the tokens each pass saved.
	Passes    []PassTokens `json:"passes"`
	Quotes    QuoteStats   `json:"quotes"`
	Retention float64      `json:"quote_retention"`
	// Recall is the fact recall of the compactions' summaries (recall.go),
	// summed over the compactions; nil when there were none.
	Recall *Recall `json:"recall,omitempty"`
}

func summarize(t Totals, usd [6]float64, compactions int) Summary {
	s := Summary{
		Requests: t.Requests, OrigTokens: t.OrigTokens, SentTokens: t.SentTokens,
		TokenRatio: Ratio(float64(t.SentTokens), float64(t.OrigTokens)),
		PeakOrig:   t.PeakOrig, PeakSent: t.PeakSent,
		OrigCost: t.OrigCost, SentCost: t.SentCost, CostRatio: Ratio(t.SentCost, t.OrigCost),
		OrigBPCost: t.OrigBPCost, SentBPCost: t.SentBPCost, BPCostRatio: Ratio(t.SentBPCost, t.OrigBPCost),
		OrigUSD: usd[0], SentUSD: usd[1], OrigBPUSD: usd[2], SentBPUSD: usd[3],
		OrigBlindCost: t.OrigBlindCost, SentBlindCost: t.SentBlindCost, BlindCostRatio: Ratio(t.SentBlindCost, t.OrigBlindCost),
		OrigBlindUSD: usd[4], SentBlindUSD: usd[5], Cold: t.Cold, ColdEvents: t.ColdEvents,
		Events: t.Events, OrigEvents: t.OrigEvents, ReportedEvents: t.Reported,
		Compactions: compactions, Invalid: t.Invalid, FailOpen: t.Failed,
		Summaries: t.Summaries, SummaryIn: t.SummaryIn, SummaryOut: t.SummaryOut,
		OverLine: t.OverLine, OrigOverLine: t.OrigOverLine,
		Passes: slices.Clone(t.Passes), Quotes: t.Quotes, Retention: t.Quotes.Retention(),
	}
	if t.Recalled > 0 {
		r := t.Recall
		s.Recall = &r
	}
	if s.Passes == nil {
		s.Passes = []PassTokens{}
	}
	return s
}

// SessionReport is one session's part of a Report.
type SessionReport struct {
	ID     string `json:"id"`
	Name   string `json:"name"` // short name used in tables and charts
	Path   string `json:"-"`
	File   string `json:"file"`
	Format string `json:"format"`
	// Protocol is the API the session's requests were rebuilt in and
	// rewritten by ("anthropic", "responses"); it picks the cost model.
	Protocol string `json:"protocol,omitempty"`
	// Model is the model the replayed requests name (the first one).
	Model string `json:"model"`
	// Line is the overflow line the rewriter held the session's last
	// request to (its model's window less its maximum output, in
	// estimated tokens), 0 when unknown; the charts draw it.
	Line      int       `json:"overflow_line,omitempty"`
	Sidechain bool      `json:"sidechain,omitempty"`
	Parent    string    `json:"parent,omitempty"`
	Load      LoadStats `json:"load"`
	Summary
	// Lost lists the first few quotes the sent requests lost.
	Lost []LostQuote `json:"lost_quotes,omitempty"`
	// SummaryRecall is the fact recall of each compaction's summary, in
	// order.
	SummaryRecall []SummaryRecall `json:"summary_recall,omitempty"`
	// Estimator is the estimator's error on this session against the
	// API's usage, when the transcript recorded usage.
	Estimator *SessionEstimate `json:"estimator,omitempty"`
	// Error says why the session could not be replayed (to the end).
	Error string `json:"error,omitempty"`
	// PerRequest lists the session's requests in order.
	PerRequest []RequestReport `json:"per_request"`

	totals Totals
	usd    [6]float64
}

// RequestReport is one request of a session.
type RequestReport struct {
	Index      int     `json:"i"`
	OrigTokens int     `json:"orig_tokens"`
	SentTokens int     `json:"sent_tokens"`
	OrigCost   float64 `json:"orig_cost"`
	SentCost   float64 `json:"sent_cost"`
	OrigBPCost float64 `json:"orig_bp_cost"`
	SentBPCost float64 `json:"sent_bp_cost"`
	OrigUSD    float64 `json:"orig_usd"`
	SentUSD    float64 `json:"sent_usd"`
	// Cold: the request came after its cache expired.
	Cold bool `json:"cold,omitempty"`
	// APIPrompt is the prompt size the API reported for the original
	// request (input + cache creation + cache read), when recorded. It
	// includes Claude Code's real system prompt and tools, which the
	// replay replaces with the profile's.
	APIPrompt int         `json:"api_prompt_tokens,omitempty"`
	Event     bool        `json:"event,omitempty"`
	Reset     bool        `json:"compaction,omitempty"`
	Summary   bool        `json:"summary,omitempty"`
	Invalid   string      `json:"invalid,omitempty"`
	FailOpen  string      `json:"fail_open,omitempty"`
	Quotes    *QuoteStats `json:"quotes,omitempty"`
}

// fill records a session's measurement.
func (sr *SessionReport) fill(st *SessionStat, stream []Request, usage []*transcript.Usage, prices PriceTable, unpriced map[string]bool, used PriceTable) {
	compactions := 0
	for i, r := range st.Requests {
		rr := RequestReport{
			Index: i, OrigTokens: r.OrigTokens, SentTokens: r.SentTokens,
			OrigCost: r.OrigCost, SentCost: r.SentCost, OrigBPCost: r.OrigBPCost, SentBPCost: r.SentBPCost,
			Event: r.Event, Summary: r.Summary != nil, Cold: r.Cold,
		}
		if r.Line > 0 {
			sr.Line = r.Line
		}
		if i < len(stream) && stream[i].Reset {
			rr.Reset = true
			compactions++
		}
		if i < len(usage) && usage[i] != nil {
			rr.APIPrompt = usage[i].Prompt()
		}
		if r.Invalid != nil {
			rr.Invalid = r.Invalid.Error()
		}
		if r.Failed != nil {
			rr.FailOpen = r.Failed.Error()
		}
		if r.Quotes.Quotes > 0 {
			q := r.Quotes
			rr.Quotes = &q
		}
		if r.Recall != nil {
			sr.SummaryRecall = append(sr.SummaryRecall, *r.Recall)
		}
		if p, id, ok := prices.Lookup(r.Model); ok {
			used[id] = p
			pt := p // the time-aware model's rates
			if r.Extended {
				pt = p.Extended()
			}
			rr.OrigUSD = pt.Cost(r.OrigTokens, r.OrigRead)
			rr.SentUSD = pt.Cost(r.SentTokens, r.SentRead)
			sr.usd[0] += rr.OrigUSD
			sr.usd[1] += rr.SentUSD
			sr.usd[2] += pt.Cost(r.OrigTokens, r.OrigBPRead)
			sr.usd[3] += pt.Cost(r.SentTokens, r.SentBPRead)
			sr.usd[4] += p.Cost(r.OrigTokens, r.OrigBlindRead)
			sr.usd[5] += p.Cost(r.SentTokens, r.SentBlindRead)
			if c := r.Summary; c != nil {
				// The summarizer's call, at its own model's rates.
				sp, sid, ok := prices.Lookup(c.Model)
				if ok {
					used[sid] = sp
				}
				usd := (float64(c.In)*sp.Input + float64(c.Out)*sp.OutputPrice()) / 1e6
				rr.SentUSD += usd
				sr.usd[1] += usd
				sr.usd[3] += usd
				sr.usd[5] += usd
			}
		} else if r.Model == "" {
			unpriced["(no model)"] = true
		} else {
			unpriced[r.Model] = true
		}
		sr.PerRequest = append(sr.PerRequest, rr)
	}
	sr.totals = st.Totals()
	sr.Summary = summarize(sr.totals, sr.usd, compactions)
	sr.Lost = st.Lost
}

// finish computes the totals.
func (r *Report) finish(acc *estimator.AccuracyReport, unpriced map[string]bool, used PriceTable) {
	var t Totals
	var usd [6]float64
	compactions := 0
	r.Load = LoadStats{Repairs: map[string]int{}}
	for i := range r.Sessions {
		s := &r.Sessions[i]
		t.Merge(s.totals)
		for k := range usd {
			usd[k] += s.usd[k]
		}
		compactions += s.Compactions
		r.Load.add(s.Load)
	}
	r.Total = summarize(t, usd, compactions)
	r.Prices = used
	for m := range unpriced {
		r.Unpriced = append(r.Unpriced, m)
	}
	slices.Sort(r.Unpriced)
	r.Estimator = estimatorReport(acc)
}

// Estimator is the token estimator's accuracy against the prompt sizes
// the API reported (estimator.Accuracy): the growth comparison (between
// consecutive requests, the estimate of the messages added against the
// real growth) and the totals comparison (each request's real prompt
// against an offset fitted per run plus the estimate), for characters/4,
// the estimator, and the estimator scaled by a calibration learned from
// the other sessions.
type Estimator struct {
	Sessions   int                 `json:"sessions"`
	Requests   int                 `json:"requests"`
	Pairs      int                 `json:"pairs"`
	MinGrowth  int                 `json:"min_growth"`
	Excluded   map[string]int      `json:"excluded"`
	Baseline   EstimatorFigures    `json:"chars_div_4"`
	Estimate   EstimatorFigures    `json:"estimate"`
	Calibrated EstimatorFigures    `json:"calibrated"`
	Factors    []CalibrationFactor `json:"factors"`
	report     *estimator.AccuracyReport
}

// EstimatorFigures are one estimator's relative errors (estimate/real - 1).
type EstimatorFigures struct {
	Growth ErrorFigures `json:"growth"`
	Totals ErrorFigures `json:"totals"`
}

// ErrorFigures summarise relative errors (estimator.ErrorStats).
type ErrorFigures struct {
	N         int     `json:"n"`
	Aggregate float64 `json:"aggregate"`
	Median    float64 `json:"median"`
	P50       float64 `json:"p50_abs"`
	P90       float64 `json:"p90_abs"`
	Max       float64 `json:"max_abs"`
}

// CalibrationFactor is a model's learned factor (real/estimated), from
// the growth pairs of the sessions (tokens.Calibration.ObserveGrowth).
type CalibrationFactor struct {
	Model        string  `json:"model"`
	Factor       float64 `json:"factor"`
	Observations int     `json:"observations"` // growth pairs accepted
	Rejected     int     `json:"rejected"`     // growth pairs refused as outliers
}

// SessionEstimate is the growth comparison on one session.
type SessionEstimate struct {
	Pairs      int     `json:"pairs"`
	Real       int     `json:"real_growth"`
	Estimated  int     `json:"estimated_growth"`
	Error      float64 `json:"error"`            // Estimated/Real - 1
	Calibrated float64 `json:"calibrated_error"` // with the leave-one-out factor
}

func estimatorReport(a *estimator.AccuracyReport) *Estimator {
	if a == nil || a.Sessions == 0 {
		return nil
	}
	fig := func(f estimator.Figures) EstimatorFigures {
		e := func(s estimator.ErrorStats) ErrorFigures {
			return ErrorFigures{N: s.N, Aggregate: s.Aggregate, Median: s.Median, P50: s.P50, P90: s.P90, Max: s.Max}
		}
		return EstimatorFigures{Growth: e(f.Growth), Totals: e(f.Totals)}
	}
	x := a.Excluded
	e := &Estimator{
		Sessions: a.Sessions, Requests: a.Requests, Pairs: a.Pairs, MinGrowth: a.MinGrowth,
		Excluded: map[string]int{"first": x.First, "gap": x.Gap, "repaired": x.Repaired, "clearing": x.Clearing, "off_peak": x.OffPeak, "no_usage": x.NoUsage},
		Baseline: fig(a.Baseline), Estimate: fig(a.Estimate), Calibrated: fig(a.Calibrated),
		Factors: []CalibrationFactor{}, report: a,
	}
	for _, f := range a.Factors {
		e.Factors = append(e.Factors, CalibrationFactor{Model: f.Model, Factor: f.Factor, Observations: f.Growth, Rejected: f.GrowthRejected})
	}
	return e
}

func sessionEstimate(a *estimator.AccuracyReport, id string) *SessionEstimate {
	for _, s := range a.PerSession {
		if s.ID == id && s.Pairs > 0 && s.Real > 0 {
			return &SessionEstimate{
				Pairs: s.Pairs, Real: s.Real, Estimated: s.Estimated,
				Error:      float64(s.Estimated)/float64(s.Real) - 1,
				Calibrated: float64(s.Estimated)*s.Factor/float64(s.Real) - 1,
			}
		}
	}
	return nil
}
