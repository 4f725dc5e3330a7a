package replay

import (
	"github.com/ctxguard/ctxguard/dashboard/chart"
	"github.com/ctxguard/ctxguard/internal/stub"

	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

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
	if protos["gemini"] {
		models = append(models, "Gemini reads at the cached-input price, no write premium, implicit")
	}
	switch r.CacheTTL {
	case "never", "":
		fmt.Fprintf(&b, "cache-aware cost: %.3f of the original, time-blind: the cache never expires (prefix cache: %s); %.3f with hits only at cache_control breakpoints (20-block lookback; OpenAI: as the prefix model)\n",
			t.CostRatio, strings.Join(models, "; "), t.BPCostRatio)
	default:
		life := "each request's provider's lifetime: Anthropic 5 min (1 h with \"ttl\":\"1h\", writes 2x), OpenAI 5 min (24 h with prompt_cache_retention \"24h\")"
		if protos["gemini"] {
			life += ", Gemini 5 min (implicit caching)"
		}
		if r.CacheTTL != "provider" {
			life = "every prefix lives " + r.CacheTTL + " after its last use"
		}
		fmt.Fprintf(&b, "cache-aware cost: %.3f of the original, time-aware (%s; %s of %s requests found the cache cold); %.3f if the cache never expired (prefix cache: %s); %.3f with hits only at cache_control breakpoints (20-block lookback; OpenAI: as the prefix model)\n",
			t.CostRatio, life, stub.Commas(t.Cold), stub.Commas(t.Requests), t.BlindCostRatio, strings.Join(models, "; "), t.BPCostRatio)
	}
	fmt.Fprintf(&b, "money (prompt at list prices, output excluded): %s instead of %s (prefix model), %s instead of %s (breakpoint model), %s instead of %s (the cache never expiring)\n",
		usd(t.SentUSD), usd(t.OrigUSD), usd(t.SentBPUSD), usd(t.OrigBPUSD), usd(t.SentBlindUSD), usd(t.OrigBlindUSD))
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
	fmt.Fprintf(&b, "edit events: %d (announced by the pipeline: %d; at a cold cache: %d); breaks in the original streams: %d; client compactions: %d\n",
		t.Events, t.ReportedEvents, t.ColdEvents, t.OrigEvents, t.Compactions)
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
