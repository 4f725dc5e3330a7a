package replay

import (
	"github.com/ctxguard/ctxguard/dashboard/chart"
	"github.com/ctxguard/ctxguard/internal/stub"
	"github.com/ctxguard/ctxguard/tools/estimator"

	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

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
	// Cache-aware cost in base-input-token units (byte-prefix model).
	OrigCost  float64 `json:"orig_cost"`
	SentCost  float64 `json:"sent_cost"`
	CostRatio float64 `json:"cost_ratio"`
	// The same when the cache hits only at breakpoints.
	OrigBPCost  float64 `json:"orig_bp_cost"`
	SentBPCost  float64 `json:"sent_bp_cost"`
	BPCostRatio float64 `json:"bp_cost_ratio"`
	// Money (USD) at the models' own rates, both cost models.
	OrigUSD   float64 `json:"orig_usd"`
	SentUSD   float64 `json:"sent_usd"`
	OrigBPUSD float64 `json:"orig_bp_usd"`
	SentBPUSD float64 `json:"sent_bp_usd"`
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

func summarize(t Totals, usd [4]float64, compactions int) Summary {
	s := Summary{
		Requests: t.Requests, OrigTokens: t.OrigTokens, SentTokens: t.SentTokens,
		TokenRatio: Ratio(float64(t.SentTokens), float64(t.OrigTokens)),
		PeakOrig:   t.PeakOrig, PeakSent: t.PeakSent,
		OrigCost: t.OrigCost, SentCost: t.SentCost, CostRatio: Ratio(t.SentCost, t.OrigCost),
		OrigBPCost: t.OrigBPCost, SentBPCost: t.SentBPCost, BPCostRatio: Ratio(t.SentBPCost, t.OrigBPCost),
		OrigUSD: usd[0], SentUSD: usd[1], OrigBPUSD: usd[2], SentBPUSD: usd[3],
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
	usd    [4]float64
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
			Event: r.Event, Summary: r.Summary != nil,
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
			rr.OrigUSD = p.Cost(r.OrigTokens, r.OrigRead)
			rr.SentUSD = p.Cost(r.SentTokens, r.SentRead)
			sr.usd[0] += rr.OrigUSD
			sr.usd[1] += rr.SentUSD
			sr.usd[2] += p.Cost(r.OrigTokens, r.OrigBPRead)
			sr.usd[3] += p.Cost(r.SentTokens, r.SentBPRead)
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
	var usd [4]float64
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

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// TextOptions tune WriteText.
type TextOptions struct {
	// Requests adds a line per request under each session.
	Requests bool
}

// WriteText writes the report as a readable table with notes.
func (r *Report) WriteText(w io.Writer, opt TextOptions) error {
	var b strings.Builder
	passes := strings.Join(r.Passes, ", ")
	if passes == "" {
		passes = "none (every rule off)"
	}
	fmt.Fprintf(&b, "ctxguard replay: %s from %s, %s requests; passes: %s\n",
		plural(len(r.Sessions), "session"), plural(r.Files, "file"), stub.Commas(r.Total.Requests), passes)
	if l := r.Load; l.Malformed > 0 || l.repairs() > 0 {
		fmt.Fprintf(&b, "loading: %s malformed lines skipped, %d repairs (listed below)\n", stub.Commas(l.Malformed), l.repairs())
	}
	b.WriteString("\n")

	const head = "%-14s %-10s %5s  %-17s %6s  %-13s %6s %6s  %-17s %6s %4s %7s %7s\n"
	fmt.Fprintf(&b, head, "session", "model", "req", "tokens sent/orig", "ratio", "peak sent/orig", "cost", "bp", "$ sent/orig", "events", "inv", "quotes", "est.err")
	rows := make([]*SessionReport, 0, len(r.Sessions))
	for i := range r.Sessions {
		if s := &r.Sessions[i]; s.Requests > 0 || s.Error != "" {
			rows = append(rows, s)
		}
	}
	slices.SortStableFunc(rows, func(a, b *SessionReport) int { return b.OrigTokens - a.OrigTokens })
	row := func(name, model string, s Summary, est string) {
		fmt.Fprintf(&b, head, clip(name, 14), clip(model, 10), strconv.Itoa(s.Requests),
			human(s.SentTokens)+" / "+human(s.OrigTokens), ratio(s.TokenRatio),
			human(s.PeakSent)+" / "+human(s.PeakOrig), ratio(s.CostRatio), ratio(s.BPCostRatio),
			usd(s.SentUSD)+" / "+usd(s.OrigUSD), strconv.Itoa(s.Events), strconv.Itoa(s.Invalid),
			quotes(s.Quotes), est)
	}
	for _, s := range rows {
		est := "-"
		if s.Estimator != nil {
			est = fmt.Sprintf("%+.1f%%", 100*s.Estimator.Error)
		}
		row(s.Name, strings.TrimPrefix(s.Model, "claude-"), s.Summary, est)
		if s.Error != "" {
			fmt.Fprintf(&b, "  error: %s\n", s.Error)
		}
		if opt.Requests {
			writeRequests(&b, s)
		}
	}
	est := "-"
	if r.Estimator != nil {
		est = fmt.Sprintf("%+.1f%%", 100*r.Estimator.Estimate.Growth.Aggregate)
	}
	row("TOTAL", "", r.Total, est)
	if n := len(r.Sessions) - len(rows); n > 0 {
		fmt.Fprintf(&b, "(%d sessions without requests not shown)\n", n)
	}

	t := r.Total
	b.WriteString("\n")
	fmt.Fprintf(&b, "tokens: %s sent of %s (%.1f%% saved); peak request %s of %s\n",
		stub.Commas(t.SentTokens), stub.Commas(t.OrigTokens), 100*(1-t.TokenRatio), stub.Commas(t.PeakSent), stub.Commas(t.PeakOrig))
	if len(t.Passes) > 0 {
		var ps []string
		for _, p := range t.Passes {
			ps = append(ps, fmt.Sprintf("%s %s (%.1f%%)", p.Name, human(p.Saved), 100*Ratio(float64(p.Saved), float64(t.OrigTokens))))
		}
		fmt.Fprintf(&b, "tokens saved by pass (share of the original): %s\n", strings.Join(ps, ", "))
	}
	protos := map[string]bool{}
	for _, s := range r.Sessions {
		protos[s.Protocol] = true
	}
	var models []string
	if len(protos) == 0 || protos["anthropic"] || protos[""] {
		models = append(models, "Anthropic reads 0.1x, writes 1.25x")
	}
	if protos["responses"] || protos["chat"] {
		models = append(models, "OpenAI reads at the cached-input price, no write premium, automatic")
	}
	fmt.Fprintf(&b, "cache-aware cost: %.3f of the original (prefix cache: %s); %.3f with hits only at cache_control breakpoints (20-block lookback; OpenAI: as the prefix model)\n",
		t.CostRatio, strings.Join(models, "; "), t.BPCostRatio)
	fmt.Fprintf(&b, "money (prompt at list prices, output excluded): %s instead of %s (prefix model), %s instead of %s (breakpoint model)\n",
		usd(t.SentUSD), usd(t.OrigUSD), usd(t.SentBPUSD), usd(t.OrigBPUSD))
	var pr []string
	for _, m := range r.Prices.Models() {
		p := r.Prices[m]
		pr = append(pr, fmt.Sprintf("%s $%s/MTok (write $%s, read $%s)", strings.TrimPrefix(m, "claude-"), price(p.Input), price(p.CacheWrite), price(p.CacheRead)))
	}
	if len(pr) > 0 {
		fmt.Fprintf(&b, "  rates: %s\n", strings.Join(pr, "; "))
	}
	if len(r.Unpriced) > 0 {
		fmt.Fprintf(&b, "  no price for %s: counted as $0 (add it with --prices)\n", strings.Join(r.Unpriced, ", "))
	}
	fmt.Fprintf(&b, "edit events: %d (announced by the pipeline: %d); breaks in the original streams: %d; client compactions: %d\n",
		t.Events, t.ReportedEvents, t.OrigEvents, t.Compactions)
	fmt.Fprintf(&b, "validity: %d of %s sent requests invalid; %d forwarded unchanged after a pass failed\n", t.Invalid, stub.Commas(t.Requests), t.FailOpen)
	if t.Summaries > 0 || r.Line > 0 {
		fmt.Fprintf(&b, "compactions: %d (summarizer: %s input and %s output tokens, priced into the sent cost); events per request %.3f\n",
			t.Summaries, stub.Commas(t.SummaryIn), stub.Commas(t.SummaryOut), Ratio(float64(t.Events), float64(t.Requests)))
	}
	if r.Line > 0 {
		fmt.Fprintf(&b, "overflow line %s tokens (window %s − max output %s): %d requests above it sent, %d in the original\n",
			stub.Commas(r.Line), stub.Commas(r.Window), stub.Commas(r.Window-r.Line), t.OverLine, t.OrigOverLine)
	}
	q := t.Quotes
	fmt.Fprintf(&b, "quote retention: %s answer lines quote a distinctive tool-result line: %s still in the request, %s retrievable, %s lost (%.1f%% retained, %.1f%% still in the request)\n",
		stub.Commas(q.Quotes), stub.Commas(q.Kept), stub.Commas(q.Retrievable), stub.Commas(q.Lost), 100*q.Retention(), 100*Ratio(float64(q.Kept), float64(q.Quotes)))
	if q.Cleared+q.Compacted > 0 {
		fmt.Fprintf(&b, "  not in the request: %s cleared in place (%s retrievable), %s replaced by a compaction (%s retrievable)\n",
			stub.Commas(q.Cleared), stub.Commas(q.ClearedRetrievable), stub.Commas(q.Compacted), stub.Commas(q.CompactedRetrievable))
	}
	nl := 0
	for _, s := range rows {
		for _, l := range s.Lost {
			if nl == 5 {
				break
			}
			fmt.Fprintf(&b, "  lost: %s request %d: %q\n", s.Name, l.Request, l.Line)
			nl++
		}
	}
	writeKeeps(&b, t, rows)
	for _, s := range rows {
		if s.Invalid > 0 {
			for _, rq := range s.PerRequest {
				if rq.Invalid != "" {
					fmt.Fprintf(&b, "  invalid: %s request %d: %s\n", s.Name, rq.Index, firstLine(rq.Invalid))
					break
				}
			}
		}
	}
	if l := r.Load; l.repairs() > 0 || l.Malformed > 0 {
		fmt.Fprintf(&b, "transcripts: %s lines, %s malformed (skipped), %s records merged, %d synthetic replies skipped\n",
			stub.Commas(l.Lines), stub.Commas(l.Malformed), stub.Commas(l.Merged), l.Synthetic)
		for _, k := range repairKinds {
			if n := l.Repairs[k.key]; n > 0 {
				fmt.Fprintf(&b, "  repaired: %d %s\n", n, k.what)
			}
		}
	}
	if r.Estimator != nil {
		b.WriteString("\n")
		b.WriteString(r.Estimator.report.String())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeKeeps writes what the agent keeps of the compacted spans: the fact
// recall of the summaries by kind, per session, and a few missed facts.
func writeKeeps(b *strings.Builder, t Summary, rows []*SessionReport) {
	if t.Recall == nil {
		return
	}
	n := 0
	for _, s := range rows {
		n += len(s.SummaryRecall)
	}
	fmt.Fprintf(b, "what the agent keeps: facts of the messages %s replaced, found in the summary\n", plural(n, "compaction"))
	for k, c := range t.Recall {
		fmt.Fprintf(b, "  %-42s %13s %6.1f%%\n", factKinds[k].label, stub.Commas(c.Found)+"/"+stub.Commas(c.Total), 100*c.Recall())
	}
	for _, s := range rows {
		if s.Recall != nil {
			fmt.Fprintf(b, "  %s, %s: %s\n", s.Name, plural(len(s.SummaryRecall), "compaction"), recallLine(*s.Recall))
		}
	}
	// A fact a summary missed is usually missed by the session's later
	// summaries too: each is listed once, where it was missed first.
	for k := range numFactKinds {
		seen := map[string]bool{}
		for _, s := range rows {
			for _, sr := range s.SummaryRecall {
				for _, m := range sr.Missed[k] {
					if len(seen) < MaxMissedExamples && !seen[m] {
						seen[m] = true
						fmt.Fprintf(b, "  missed %s: %s request %d: %q\n", factKinds[k].short, s.Name, sr.Request, m)
					}
				}
			}
		}
	}
}

// recallLine is a recall on one line: "requests 5/5, files 3/4, ...".
func recallLine(r Recall) string {
	parts := make([]string, len(r))
	for k, c := range r {
		parts[k] = fmt.Sprintf("%s %d/%d", factKinds[k].short, c.Found, c.Total)
	}
	return strings.Join(parts, ", ")
}

func writeRequests(b *strings.Builder, s *SessionReport) {
	fmt.Fprintf(b, "  %5s %9s %9s %10s %10s %10s %10s %9s  %s\n", "req", "orig", "sent", "cost orig", "cost sent", "bp orig", "bp sent", "api", "")
	for _, q := range s.PerRequest {
		var notes []string
		if q.Event {
			notes = append(notes, "EDIT EVENT")
		}
		if q.Reset {
			notes = append(notes, "compaction")
		}
		if q.Summary {
			notes = append(notes, "summary")
		}
		if q.Invalid != "" {
			notes = append(notes, "INVALID")
		}
		if q.FailOpen != "" {
			notes = append(notes, "fail-open")
		}
		if q.Quotes != nil && q.Quotes.Lost > 0 {
			notes = append(notes, fmt.Sprintf("%d quotes lost", q.Quotes.Lost))
		}
		api := "-"
		if q.APIPrompt > 0 {
			api = stub.Commas(q.APIPrompt)
		}
		fmt.Fprintf(b, "  %5d %9s %9s %10.0f %10.0f %10.0f %10.0f %9s  %s\n", q.Index, stub.Commas(q.OrigTokens), stub.Commas(q.SentTokens),
			q.OrigCost, q.SentCost, q.OrigBPCost, q.SentBPCost, api, strings.Join(notes, ", "))
	}
	for _, sr := range s.SummaryRecall {
		fmt.Fprintf(b, "  summary of request %d (%d messages, %s tokens) keeps %s\n", sr.Request, sr.Messages, stub.Commas(sr.Tokens), recallLine(sr.Recall))
		for k, list := range sr.Missed {
			for _, m := range list {
				fmt.Fprintf(b, "    missed %s: %q\n", factKinds[k].short, m)
			}
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return s
}

func ratio(x float64) string { return chart.Ratio(x) }

func quotes(q QuoteStats) string {
	if q.Quotes == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", q.Kept+q.Retrievable, q.Quotes)
}

// human formats a token count compactly: 950, 12K, 1.2M.
func human(n int) string { return chart.Tokens(n) }

func usd(x float64) string {
	switch {
	case x >= 100:
		return "$" + strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 1:
		return "$" + strconv.FormatFloat(x, 'f', 2, 64)
	case x >= 0.01 || x == 0:
		return "$" + strconv.FormatFloat(x, 'f', 3, 64)
	}
	return "$" + strconv.FormatFloat(x, 'f', 5, 64)
}

func price(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// ProgressBar draws a one-line progress bar, for a terminal. The zero
// value with W set is ready to use.
type ProgressBar struct {
	W     io.Writer
	Width int // bar width in cells; 0 means 30
	last  time.Time
	shown bool
}

// Update redraws the bar for done of total, at most ten times a second
// (and always at the end).
func (p *ProgressBar) Update(done, total int) {
	now := time.Now()
	if done < total && now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	w := p.Width
	if w <= 0 {
		w = 30
	}
	frac := Ratio(float64(done), float64(total))
	if total == 0 {
		frac = 1
	}
	n := min(int(frac*float64(w)), w)
	fmt.Fprintf(p.W, "\rreplaying [%s%s] %3.0f%% %s/%s requests", strings.Repeat("#", n), strings.Repeat("-", w-n), 100*frac, stub.Commas(done), stub.Commas(total))
	p.shown = true
}

// Done clears the bar's line.
func (p *ProgressBar) Done() {
	if p.shown {
		fmt.Fprint(p.W, "\r\x1b[K")
		p.shown = false
	}
}
