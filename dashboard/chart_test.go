package dashboard

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/replay/chart"
)

// TestChart: the session chart is replay's, drawn from the live points,
// with the markers at the requests that had them, in either theme.
func TestChart(t *testing.T) {
	for _, tc := range []struct {
		name              string
		kinds             string // per request: . plain, e event, c ctxguard compaction, C client compaction
		events, clientCmp []int
	}{
		{"one request", ".", nil, nil},
		{"an event", "..e.", []int{3}, nil},
		{"events and compactions", "e.c.C.e", []int{1, 3, 7}, []int{5}},
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
				w := httptest.NewRecorder()
				d.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/ctxguard/api/session/h:c/chart.svg?theme="+theme, nil))
				if w.Code != http.StatusOK {
					t.Fatalf("%d %s", w.Code, w.Body)
				}
				n, events, compactions, err := ChartMarks(w.Body.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				if n != len(tc.kinds) {
					t.Errorf("%d requests plotted, want %d", n, len(tc.kinds))
				}
				if diff := cmp.Diff(tc.events, events); diff != "" {
					t.Errorf("event markers (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.clientCmp, compactions); diff != "" {
					t.Errorf("compaction markers (-want +got):\n%s", diff)
				}
				bg := chart.Light.Background
				if theme == "dark" {
					bg = chart.Dark.Background
				}
				if !strings.Contains(w.Body.String(), `fill="`+bg+`"`) {
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

// FuzzChartMarks: ChartMarks never panics, and what it reads from a real
// chart is what was drawn.
func FuzzChartMarks(f *testing.F) {
	f.Add(chart.SessionSVG(&chart.Session{Name: "s", Requests: []chart.Request{{Orig: 5, Sent: 4}, {Orig: 9, Sent: 3, Event: true}}}, chart.Light))
	f.Add([]byte(`<svg><polyline class="sent" points="1,2 3,4"/><line class="event" x1="3"/></svg>`))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, events, compactions, err := ChartMarks(b)
		if err != nil {
			return
		}
		for _, i := range append(events, compactions...) {
			if i < 1 || i > n {
				t.Fatalf("marker at request %d of %d", i, n)
			}
		}
	})
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
		key = "h:" + key
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
