// Package chart draws ctxguard's per-session chart as SVG: per request
// (x: request number, y: prompt tokens), the original prompt as a grey
// line, what ctxguard sent as a blue line, the tokens saved shaded
// between them, each edit event as a red dashed vertical line
// (class "event") and each client compaction as a grey dotted one (class
// "compaction"). replay's charts and the dashboard draw the same picture
// with it. It depends on nothing of ctxguard's.
//
// The SVG is written by hand (no dependency): fixed-size panels, plain
// shapes, text in the system sans-serif font, every text escaped.
package chart

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

const (
	margin     = 20
	fontFamily = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif"
)

// Session is what a panel shows of one session.
type Session struct {
	Name, Model string
	Requests    []Request
	// The title line's figures.
	TokenRatio, CostRatio, BPCostRatio float64
	PeakOrig, PeakSent                 int
	Events, Invalid                    int
}

// Request is one request of a session.
type Request struct {
	Orig, Sent int  // prompt tokens, original and sent
	Event      bool // an edit event
	Reset      bool // a client compaction
	Invalid    string
}

// Theme is a chart's palette, as SVG colors. Light is replay's; Dark is
// for pages in a dark color scheme (the dashboard's).
type Theme struct {
	Background, Panel, Border string // the page, a panel's fill and its border
	Orig, Sent, Saved         string // the original and sent lines, the area between them
	Event, Reset              string // edit event and client compaction markers
	Grid, Text, Muted         string
}

var (
	// Light is the default theme, the one replay's charts use.
	Light = Theme{Background: "#f9fafb", Panel: "#ffffff", Border: "#d1d5db",
		Orig: "#6b7280", Sent: "#2563eb", Saved: "#bfdbfe", Event: "#dc2626", Reset: "#9ca3af",
		Grid: "#e5e7eb", Text: "#111827", Muted: "#4b5563"}
	// Dark suits a dark page.
	Dark = Theme{Background: "#0f1115", Panel: "#161a21", Border: "#2d3440",
		Orig: "#9ca3af", Sent: "#60a5fa", Saved: "#1e3a8a", Event: "#f87171", Reset: "#6b7280",
		Grid: "#262c36", Text: "#e5e7eb", Muted: "#9ca3af"}
)

// SessionSVG renders one session as its own SVG in the theme th.
func SessionSVG(s *Session, th Theme) []byte {
	c := New(1000, 480, th)
	c.Legend(margin, 24)
	c.Panel(margin, 36, 1000-2*margin, 440-16, s)
	return c.Bytes()
}

// Canvas is an SVG document being drawn in a theme.
type Canvas struct {
	svg
}

// New starts a document of w×h pixels on the theme's background.
func New(w, h int, th Theme) *Canvas {
	c := &Canvas{svg{th: th}}
	c.open(w, h)
	return c
}

// Theme returns the canvas's theme.
func (c *Canvas) Theme() Theme { return c.th }

// Text writes t (escaped) with its baseline at (x, y).
func (c *Canvas) Text(x, y, size int, weight, color, anchor, t string) {
	c.text(x, y, size, weight, color, anchor, t)
}

// Legend draws the key from x on the baseline y.
func (c *Canvas) Legend(x, y int) { legend(&c.svg, x, y) }

// Panel draws one session's chart in the box (x, y, w, h).
func (c *Canvas) Panel(x, y, w, h int, s *Session) { panel(&c.svg, x, y, w, h, s) }

// Bytes closes the document and returns it.
func (c *Canvas) Bytes() []byte {
	c.close()
	return c.bytes()
}

// legend draws the key from x on the baseline y.
func legend(b *svg, x, y int) {
	items := []struct {
		label, color, dash string
		width              float64
	}{
		{"original", b.th.Orig, "", 2},
		{"sent by ctxguard", b.th.Sent, "", 2.5},
		{"edit event", b.th.Event, "5 3", 1.5},
		{"client compaction", b.th.Reset, "2 3", 1.5},
	}
	// Text widths are approximated (7 px a character at 12 px).
	cx := x
	for _, it := range items {
		b.line(float64(cx), float64(y-4), float64(cx+22), float64(y-4), it.color, it.width, it.dash)
		b.text(cx+28, y, 12, "400", b.th.Muted, "start", it.label)
		cx += 28 + 7*len(it.label) + 16
	}
}

