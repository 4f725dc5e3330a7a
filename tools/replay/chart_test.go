package replay

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/dashboard/chart"
)

// svgShape is what the structural checks read from a chart.
type svgShape struct {
	root      string
	width     string
	polylines map[string][]int // class -> number of points of each
	markers   map[string]int   // class -> vertical marker lines
	polygons  int
	texts     []string
}

func parseSVG(t *testing.T, b []byte) svgShape {
	t.Helper()
	s := svgShape{polylines: map[string][]int{}, markers: map[string]int{}}
	dec := xml.NewDecoder(bytes.NewReader(b))
	inText := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range e.Attr {
				attr[a.Name.Local] = a.Value
			}
			if s.root == "" {
				s.root, s.width = e.Name.Local, attr["width"]
			}
			switch e.Name.Local {
			case "polyline":
				s.polylines[attr["class"]] = append(s.polylines[attr["class"]], len(strings.Fields(attr["points"])))
			case "line":
				if c := attr["class"]; c != "" {
					s.markers[c]++
				}
			case "polygon":
				s.polygons++
			case "text":
				inText = true
			}
		case xml.CharData:
			if inText {
				s.texts = append(s.texts, string(e))
			}
		case xml.EndElement:
			inText = false
		}
	}
	return s
}

// fixtureReport is a report of the hand-computed fixture session.
func fixtureReport(t *testing.T) *Report {
	t.Helper()
	stream, rw := fixture()
	st, err := Measure("fixture", stream, rw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sr := SessionReport{ID: "fixture-session", Name: "fixture", Model: "claude-opus-4-5", PerRequest: []RequestReport{}}
	unpriced, used := map[string]bool{}, PriceTable{}
	sr.fill(st, stream, nil, DefaultPrices(), unpriced, used)
	r := &Report{Version: ReportVersion, Passes: []string{"shrink", "clear"}, Files: 1, Requests: 3, Sessions: []SessionReport{sr}}
	r.finish(nil, unpriced, used)
	return r
}

func TestChartSVGFixture(t *testing.T) {
	r := fixtureReport(t)
	b := ChartSVG(r)
	golden(t, "chart.golden.svg", b)
	s := parseSVG(t, b)
	if s.root != "svg" || s.width != "1200" {
		t.Errorf("root %s width %s", s.root, s.width)
	}
	if got := s.polylines["original"]; len(got) != 1 || got[0] != 3 {
		t.Errorf("original lines %v, want one of 3 points", got)
	}
	if got := s.polylines["sent"]; len(got) != 1 || got[0] != 3 {
		t.Errorf("sent lines %v, want one of 3 points", got)
	}
	if s.markers["event"] != 1 || s.markers["compaction"] != 0 || s.markers["client-compaction"] != 0 || s.polygons != 1 {
		t.Errorf("markers %v, polygons %d; want 1 event, 1 savings area", s.markers, s.polygons)
	}
	all := strings.Join(s.texts, "|")
	for _, want := range []string{"fixture · opus-4-5 · 3 requests", "tokens ×0.771", "1 edit event", "peak 380 → 350", "request", "prompt tokens", "edit event"} {
		if !strings.Contains(all, want) {
			t.Errorf("chart text lacks %q: %s", want, all)
		}
	}
}

// On the test data: one panel per session with requests (up to
// ChartMaxPanels), a marker per edit event and compaction shown.
func TestChartSVGStructure(t *testing.T) {
	r := testdataReport(t, fakePipeline())
	b := ChartSVG(r)
	s := parseSVG(t, b)
	shown, left := chartSessions(r)
	if left != 0 && len(shown) != ChartMaxPanels {
		t.Errorf("%d panels, %d left out", len(shown), left)
	}
	events, resets := 0, 0
	for i, ss := range shown {
		events += ss.Events
		resets += ss.Compactions
		for _, q := range ss.PerRequest {
			if q.Summary {
				t.Fatalf("the fake pipeline made a compaction")
			}
		}
		if got := s.polylines["sent"][i]; got != len(ss.PerRequest) {
			t.Errorf("panel %d (%s): %d points, %d requests", i, ss.Name, got, len(ss.PerRequest))
		}
		if i > 0 && shown[i-1].OrigTokens < ss.OrigTokens {
			t.Errorf("panels not largest first")
		}
	}
	if len(s.polylines["sent"]) != len(shown) || len(s.polylines["original"]) != len(shown) {
		t.Errorf("%d/%d lines for %d panels", len(s.polylines["sent"]), len(s.polylines["original"]), len(shown))
	}
	if s.markers["event"] != events || s.markers["client-compaction"] != resets || s.markers["compaction"] != 0 {
		t.Errorf("markers %v, want %d events, %d client compactions", s.markers, events, resets)
	}
	if events == 0 {
		t.Error("the fake pipeline made no events to mark")
	}
}

func TestWriteCharts(t *testing.T) {
	r := testdataReport(t, fakePipeline())
	dir := t.TempDir()

	files, err := WriteCharts(r, filepath.Join(dir, "all.svg"))
	if err != nil || len(files) != 1 {
		t.Fatalf("file: %v %v", files, err)
	}
	b, _ := os.ReadFile(files[0])
	parseSVG(t, b)

	withRequests := 0
	for _, s := range r.Sessions {
		if len(s.PerRequest) > 0 {
			withRequests++
		}
	}
	files, err = WriteCharts(r, filepath.Join(dir, "per-session")+"/")
	if err != nil || len(files) != withRequests {
		t.Fatalf("folder: %d files for %d sessions, %v", len(files), withRequests, err)
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		s := parseSVG(t, b)
		if len(s.polylines["sent"]) != 1 {
			t.Errorf("%s: %d panels", f, len(s.polylines["sent"]))
		}
		if strings.ContainsAny(filepath.Base(f), "/ ") {
			t.Errorf("file name %q", f)
		}
	}
	// An existing folder without a trailing slash works too.
	if files, err := WriteCharts(r, dir); err != nil || len(files) != withRequests {
		t.Errorf("existing folder: %d files, %v", len(files), err)
	}
	if _, err := WriteCharts(r, filepath.Join(dir, "chart.png")); err == nil {
		t.Error("a .png chart was accepted")
	}
}

// SessionSVG draws in the Light theme; another theme changes only the
// colors: the same elements, none of Light's colors that Dark replaces.
func TestSessionSVGTheme(t *testing.T) {
	r := fixtureReport(t)
	s := &r.Sessions[0]
	light, dark := SessionSVG(s), chart.SessionSVG(chartSession(s), chart.Dark)
	pl, pd := parseSVG(t, light), parseSVG(t, dark)
	if diff := cmp.Diff(pl.markers, pd.markers); diff != "" {
		t.Errorf("markers differ (-light +dark):\n%s", diff)
	}
	if diff := cmp.Diff(pl.polylines, pd.polylines); diff != "" {
		t.Errorf("lines differ (-light +dark):\n%s", diff)
	}
	for _, c := range []string{chart.Dark.Background, chart.Dark.Panel, chart.Dark.Sent, chart.Dark.Event, chart.Dark.Text} {
		if !bytes.Contains(dark, []byte(`"`+c+`"`)) {
			t.Errorf("dark chart lacks %s", c)
		}
	}
	for _, c := range []string{chart.Light.Background, chart.Light.Panel, chart.Light.Sent, chart.Light.Event, chart.Light.Text} {
		if bytes.Contains(dark, []byte(`"`+c+`"`)) {
			t.Errorf("dark chart uses the light color %s", c)
		}
	}
}
