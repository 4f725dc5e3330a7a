// Package chart draws ctxguard's per-session chart as SVG: per request
// (x: request number, y: prompt tokens), what ctxguard sent as a blue line
// and the original prompt as a grey dashed line drawn over it (so that it
// shows where the two are equal), the tokens saved shaded between them,
// the overflow line (the model's window less its maximum output: a prompt
// above it leaves the answer no room) as a purple dashed horizontal line
// (class "overflow"), each edit event as a red dashed vertical line
// (class "event"), each compaction ctxguard made as an amber one (class
// "compaction"; a compaction is an edit event too, marked as the
// compaction) and each client compaction as a grey dotted one (class
// "client-compaction"). An event or compaction made at a request that found
// the prompt cache cold (so it cost no cache write) has a cyan dot on top
// of its line (class "cold"). replay's charts and the dashboard draw the same
// picture with it. It depends on nothing of ctxguard's.
//
// The SVG is written by hand (no dependency): fixed-size panels, plain
// shapes, text in the system sans-serif font, every text escaped. Markers
// and the overflow line carry their figures as data-* attributes (the
// sent line its first request's number, data-first; the overflow line its
// tokens, data-tokens), for tests and tools that read a chart back.
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
	// First is the number of the first request shown (0 means 1): a
	// session whose older requests are no longer kept starts later. The x
	// axis numbers requests from it.
	First int
	// Line is the overflow line in prompt tokens: the model's window less
	// its maximum output. 0: unknown, not drawn.
	Line int
	// DryRun says Sent is what ctxguard would have sent: nothing was
	// changed (a dry run).
	DryRun bool
	// The title line's figures.
	TokenRatio, CostRatio, BPCostRatio float64
	PeakOrig, PeakSent                 int
	Events, Invalid                    int
}

// Request is one request of a session.
type Request struct {
	Orig, Sent int  // prompt tokens, original and sent
	Event      bool // an edit event
	Compaction bool // ctxguard compacted the history (an edit event too)
	Reset      bool // a client compaction
	// Cold: the request found the prompt cache cold (it had expired);
	// an event there cost no cache write of its own.
	Cold    bool
	Invalid string
}

// Theme is a chart's palette, as SVG colors. Light is replay's; Dark is
// for pages in a dark color scheme (the dashboard's).
type Theme struct {
	Background, Panel, Border string // the page, a panel's fill and its border
	Orig, Sent, Saved         string // the original and sent lines, the area between them
	Event, Compaction, Reset  string // edit event, compaction and client compaction markers
	Cold                      string // the dot on an event at a cold cache
	Overflow                  string // the overflow line
	Grid, Text, Muted         string
}

var (
	// Light is the default theme, the one replay's charts use.
	Light = Theme{Background: "#f9fafb", Panel: "#ffffff", Border: "#d1d5db",
		Orig: "#4b5563", Sent: "#2563eb", Saved: "#bfdbfe", Event: "#dc2626", Compaction: "#d97706", Reset: "#9ca3af", Cold: "#0891b2",
		Overflow: "#7c3aed", Grid: "#e5e7eb", Text: "#111827", Muted: "#4b5563"}
	// Dark suits a dark page.
	Dark = Theme{Background: "#0f1115", Panel: "#161a21", Border: "#2d3440",
		Orig: "#d1d5db", Sent: "#60a5fa", Saved: "#1e3a8a", Event: "#f87171", Compaction: "#fbbf24", Reset: "#6b7280", Cold: "#22d3ee",
		Overflow: "#a78bfa", Grid: "#262c36", Text: "#e5e7eb", Muted: "#9ca3af"}
)

// Line styles: the original line is dashed so that the sent line shows
// through it where the two are equal.
const (
	origDash      = "7 5"
	eventDash     = "5 3"
	resetDash     = "2 3"
	overflowDash  = "10 4"
	origWidth     = 2.0
	sentWidth     = 2.5
	markerWidth   = 1.5
	compactWidth  = 2.0
	overflowWidth = 1.5
	coldRadius    = 4.0
)

