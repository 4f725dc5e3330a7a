package dashboard

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/ctxguard/ctxguard/replay/chart"
)

// ChartMarks reads a session chart (replay's SessionSVG, as served at
// /ctxguard/api/session/{key}/chart.svg) back: the number of requests it
// plots and, 1-based, the requests its edit-event and client-compaction
// markers stand at (a marker is at a request when its x is the x of that
// request's point on the "sent" line). It is for tests, the browser
// test's among them, and reads untrusted input safely: a document it does
// not understand is an error.
func ChartMarks(svg []byte) (requests int, events, compactions []int, err error) {
	var xs []string // the sent line's x coordinates, by request
	marks := map[string][]string{}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, nil, nil, err
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		class, x1, points := "", "", ""
		for _, a := range se.Attr {
			switch a.Name.Local {
			case "class":
				class = a.Value
			case "x1":
				x1 = a.Value
			case "points":
				points = a.Value
			}
		}
		switch {
		case se.Name.Local == "polyline" && class == "sent":
			if xs != nil {
				return 0, nil, nil, errors.New("chart: more than one sent line")
			}
			xs = []string{}
			for _, p := range strings.Fields(points) {
				x, _, ok := strings.Cut(p, ",")
				if !ok {
					return 0, nil, nil, errors.New("chart: bad point " + p)
				}
				xs = append(xs, x)
			}
		case se.Name.Local == "line" && (class == "event" || class == "compaction"):
			marks[class] = append(marks[class], x1)
		}
	}
	if xs == nil {
		return 0, nil, nil, errors.New("chart: no sent line")
	}
	at := func(class string) ([]int, error) {
		var out []int
		for _, x := range marks[class] {
			i := slices.Index(xs, x)
			if i < 0 {
				return nil, errors.New("chart: a " + class + " marker at x=" + x + " is at no request")
			}
			out = append(out, i+1)
		}
		return out, nil
	}
	if events, err = at("event"); err != nil {
		return 0, nil, nil, err
	}
	if compactions, err = at("compaction"); err != nil {
		return 0, nil, nil, err
	}
	return len(xs), events, compactions, nil
}

// serveChart draws a session's chart as replay draws one (package chart).
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
// ctxguard's estimates before and after (the figures replay charts), edit
// events (a compaction is one too) and the client's own compactions as
// markers; the title line's ratios from the kept requests (the cost ratio
// in dollars: as billed, against billed plus saved).
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
	cs := &chart.Session{Name: name, Model: s.model}
	var orig, sent int
	var spent, savedUSD float64
	s.points.each(func(p Point) bool {
		cs.Requests = append(cs.Requests, chart.Request{Orig: p.Before, Sent: p.After, Event: p.Event, Reset: p.Client})
		orig += p.Before
		sent += p.After
		cs.PeakOrig = max(cs.PeakOrig, p.Before)
		cs.PeakSent = max(cs.PeakSent, p.After)
		if p.Event {
			cs.Events++
		}
		spent += p.SpentUSD
		savedUSD += p.SavedUSD
		return true
	})
	cs.TokenRatio = ratio(float64(sent), float64(orig))
	cs.CostRatio = ratio(spent, spent+savedUSD)
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