// panel draws one session's chart in the box (x, y, w, h).
func panel(b *svg, x, y, w, h int, s *Session) {
	b.rect(x, y, w, h, b.th.Panel, b.th.Border)
	title := s.Name
	if s.Model != "" {
		title += " · " + strings.TrimPrefix(s.Model, "claude-")
	}
	title += " · " + Plural(len(s.Requests), "request")
	b.text(x+12, y+20, 14, "600", b.th.Text, "start", title)
	sub := fmt.Sprintf("tokens ×%s · cost ×%s (bp ×%s) · peak %s → %s · %s",
		Ratio(s.TokenRatio), Ratio(s.CostRatio), Ratio(s.BPCostRatio), Tokens(s.PeakOrig), Tokens(s.PeakSent), Plural(s.Events, "edit event"))
	if s.Invalid > 0 {
		sub += fmt.Sprintf(" · %d INVALID", s.Invalid)
	}
	b.text(x+12, y+38, 12, "400", b.th.Muted, "start", sub)

	// Plot area.
	px, py := float64(x+58), float64(y+52)
	pw, ph := float64(w-58-16), float64(h-52-34)
	n := len(s.Requests)
	ymax := 0
	for _, q := range s.Requests {
		ymax = max(ymax, q.Orig, q.Sent)
	}
	step := niceStep(float64(ymax), 5)
	top := math.Max(step, math.Ceil(float64(ymax)/step)*step)
	yv := func(v int) float64 { return py + ph - ph*float64(v)/top }
	xv := func(i int) float64 {
		if n <= 1 {
			return px + pw/2
		}
		return px + pw*float64(i)/float64(n-1)
	}
	// Grid and y labels.
	for v := 0.0; v <= top+step/2; v += step {
		yy := py + ph - ph*v/top
		b.line(px, yy, px+pw, yy, b.th.Grid, 1, "")
		b.text(int(px)-6, int(yy)+4, 11, "400", b.th.Muted, "end", axisLabel(v))
	}
	// x ticks: request numbers, 1-based: the first, then every xstep.
	xstep := int(math.Max(1, niceStep(float64(n), 8)))
	ticks := []int{1}
	for v := xstep; v <= n; v += xstep {
		if v > 1 {
			ticks = append(ticks, v)
		}
	}
	for _, i := range ticks {
		xx := xv(i - 1)
		b.line(xx, py+ph, xx, py+ph+4, b.th.Muted, 1, "")
		b.text(int(xx), int(py+ph)+17, 11, "400", b.th.Muted, "middle", strconv.Itoa(i))
	}
	b.line(px, py+ph, px+pw, py+ph, b.th.Muted, 1, "")
	b.line(px, py, px, py+ph, b.th.Muted, 1, "")
	b.text(int(px+pw/2), int(py+ph)+31, 11, "400", b.th.Muted, "middle", "request")
	b.vtext(x+14, int(py+ph/2), 11, b.th.Muted, "prompt tokens")

	// Savings area, lines, markers.
	if n > 1 {
		var area []string
		for i, q := range s.Requests {
			area = append(area, pt(xv(i), yv(q.Orig)))
		}
		for i := n - 1; i >= 0; i-- {
			area = append(area, pt(xv(i), yv(s.Requests[i].Sent)))
		}
		b.polygon(area, b.th.Saved, 0.6)
	}
	for i, q := range s.Requests {
		if q.Reset {
			b.marker("compaction", xv(i), py, py+ph, b.th.Reset, "2 3")
		}
	}
	for i, q := range s.Requests {
		if q.Event {
			b.marker("event", xv(i), py, py+ph, b.th.Event, "5 3")
		}
	}
	orig := make([]string, n)
	sent := make([]string, n)
	for i, q := range s.Requests {
		orig[i] = pt(xv(i), yv(q.Orig))
		sent[i] = pt(xv(i), yv(q.Sent))
	}
	b.polyline("original", orig, b.th.Orig, 2)
	b.polyline("sent", sent, b.th.Sent, 2.5)
	if n == 1 {
		b.dot(xv(0), yv(s.Requests[0].Orig), b.th.Orig)
		b.dot(xv(0), yv(s.Requests[0].Sent), b.th.Sent)
	}
	for i, q := range s.Requests {
		if q.Invalid != "" {
			b.text(int(xv(i)), int(yv(q.Sent))-6, 14, "700", b.th.Event, "middle", "×")
		}
	}
}

