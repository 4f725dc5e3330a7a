package dashboard

import (
	"net/http"

	"github.com/ctxguard/ctxguard/dashboard/chart"
)

// serveChart draws a session's chart as replay draws one (package chart;
// chart.ReadMarks reads it back).
func (d *Dashboard) serveChart(w http.ResponseWriter, r *http.Request) error {
	th := chart.Light
	if r.URL.Query().Get("theme") == "dark" {
		th = chart.Dark
	}
	cs, ok := d.chartSession(r.PathValue("key"))
	if !ok {
		return errNoSession
	}
	h := w.Header()
	h.Set("Content-Type", "image/svg+xml")
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(chart.SessionSVG(cs, th))
	return nil
}

// chartSession is what the chart shows of a session: per request kept,
// numbered as the session page numbers them, ctxguard's estimates before
// and after (the figures replay charts; in a dry run, what would have
// been sent), edit events, compactions and the client's own compactions
// as markers, the overflow line of the session's model; the title line's
// ratios from the kept requests (the cost ratio in dollars: as billed,
// against billed plus saved; in a dry run, billed less what would have
// been saved, against billed).
func (d *Dashboard) chartSession(key string) (*chart.Session, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.sessions[key]
	if !ok {
		return nil, false
	}
	name := s.key
	if len(name) > 48 {
		name = name[:45] + "..."
	}
	cs := &chart.Session{Name: name, Model: s.model, Line: s.line(), First: int(s.points.dropped()) + 1}
	var orig, sent int
	var origUSD, sentUSD float64
	s.points.each(func(p Point) bool {
		shown := p.shown()
		cs.Requests = append(cs.Requests, chart.Request{Orig: p.Before, Sent: shown, Event: p.Event, Compaction: p.Compaction, Reset: p.Client, Cold: p.Cold})
		cs.DryRun = cs.DryRun || p.DryRun
		orig += p.Before
		sent += shown
		cs.PeakOrig = max(cs.PeakOrig, p.Before)
		cs.PeakSent = max(cs.PeakSent, shown)
		if p.Event {
			cs.Events++
		}
		// As billed, and what the original would have cost; in a dry
		// run the original was billed.
		origUSD += p.SpentUSD + p.SavedUSD
		sentUSD += p.SpentUSD - p.WouldSaveUSD
		return true
	})
	cs.TokenRatio = ratio(float64(sent), float64(orig))
	cs.CostRatio = ratio(sentUSD, origUSD)
	cs.BPCostRatio = cs.CostRatio
	return cs, true
}

// ratio is a/b, 1 when both are 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 1
	}
	return a / b
}
