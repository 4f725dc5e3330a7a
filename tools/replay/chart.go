package replay

import (
	"github.com/ctxguard/ctxguard/dashboard/chart"
	"github.com/ctxguard/ctxguard/internal/stub"

	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Charts. The picture a user looks at first: per session, the prompt size
// of every request, original and sent, against the overflow line, with
// edit events, ctxguard's compactions and client compactions marked, as
// package chart draws it (the dashboard draws the same). The title line of
// a panel gives the session's ratios.
//
// PNG is not written, since text in a raster image would need a font
// library; any SVG renderer converts the file (rsvg-convert, a browser).

// ChartMaxPanels is how many sessions one chart file shows: the largest
// (by original tokens) first, drawn wide, then the next ones two a row.
const ChartMaxPanels = 11

const (
	chartWidth  = 1200
	chartMargin = 20
	bigHeight   = 380
	smallHeight = 250
	gap         = 20
)

// WriteCharts writes the report's charts to path: path ending in ".svg"
// gets one chart of the largest sessions (ChartMaxPanels); a path that is
// an existing folder, or ends in a slash, gets one SVG per session with
// requests, named after the session. It returns the files written.
func WriteCharts(r *Report, path string) ([]string, error) {
	fi, err := os.Stat(path)
	dir := (err == nil && fi.IsDir()) || strings.HasSuffix(path, "/") || strings.HasSuffix(path, string(os.PathSeparator))
	if dir {
		if err := os.MkdirAll(path, 0o755); err != nil {
			return nil, err
		}
		var files []string
		for i := range r.Sessions {
			s := &r.Sessions[i]
			if len(s.PerRequest) == 0 {
				continue
			}
			f := filepath.Join(path, fileName(s.ID)+".svg")
			if err := os.WriteFile(f, SessionSVG(s), 0o644); err != nil {
				return files, err
			}
			files = append(files, f)
		}
		return files, nil
	}
	if !strings.EqualFold(filepath.Ext(path), ".svg") {
		return nil, fmt.Errorf("chart %s: the file must end in .svg (PNG is not written, to need no image library: convert the SVG, e.g. rsvg-convert -o chart.png chart.svg), or name a folder for one chart per session", path)
	}
	if err := os.WriteFile(path, ChartSVG(r), 0o644); err != nil {
		return nil, err
	}
	return []string{path}, nil
}

func fileName(id string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, id)
}

// chartSessions returns the sessions a chart shows, largest first, and
// how many with requests it leaves out.
func chartSessions(r *Report) ([]*SessionReport, int) {
	var ss []*SessionReport
	for i := range r.Sessions {
		if len(r.Sessions[i].PerRequest) > 0 {
			ss = append(ss, &r.Sessions[i])
		}
	}
	slices.SortStableFunc(ss, func(a, b *SessionReport) int { return b.OrigTokens - a.OrigTokens })
	if len(ss) > ChartMaxPanels {
		return ss[:ChartMaxPanels], len(ss) - ChartMaxPanels
	}
	return ss, 0
}

// ChartSVG renders the report's largest sessions as one SVG.
func ChartSVG(r *Report) []byte {
	ss, left := chartSessions(r)

	inner := chartWidth - 2*chartMargin
	half := (inner - gap) / 2
	top := 96
	h := top
	if len(ss) > 0 {
		h += bigHeight + gap
	}
	rows := (len(ss) - 1 + 1) / 2
	if len(ss) > 1 {
		h += rows * (smallHeight + gap)
	}
	h += 24
	b := chart.New(chartWidth, h, chart.Light)
	th := b.Theme()
	t := r.Total
	b.Text(chartMargin, 32, 20, "600", th.Text, "start", "ctxguard replay: prompt tokens per request, original vs sent")
	b.Text(chartMargin, 56, 13, "400", th.Muted, "start", fmt.Sprintf(
		"%s, %s requests · tokens ×%s · cache-aware cost ×%s (breakpoints ×%s) · %s · %s instead of %s",
		plural(len(r.Sessions), "session"), stub.Commas(t.Requests), ratio(t.TokenRatio), ratio(t.CostRatio), ratio(t.BPCostRatio), plural(t.Events, "edit event"), usd(t.SentUSD), usd(t.OrigUSD)))
	b.Legend(chartMargin, 80)
	y := top
	for i, s := range ss {
		switch {
		case i == 0:
			b.Panel(chartMargin, y, inner, bigHeight, chartSession(s))
			y += bigHeight + gap
		default:
			col := (i - 1) % 2
			b.Panel(chartMargin+col*(half+gap), y, half, smallHeight, chartSession(s))
			if col == 1 || i == len(ss)-1 {
				y += smallHeight + gap
			}
		}
	}
	if left > 0 {
		b.Text(chartMargin, h-10, 12, "400", th.Muted, "start", fmt.Sprintf("%d smaller sessions not shown; --chart DIR/ draws one chart per session", left))
	}
	return b.Bytes()
}

// SessionSVG renders one session as its own SVG, in the Light theme.
func SessionSVG(s *SessionReport) []byte { return chart.SessionSVG(chartSession(s), chart.Light) }

// chartSession is what a chart shows of s.
func chartSession(s *SessionReport) *chart.Session {
	c := &chart.Session{Name: s.Name, Model: s.Model, Line: s.Line, TokenRatio: s.TokenRatio, CostRatio: s.CostRatio, BPCostRatio: s.BPCostRatio,
		PeakOrig: s.PeakOrig, PeakSent: s.PeakSent, Events: s.Events, Invalid: s.Invalid}
	for _, q := range s.PerRequest {
		c.Requests = append(c.Requests, chart.Request{Orig: q.OrigTokens, Sent: q.SentTokens, Event: q.Event, Cold: q.Cold,
			Compaction: q.Summary, Reset: q.Reset, Invalid: q.Invalid})
	}
	return c
}

// plural returns "1 request", "2 requests".
func plural(n int, what string) string { return chart.Plural(n, what) }
