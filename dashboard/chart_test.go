package dashboard

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ctxguard/ctxguard/dashboard/chart"
	"github.com/ctxguard/ctxguard/record"
)

// getChart GETs a session's chart and reads it back.
func getChart(t *testing.T, d *Dashboard, key, theme string) (chart.Marks, string) {
	t.Helper()
	w := httptest.NewRecorder()
	d.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/ctxguard/api/session/"+url.PathEscape(key)+"/chart.svg?theme="+theme, nil))
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	m, err := chart.ReadMarks(w.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return m, w.Body.String()
}

// TestChart: the session chart is replay's, drawn from the live points:
// the markers at the requests that had them (compactions apart from edit
// events), the overflow line of the session's model (window 10,000 less
// max output 2,000), in either theme.
func TestChart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kinds string // per request: . plain, e event, c ctxguard compaction, C client compaction
		want  chart.Marks
	}{
		{"one request", ".", chart.Marks{Requests: 1}},
		{"an event", "..e.", chart.Marks{Requests: 4, Events: []int{3}}},
		{"events and compactions", "e.c.C.e", chart.Marks{Requests: 7, Events: []int{1, 7}, Compactions: []int{3}, ClientCompactions: []int{5}}},
	} {
		for _, theme := range []string{"", "dark"} {
			t.Run(tc.name+" "+theme, func(t *testing.T) {
				d := New(Options{})
				var xs []*record.Exchange
				for i, k := range tc.kinds {
					x := ex("h:c", 1000*(i+1), 800*(i+1))
					switch k {
					case 'e':
						x.Event = true
					case 'c':
						x.Compaction = "k"
					case 'C':
						x.Skipped = "client compaction"
					}
					xs = append(xs, x)
				}
				feed(d, xs...)
				got, svg := getChart(t, d, "h:c", theme)
				want := tc.want
				want.First, want.Line, want.LineDrawn, want.OrigOnTop = 1, 8_000, len(tc.kinds) >= 3, true
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("chart (-want +got):\n%s", diff)
				}
				bg := chart.Light.Background
				if theme == "dark" {
					bg = chart.Dark.Background
				}
				if !strings.Contains(svg, `fill="`+bg+`"`) {
					t.Errorf("theme %q: no background %s", theme, bg)
				}
			})
		}
	}
	d := New(Options{})
	w := httptest.NewRecorder()
	d.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/ctxguard/api/session/h:none/chart.svg", nil))
	if w.Code != http.StatusNotFound {
		t.Errorf("chart of no session: %d", w.Code)
	}
}

// TestNumbering: a session's requests are numbered 1…N in the order
// they came, whatever other sessions sent between them, the same on the
// page (points) and on the chart; once older points are dropped, both go
// on from where they were.
func TestNumbering(t *testing.T) {
	d := New(Options{Requests: 4})
	var xs []*record.Exchange
	for i := range 6 {
		a := ex("h:a", 100*(i+1), 90*(i+1))
		a.Event = i == 4
		xs = append(xs, a, ex("h:b", 10, 10), ex("h:c", 10, 10))
	}
	feed(d, xs...)
	v, _ := d.Session("h:a")
	var ns []int
	for _, p := range v.Points {
		ns = append(ns, p.N)
	}
	if diff := cmp.Diff([]int{3, 4, 5, 6}, ns); diff != "" {
		t.Errorf("numbers on the page (-want +got):\n%s", diff)
	}
	m, _ := getChart(t, d, "h:a", "")
	if m.First != 3 || m.Requests != 4 || !cmp.Equal(m.Events, []int{5}) {
		t.Errorf("chart: from %d, %d requests, events at %v; want from 3, 4 requests, an event at 5", m.First, m.Requests, m.Events)
	}
	// The request page names the same number.
	r, err := d.Request(v.Points[2].Seq)
	if err != nil || r.N != 5 || r.Session != "h:a" {
		t.Errorf("request %d: number %d in %q, %v; want 5 in h:a", v.Points[2].Seq, r.N, r.Session, err)
	}
}

// TestDryRunChart: a dry run's session is charted with what would have
// been sent, and says so.
func TestDryRunChart(t *testing.T) {
	d := New(Options{})
	for i := range 3 {
		x := ex("h:d", 1000*(i+1), 1000*(i+1))
		x.Outcome, x.Skipped, x.WouldSend = record.Unchanged, record.SkipDryRun, 600*(i+1)
		feed(d, x)
	}
	_, svg := getChart(t, d, "h:d", "")
	if !strings.Contains(svg, "would send (dry run)") || !strings.Contains(svg, "· dry run<") || !strings.Contains(svg, "peak 3.0K → 1.8K") {
		t.Errorf("the chart does not show the dry run's would-be figures:\n%s", svg)
	}
}

// FuzzSessionKey: any session key round-trips through the API's paths
// (escaped as the pages escape it) and comes back as it was. Keys are
// prefixed as package session prefixes them (a bare "." or ".." would be
// a path's dot segment).
func FuzzSessionKey(f *testing.F) {
	for _, k := range []string{"abc", "", ".", "..", `<img src=x onerror=alert(1)>`, "a/b?c#d", "/../..", "%2F..%2F", "m:ü 😀", "h:a\x00b"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		key = "anthropic:h:" + key
		d := New(Options{})
		feed(d, ex(key, 2, 1))
		var v SessionDetail
		w := httptest.NewRecorder()
		d.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/ctxguard/api/session/"+url.PathEscape(key), nil))
		if w.Code != http.StatusOK {
			t.Fatalf("key %q: %d %s", key, w.Code, w.Body)
		}
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		var want string // as JSON carries it: invalid UTF-8 replaced
		b, _ := json.Marshal(key)
		_ = json.Unmarshal(b, &want)
		if v.Session.Key != want {
			t.Fatalf("key %q came back as %q", key, v.Session.Key)
		}
	})
}