// niceStep returns a round step (1, 2 or 5 times a power of ten) that
// divides span into about n intervals.
func niceStep(span float64, n int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// axisLabel formats a token count on the y axis: 0, 500, 5K, 2.5K, 1.5M.
func axisLabel(v float64) string {
	switch {
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case v >= 1000:
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "K"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func pt(x, y float64) string { return num(x) + "," + num(y) }

func num(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// svg accumulates an SVG document drawn in the theme th.
type svg struct {
	sb strings.Builder
	th Theme
}

func (s *svg) bytes() []byte { return []byte(s.sb.String()) }

func (s *svg) open(w, h int) {
	fmt.Fprintf(&s.sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="%s">`+"\n", w, h, w, h, fontFamily)
	fmt.Fprintf(&s.sb, `<rect width="%d" height="%d" fill="%s"/>`+"\n", w, h, s.th.Background)
}

func (s *svg) close() { s.sb.WriteString("</svg>\n") }

func (s *svg) rect(x, y, w, h int, fill, stroke string) {
	fmt.Fprintf(&s.sb, `<rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="%s" stroke="%s"/>`+"\n", x, y, w, h, fill, stroke)
}

func (s *svg) line(x1, y1, x2, y2 float64, color string, width float64, dash string) {
	d := ""
	if dash != "" {
		d = ` stroke-dasharray="` + dash + `"`
	}
	fmt.Fprintf(&s.sb, `<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>`+"\n", num(x1), num(y1), num(x2), num(y2), color, num(width), d)
}

// marker is a vertical line for an event of the given class.
func (s *svg) marker(class string, x, y1, y2 float64, color, dash string) {
	fmt.Fprintf(&s.sb, `<line class="%s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5" stroke-dasharray="%s"/>`+"\n", class, num(x), num(y1), num(x), num(y2), color, dash)
}

func (s *svg) polyline(class string, pts []string, color string, width float64) {
	fmt.Fprintf(&s.sb, `<polyline class="%s" points="%s" fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round"/>`+"\n", class, strings.Join(pts, " "), color, num(width))
}

func (s *svg) polygon(pts []string, fill string, opacity float64) {
	fmt.Fprintf(&s.sb, `<polygon class="saved" points="%s" fill="%s" fill-opacity="%s" stroke="none"/>`+"\n", strings.Join(pts, " "), fill, num(opacity))
}

func (s *svg) dot(x, y float64, color string) {
	fmt.Fprintf(&s.sb, `<circle cx="%s" cy="%s" r="3.5" fill="%s"/>`+"\n", num(x), num(y), color)
}

func (s *svg) text(x, y, size int, weight, color, anchor, t string) {
	fmt.Fprintf(&s.sb, `<text x="%d" y="%d" font-size="%d" font-weight="%s" fill="%s" text-anchor="%s">%s</text>`+"\n", x, y, size, weight, color, anchor, esc(t))
}

func (s *svg) vtext(x, y, size int, color, t string) {
	fmt.Fprintf(&s.sb, `<text x="%d" y="%d" font-size="%d" fill="%s" text-anchor="middle" transform="rotate(-90 %d %d)">%s</text>`+"\n", x, y, size, color, x, y, esc(t))
}

func esc(t string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(t)
}

// Plural returns "1 request", "2 requests".
func Plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// Ratio formats a ratio as the title lines show it: 0.771.
func Ratio(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }

// Tokens formats a token count compactly: 950, 12K, 1.2M.
func Tokens(n int) string {
	a := math.Abs(float64(n))
	switch {
	case a < 1000:
		return strconv.Itoa(n)
	case a < 10_000:
		return strconv.FormatFloat(float64(n)/1000, 'f', 1, 64) + "K"
	case a < 1_000_000:
		return strconv.Itoa(int(math.Round(float64(n)/1000))) + "K"
	case a < 10_000_000:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 2, 64) + "M"
	}
	return strconv.FormatFloat(float64(n)/1e6, 'f', 1, 64) + "M"
}