// OffChart is how far below the overflow line a session's largest prompt
// may stay for the line to be drawn: a session that never came within a
// third of it is drawn at its own scale, and the line is named in a
// note instead (class "overflow" too), lest the requests be squashed at
// the bottom.
const OffChart = 3

// SessionSVG renders one session as its own SVG in the theme th.
func SessionSVG(s *Session, th Theme) []byte {
	c := New(1000, 480, th)
	legend(&c.svg, margin, 24, s.DryRun)
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
func (c *Canvas) Legend(x, y int) { legend(&c.svg, x, y, false) }

// Panel draws one session's chart in the box (x, y, w, h).
func (c *Canvas) Panel(x, y, w, h int, s *Session) { panel(&c.svg, x, y, w, h, s) }

// Bytes closes the document and returns it.
func (c *Canvas) Bytes() []byte {
	c.close()
	return c.bytes()
}

// legend draws the key from x on the baseline y; dry names the blue
// line as what would have been sent.
func legend(b *svg, x, y int, dry bool) {
	sent := "sent by ctxguard"
	if dry {
		sent = "would send (dry run)"
	}
	items := []struct {
		label, color, dash string
		width              float64
	}{
		{"original", b.th.Orig, origDash, origWidth},
		{sent, b.th.Sent, "", sentWidth},
		{"overflow line", b.th.Overflow, overflowDash, overflowWidth},
		{"edit event", b.th.Event, eventDash, markerWidth},
		{"compaction", b.th.Compaction, "", compactWidth},
		{"client compaction", b.th.Reset, resetDash, markerWidth},
		{"• at a cold cache", b.th.Cold, "", coldRadius},
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
	if s.DryRun {
		title += " · dry run"
	}
	b.text(x+12, y+20, 14, "600", b.th.Text, "start", title)
	compactions := 0
	for _, q := range s.Requests {
		if q.Compaction {
			compactions++
		}
	}
	sub := fmt.Sprintf("tokens ×%s · cost ×%s (bp ×%s) · peak %s → %s · %s",
		Ratio(s.TokenRatio), Ratio(s.CostRatio), Ratio(s.BPCostRatio), Tokens(s.PeakOrig), Tokens(s.PeakSent), Plural(s.Events, "edit event"))
	if compactions > 0 {
		sub += fmt.Sprintf(" (%s)", Plural(compactions, "compaction"))
	}
	if s.Invalid > 0 {
		sub += fmt.Sprintf(" · %d INVALID", s.Invalid)
	}
	b.text(x+12, y+38, 12, "400", b.th.Muted, "start", sub)

	// Plot area.
	px, py := float64(x+58), float64(y+52)
	pw, ph := float64(w-58-16), float64(h-52-34)
	n := len(s.Requests)
	first := max(s.First, 1)
	ymax := 0
	for _, q := range s.Requests {
		ymax = max(ymax, q.Orig, q.Sent)
	}
	lineShown := s.Line > 0 && ymax*OffChart >= s.Line
	if lineShown {
		ymax = max(ymax, s.Line)
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
	// x ticks: request numbers from first: the first, then every xstep.
	xstep := int(math.Max(1, niceStep(float64(n), 8)))
	ticks := []int{0}
	for v := xstep; v <= n; v += xstep {
		if v > 1 {
			ticks = append(ticks, v-1)
		}
	}
	for _, i := range ticks {
		xx := xv(i)
		b.line(xx, py+ph, xx, py+ph+4, b.th.Muted, 1, "")
		b.text(int(xx), int(py+ph)+17, 11, "400", b.th.Muted, "middle", strconv.Itoa(first+i))
	}
	b.line(px, py+ph, px+pw, py+ph, b.th.Muted, 1, "")
	b.line(px, py, px, py+ph, b.th.Muted, 1, "")
	b.text(int(px+pw/2), int(py+ph)+31, 11, "400", b.th.Muted, "middle", "request")
	b.vtext(x+14, int(py+ph/2), 11, b.th.Muted, "prompt tokens")

	// The overflow line, or where it is when far above.
	switch {
	case lineShown:
		ly := yv(s.Line)
		fmt.Fprintf(&b.sb, `<line class="overflow" data-tokens="%d" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s" stroke-dasharray="%s"/>`+"\n",
			s.Line, num(px), num(ly), num(px+pw), num(ly), b.th.Overflow, num(overflowWidth), overflowDash)
		b.text(int(px+pw)-4, int(ly)-5, 11, "400", b.th.Overflow, "end", "overflow line "+Tokens(s.Line))
	case s.Line > 0:
		fmt.Fprintf(&b.sb, `<text class="overflow" data-tokens="%d" x="%d" y="%d" font-size="11" fill="%s" text-anchor="end">%s</text>`+"\n",
			s.Line, int(px+pw)-4, int(py)+12, b.th.Overflow, esc("overflow line "+Tokens(s.Line)+" (far above)"))
	}

	// Savings area (where less was sent than came in), markers, lines.
	if n > 1 {
		var area []string
		for i, q := range s.Requests {
			area = append(area, pt(xv(i), yv(q.Orig)))
		}
		for i := n - 1; i >= 0; i-- {
			q := s.Requests[i]
			area = append(area, pt(xv(i), yv(min(q.Sent, q.Orig))))
		}
		b.polygon(area, b.th.Saved, 0.6)
	}
	for i, q := range s.Requests {
		if q.Reset {
			b.marker("client-compaction", xv(i), py, py+ph, b.th.Reset, markerWidth, resetDash)
		}
	}
	for i, q := range s.Requests {
		switch {
		case q.Compaction:
			b.marker("compaction", xv(i), py, py+ph, b.th.Compaction, compactWidth, "")
		case q.Event:
			b.marker("event", xv(i), py, py+ph, b.th.Event, markerWidth, eventDash)
		}
		if q.Cold && (q.Compaction || q.Event) {
			fmt.Fprintf(&b.sb, `<circle class="cold" cx="%s" cy="%s" r="%s" fill="%s"/>`+"\n", num(xv(i)), num(py+coldRadius+1), num(coldRadius), b.th.Cold)
		}
	}
	orig := make([]string, n)
	sent := make([]string, n)
	for i, q := range s.Requests {
		orig[i] = pt(xv(i), yv(q.Orig))
		sent[i] = pt(xv(i), yv(q.Sent))
	}
	fmt.Fprintf(&b.sb, `<polyline class="sent" data-first="%d" points="%s" fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round"/>`+"\n",
		first, strings.Join(sent, " "), b.th.Sent, num(sentWidth))
	fmt.Fprintf(&b.sb, `<polyline class="original" points="%s" fill="none" stroke="%s" stroke-width="%s" stroke-dasharray="%s" stroke-linejoin="round"/>`+"\n",
		strings.Join(orig, " "), b.th.Orig, num(origWidth), origDash)
	if n == 1 {
		b.dot(xv(0), yv(s.Requests[0].Sent), b.th.Sent, 4.5)
		b.dot(xv(0), yv(s.Requests[0].Orig), b.th.Orig, 2.5)
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
func (s *svg) marker(class string, x, y1, y2 float64, color string, width float64, dash string) {
	d := ""
	if dash != "" {
		d = ` stroke-dasharray="` + dash + `"`
	}
	fmt.Fprintf(&s.sb, `<line class="%s" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>`+"\n", class, num(x), num(y1), num(x), num(y2), color, num(width), d)
}

func (s *svg) polygon(pts []string, fill string, opacity float64) {
	fmt.Fprintf(&s.sb, `<polygon class="saved" points="%s" fill="%s" fill-opacity="%s" stroke="none"/>`+"\n", strings.Join(pts, " "), fill, num(opacity))
}

func (s *svg) dot(x, y float64, color string, r float64) {
	fmt.Fprintf(&s.sb, `<circle cx="%s" cy="%s" r="%s" fill="%s"/>`+"\n", num(x), num(y), num(r), color)
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
