package chart

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestNiceStep(t *testing.T) {
	for _, tc := range []struct {
		span float64
		n    int
		want float64
	}{{162_000, 5, 50_000}, {100_000, 5, 20_000}, {320, 8, 50}, {11, 8, 2}, {3, 8, 0.5}, {0, 5, 1}} {
		if got := niceStep(tc.span, tc.n); got != tc.want {
			t.Errorf("niceStep(%v, %d) = %v, want %v", tc.span, tc.n, got, tc.want)
		}
	}
	for v, want := range map[float64]string{0: "0", 500: "500", 5000: "5K", 2500: "2.5K", 1_500_000: "1.5M"} {
		if got := axisLabel(v); got != want {
			t.Errorf("axisLabel(%v) = %q, want %q", v, got, want)
		}
	}
}

// Text is escaped wherever it comes from.
func TestEscapes(t *testing.T) {
	b := SessionSVG(&Session{Name: `<img src=x onerror=alert(1)>`, Model: `"&'`, Requests: []Request{{Orig: 2, Sent: 1}}}, Light)
	if bytes.Contains(b, []byte("<img")) || !bytes.Contains(b, []byte("&lt;img src=x onerror=alert(1)&gt;")) {
		t.Errorf("name not escaped:\n%s", b)
	}
}

// TestMarks: every kind of marker stands at its request, numbered from
// the session's first, apart from the others; the overflow line is drawn
// when the session comes within a third of it, else named above.
func TestMarks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kinds string // per request: . plain, e edit event, c compaction (an event too), C client compaction; E and K: an event and a compaction at a cold cache, * a cold request without one
		first int
		line  int
		want  Marks
	}{
		{"one request", ".", 0, 0, Marks{Requests: 1, First: 1, OrigOnTop: true}},
		{"kinds apart", "e.c.C.e", 0, 0, Marks{Requests: 7, First: 1, Events: []int{1, 7}, Compactions: []int{3}, ClientCompactions: []int{5}, OrigOnTop: true}},
		{"events at a cold cache", "eE.K*", 0, 0, Marks{Requests: 5, First: 1, Events: []int{1, 2}, Compactions: []int{4}, Cold: []int{2, 4}, OrigOnTop: true}},
		{"numbered from first", "..c", 41, 0, Marks{Requests: 3, First: 41, Compactions: []int{43}, OrigOnTop: true}},
		// The largest prompt is 1000 × 4 = 4,000 tokens.
		{"line drawn", "....", 0, 12_000, Marks{Requests: 4, First: 1, Line: 12_000, LineDrawn: true, OrigOnTop: true}},
		{"line far above", "....", 0, 12_001, Marks{Requests: 4, First: 1, Line: 12_001, OrigOnTop: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Session{Name: "s", First: tc.first, Line: tc.line}
			for i, k := range tc.kinds {
				s.Requests = append(s.Requests, Request{Orig: 1000 * (i + 1), Sent: 800 * (i + 1),
					Event: strings.ContainsRune("ecEK", k), Compaction: k == 'c' || k == 'K', Reset: k == 'C', Cold: strings.ContainsRune("EK*", k)})
			}
			for _, th := range []Theme{Light, Dark} {
				got, err := ReadMarks(SessionSVG(s, th))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("marks (-want +got):\n%s", diff)
				}
			}
			b := string(SessionSVG(s, Light))
			for _, label := range []string{">compaction<", ">edit event<", ">client compaction<", ">overflow line<", ">• at a cold cache<"} {
				if !strings.Contains(b, label) {
					t.Errorf("the legend lacks %s", label)
				}
			}
		})
	}
}

// TestLineScale: a drawn overflow line is inside the plot, at its value
// on the y axis (the axis grows to hold it).
func TestLineScale(t *testing.T) {
	s := &Session{Name: "s", Line: 10_000, Requests: []Request{{Orig: 4000, Sent: 4000}, {Orig: 5000, Sent: 3000}}}
	b := string(SessionSVG(s, Light))
	if !strings.Contains(b, `>10K</text>`) || !strings.Contains(b, "overflow line 10K") {
		t.Errorf("the y axis does not reach the line, or the line is not named:\n%s", b)
	}
}

// TestEqualLinesVisible: where nothing was saved (or a setting added a
// little) the original line is still seen: drawn after the sent line,
// dashed; a single request shows both dots; and the savings area never
// shades what was added.
func TestEqualLinesVisible(t *testing.T) {
	s := &Session{Name: "s", Requests: []Request{{Orig: 1000, Sent: 1017}, {Orig: 2000, Sent: 2017}, {Orig: 3000, Sent: 1000}}}
	b := string(SessionSVG(s, Light))
	sent, orig := strings.Index(b, `class="sent"`), strings.Index(b, `class="original"`)
	if sent < 0 || orig < sent {
		t.Fatalf("the original line is drawn first (sent at %d, original at %d): the sent line hides it", sent, orig)
	}
	m, err := ReadMarks([]byte(b))
	if err != nil || !m.OrigOnTop {
		t.Errorf("marks %+v %v: the original line is not dashed on top", m, err)
	}
	// The area: the original line, then back along min(sent, original):
	// its first two lower points are the original's.
	area := b[strings.Index(b, `class="saved" points="`)+len(`class="saved" points="`):]
	pts := strings.Fields(area[:strings.Index(area, `"`)])
	if len(pts) != 6 || pts[4] != pts[1] || pts[5] != pts[0] {
		t.Errorf("savings area %v shades what was added", pts)
	}
	one := string(SessionSVG(&Session{Name: "s", Requests: []Request{{Orig: 10, Sent: 10}}}, Light))
	if strings.Count(one, "<circle") != 2 || strings.Index(one, `fill="`+Light.Orig+`"/>`) < strings.Index(one, `fill="`+Light.Sent+`"/>`) {
		t.Errorf("one request: both dots, the original's on top:\n%s", one)
	}
}

// FuzzReadMarks: ReadMarks never panics, and every marker it reads is at
// a request plotted.
func FuzzReadMarks(f *testing.F) {
	f.Add(SessionSVG(&Session{Name: "s", Line: 20, Requests: []Request{{Orig: 5, Sent: 4}, {Orig: 9, Sent: 3, Event: true, Compaction: true}}}, Light))
	f.Add([]byte(`<svg><polyline class="sent" points="1,2 3,4"/><line class="event" x1="3"/></svg>`))
	f.Add([]byte(`<svg><polyline class="sent" data-first="x" points="1,2"/></svg>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ReadMarks(b)
		if err != nil {
			return
		}
		for _, i := range slices.Concat(m.Events, m.Compactions, m.ClientCompactions) {
			if i < m.First || i >= m.First+m.Requests {
				t.Fatalf("marker at request %d of %d from %d", i, m.Requests, m.First)
			}
		}
	})
}
