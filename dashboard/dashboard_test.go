package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ctxguard/ctxguard/dashboard/price"
	"github.com/ctxguard/ctxguard/internal/testclock"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
)

// clock is a settable test clock, safe for concurrent use (the
// dashboard's store writer reads it in the background).
type clock = testclock.Clock

func newClock(t time.Time) *clock { return testclock.New(t) }
func at(h, m int) time.Time       { return time.Date(2030, 3, 14, h, m, 0, 0, time.UTC) }
func approx() cmp.Option          { return cmpopts.EquateApprox(0, 1e-12) }
func usage(in, read, write int) *protocol.Usage {
	return &protocol.Usage{Input: in, CacheRead: read, CacheWrite: write, Output: 100}
}

// prices are round test prices (USD per million tokens).
var prices = price.Table{"m1": {Input: 1, CacheWrite: 2, CacheRead: 0.5}}

// feed publishes xs on a Bus the dashboard observes (the Bus numbers them).
func feed(d *Dashboard, xs ...*record.Exchange) {
	var b record.Bus
	cancel := b.Subscribe(d)
	defer cancel()
	for _, x := range xs {
		b.Publish(x)
	}
}

// ex is an exchange of session s with the estimates before and after.
func ex(s string, before, after int) *record.Exchange {
	return &record.Exchange{Session: s, Model: "m1", ModelID: "m1", Window: 10_000, MaxOutput: 2_000, Client: "claude-code",
		Protocol: "anthropic", Outcome: record.Rewritten, Status: 200, TokensBefore: before, TokensAfter: after}
}

// TestAggregation: what the overview and session JSON say after a few
// exchanges, computed by hand from the records.
func TestAggregation(t *testing.T) {
	event := ex("h:a", 8000, 5000)
	event.Event = true
	event.Stubs = []record.Stub{{Blob: "abcdefghijklm", Bytes: 9000, Sent: 120}}
	event.CalibratedBefore, event.CalibratedAfter = 9000, 6000
	event.Usage = usage(1000, 3000, 2000)
	client := ex("h:a", 3000, 3000)
	client.Outcome, client.Skipped = record.Bypassed, "client compaction"
	for _, tc := range []struct {
		name string
		xs   []*record.Exchange
		want Overview
	}{
		{
			name: "empty",
			want: Overview{Now: at(12, 0), Sessions: []SessionView{}},
		},
		{
			name: "one session, an event with usage, then a client compaction",
			xs:   []*record.Exchange{ex("h:a", 4000, 4000), event, client},
			want: Overview{
				Now: at(12, 0),
				// spent: (1000×1 + 2000×2 + 3000×0.5)/1e6; saved: 3000 API tokens × 0.5/1e6,
				// then the estimates' 0 tokens of the others.
				Today: Totals{Requests: 3, Rewritten: 2, Events: 1, Stubs: 1, Before: 15000, After: 12000, Saved: 3000,
					SavedUSD: 0.0015, SpentUSD: 0.0065, CacheRead: 3000, CacheWrite: 2000},
				All: Totals{Requests: 3, Rewritten: 2, Events: 1, Stubs: 1, Before: 15000, After: 12000, Saved: 3000,
					SavedUSD: 0.0015, SpentUSD: 0.0065, CacheRead: 3000, CacheWrite: 2000},
				Sessions: []SessionView{{Key: "h:a", Client: "claude-code", Protocol: "anthropic", Model: "m1", ModelID: "m1",
					First: at(12, 0), Last: at(12, 0), Live: true,
					Totals: Totals{Requests: 3, Rewritten: 2, Events: 1, Stubs: 1, Before: 15000, After: 12000, Saved: 3000,
						SavedUSD: 0.0015, SpentUSD: 0.0065, CacheRead: 3000, CacheWrite: 2000},
					LastSeq: 3, LastBefore: 3000, LastAfter: 3000, LastSent: 3000, LastOutcome: record.Bypassed, LastStatus: 200,
					Window: 10_000, Line: 8_000, Full: 0.3}},
			},
		},
		{
			name: "a request without a session key is counted, not listed",
			xs:   []*record.Exchange{ex("h:a", 1000, 500), {Outcome: record.Refused, Status: 413, Model: "unknown"}},
			want: Overview{
				Now:   at(12, 0),
				Today: Totals{Requests: 2, Rewritten: 1, Unlisted: 1, Before: 1000, After: 500, Saved: 500, SavedUSD: 0.00025},
				All:   Totals{Requests: 2, Rewritten: 1, Unlisted: 1, Before: 1000, After: 500, Saved: 500, SavedUSD: 0.00025},
				Sessions: []SessionView{
					{Key: "h:a", Client: "claude-code", Protocol: "anthropic", Model: "m1", ModelID: "m1",
						First: at(12, 0), Last: at(12, 0), Live: true,
						Totals:  Totals{Requests: 1, Rewritten: 1, Before: 1000, After: 500, Saved: 500, SavedUSD: 0.00025},
						LastSeq: 1, LastBefore: 1000, LastAfter: 500, LastSent: 500, LastOutcome: record.Rewritten, LastStatus: 200,
						Window: 10_000, Line: 8_000, Full: 0.05},
				},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := New(Options{Now: newClock(at(12, 0)).Now, Prices: prices})
			feed(d, tc.xs...)
			if diff := cmp.Diff(tc.want, d.Overview(), approx()); diff != "" {
				t.Errorf("overview (-want +got):\n%s", diff)
			}
			// The API serves the same, as JSON.
			var got Overview
			getJSON(t, d.Handler(), "/ctxguard/api/overview", http.StatusOK, &got)
			if diff := cmp.Diff(tc.want, got, approx()); diff != "" {
				t.Errorf("GET overview (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSessionPoints: a session's points in order, with whether their
// record is kept.
func TestSessionPoints(t *testing.T) {
	d := New(Options{Now: newClock(at(9, 0)).Now, Prices: prices})
	e := ex("h:s", 5000, 2000)
	e.Event, e.Compaction = false, "ckey"
	e.Usage = usage(10, 20, 30)
	feed(d, ex("h:s", 1000, 1000), ex("h:other", 1, 1), e)
	var got SessionDetail
	getJSON(t, d.Handler(), "/ctxguard/api/session/h:s", http.StatusOK, &got)
	// Numbered in the session: 1 and 2, whatever came between.
	want := []PointView{
		{Point{N: 1, Seq: 1, Before: 1000, After: 1000, Outcome: record.Rewritten, Status: 200}, true},
		{Point{N: 2, Seq: 3, Before: 5000, After: 2000, Saved: 3000, Event: true, Compaction: true, Outcome: record.Rewritten, Status: 200,
			CacheRead: 20, CacheWrite: 30, SpentUSD: (10*1 + 30*2 + 20*0.5) / 1e6, SavedUSD: 3000 * 0.5 / 1e6}, true},
	}
	if diff := cmp.Diff(want, got.Points, approx()); diff != "" {
		t.Errorf("points (-want +got):\n%s", diff)
	}
	if got.Session.Key != "h:s" || got.Session.Compactions != 1 || got.Session.Events != 1 || got.Dropped != 0 {
		t.Errorf("session %+v, dropped %d", got.Session, got.Dropped)
	}
	getJSON(t, d.Handler(), "/ctxguard/api/session/h:none", http.StatusNotFound, nil)
}

// TestBounds: sessions, points per session, full records and bodies stay
// within their caps, dropping the oldest.
func TestBounds(t *testing.T) {
	const sessions, requests = 3, 5
	d := New(Options{Now: newClock(at(9, 0)).Now, Sessions: sessions, Requests: requests, ShowBodies: true})
	var xs []*record.Exchange
	for i := range 300 {
		x := ex(fmt.Sprintf("h:%d", i%7), 100, 50)
		x.Bodies = &record.Bodies{Before: []byte(fmt.Sprint("before ", i+1)), After: []byte("after")}
		xs = append(xs, x)
	}
	for range 8 {
		xs = append(xs, ex("h:big", 1, 1))
	}
	feed(d, xs...)
	var keys []string
	for _, s := range d.Overview().Sessions {
		keys = append(keys, s.Key)
	}
	// Requests 299 and 300 were sessions 298%7=4 and 299%7=5; then h:big.
	if diff := cmp.Diff([]string{"h:big", "h:5", "h:4"}, keys); diff != "" {
		t.Errorf("sessions kept (-want +got):\n%s", diff)
	}
	v, _ := d.Session("h:big")
	var seqs []uint64
	var ns []int
	for _, p := range v.Points {
		seqs = append(seqs, p.Seq)
		ns = append(ns, p.N)
	}
	if diff := cmp.Diff([]uint64{304, 305, 306, 307, 308}, seqs); diff != "" || v.Dropped != 3 || v.Session.Requests != 8 {
		t.Errorf("h:big points (-want +got):\n%s\ndropped %d, requests %d", diff, v.Dropped, v.Session.Requests)
	}
	// The session's numbers go on past the points dropped.
	if diff := cmp.Diff([]int{4, 5, 6, 7, 8}, ns); diff != "" {
		t.Errorf("h:big numbers (-want +got):\n%s", diff)
	}
	if len(d.recent.buf) != RecentRecords || len(d.bodies.buf) != RecentBodies {
		t.Errorf("%d records, %d bodies kept", len(d.recent.buf), len(d.bodies.buf))
	}
	for _, tc := range []struct {
		seq        uint64
		kept, body bool
	}{
		{1, false, false},
		{308 - RecentRecords, false, false},
		{309 - RecentRecords, true, false},
		{300 - RecentBodies, true, false},
		{301 - RecentBodies, true, true},
		{300, true, true},
		{301, true, false}, // h:big's requests have no bodies
		{308, true, false},
		{309, false, false},
	} {
		r, err := d.Request(tc.seq)
		if (err == nil) != tc.kept {
			t.Errorf("request %d: err %v, want kept %v", tc.seq, err, tc.kept)
			continue
		}
		if err != nil {
			continue
		}
		if (r.Bodies != nil) != tc.body {
			t.Errorf("request %d: bodies %v, want %v", tc.seq, r.Bodies != nil, tc.body)
		}
		if r.Bodies != nil && r.Bodies.Before != fmt.Sprint("before ", tc.seq) {
			t.Errorf("request %d: bodies of %q", tc.seq, r.Bodies.Before)
		}
	}
	// The records kept do not hold bodies (they have their own ring).
	for _, x := range d.recent.buf {
		if x.x.Bodies != nil {
			t.Fatalf("record %d keeps its bodies", x.x.Seq)
		}
	}
}

// TestEvictsLeastRecentlySeen: the session evicted is the one seen
// least recently, not the oldest.
func TestEvictsLeastRecentlySeen(t *testing.T) {
	d := New(Options{Sessions: 3})
	feed(d, ex("h:a", 1, 1), ex("h:b", 1, 1), ex("h:c", 1, 1), ex("h:a", 1, 1), ex("h:d", 1, 1))
	var keys []string
	for _, s := range d.Overview().Sessions {
		keys = append(keys, s.Key)
	}
	if diff := cmp.Diff([]string{"h:d", "h:a", "h:c"}, keys); diff != "" {
		t.Errorf("sessions kept (-want +got):\n%s", diff)
	}
}

// TestNoBodies: without ShowBodies no body is kept.
func TestNoBodies(t *testing.T) {
	d := New(Options{})
	x := ex("h:a", 1, 1)
	x.Bodies = &record.Bodies{Before: []byte("secret"), After: []byte("secret")}
	feed(d, x)
	r, err := d.Request(1)
	if err != nil || r.Bodies != nil || len(d.bodies.buf) != 0 {
		t.Errorf("request 1: %v, bodies %v, %d kept", err, r.Bodies, len(d.bodies.buf))
	}
}

// TestToday: today's totals start again at midnight by the clock; the
// sessions' and the totals since start do not.
func TestToday(t *testing.T) {
	clk := newClock(at(23, 50))
	d := New(Options{Now: clk.Now})
	feed(d, ex("h:a", 300, 100), ex("h:a", 300, 200))
	if got := d.Overview().Today.Saved; got != 300 {
		t.Fatalf("saved today %d, want 300", got)
	}
	clk.Advance(15 * time.Minute) // 00:05 the next day
	o := d.Overview()
	if diff := cmp.Diff(Totals{}, o.Today); diff != "" {
		t.Errorf("today after midnight (-want +got):\n%s", diff)
	}
	if o.All.Saved != 300 || o.Sessions[0].Saved != 300 {
		t.Errorf("since start %d, session %d; want 300", o.All.Saved, o.Sessions[0].Saved)
	}
	feed(d, ex("h:a", 50, 10))
	o = d.Overview()
	if o.Today.Requests != 1 || o.Today.Saved != 40 || o.All.Requests != 3 {
		t.Errorf("today %+v, since start %d requests", o.Today, o.All.Requests)
	}
	// Not live any more an hour later.
	clk.Advance(time.Hour)
	if d.Overview().Sessions[0].Live {
		t.Error("session still live an hour after its last request")
	}
}

// TestRequestDetail: a request's passes, stubs with blob links, summary,
// usage and durations.
func TestRequestDetail(t *testing.T) {
	for _, tc := range []struct {
		name    string
		summary func(string) (string, error)
		wantSum string
		wantErr string
	}{
		{"summary", func(k string) (string, error) { return "summary of " + k, nil }, "summary of ck1", ""},
		{"summary gone", func(string) (string, error) { return "", errors.New("no such compaction") }, "", "no such compaction"},
		{"no summary func", nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := New(Options{Prices: prices, Summary: tc.summary, BlobURL: func(id string) string { return "/ctxguard/v1/blobs/" + id }})
			x := ex("h:a", 9000, 3000)
			x.Passes = []record.Pass{{Name: "clear", Edits: 2, Saved: 20000}, {Name: "compact", Edits: 1, Saved: 4000}}
			x.Stubs = []record.Stub{{Blob: "aaaaaaaaaaaaa", Bytes: 12000, Sent: 90, Head: []byte(`"[cleared \u2014 blob aaaaaaaaaaaaa]"`)}, {Blob: "bbbbbbbbbbbbb", Bytes: 8000, Sent: 80}}
			x.Compaction, x.Event = "ck1", true
			x.Total, x.FirstByte = 1500*time.Millisecond, 250*time.Microsecond
			x.Usage = usage(5, 6, 7)
			x.Error = "internal detail for the log"
			feed(d, x)
			var got RequestDetail
			getJSON(t, d.Handler(), "/ctxguard/api/request/1", http.StatusOK, &got)
			want := RequestDetail{Seq: 1, Session: "h:a", N: 1, Protocol: "anthropic", Client: "claude-code", Model: "m1", ModelID: "m1",
				Window: 10_000, MaxOutput: 2_000, Outcome: record.Rewritten, Passes: x.Passes, Notes: []string{}, Event: true, Compaction: "ck1",
				Summary: tc.wantSum, SummaryError: tc.wantErr,
				Stubs: []StubView{ // the head decoded; the bytes stay with the record
					{record.Stub{Blob: "aaaaaaaaaaaaa", Bytes: 12000, Sent: 90}, "[cleared \u2014 blob aaaaaaaaaaaaa]", "/ctxguard/v1/blobs/aaaaaaaaaaaaa"},
					{record.Stub{Blob: "bbbbbbbbbbbbb", Bytes: 8000, Sent: 80}, "", "/ctxguard/v1/blobs/bbbbbbbbbbbbb"}},
				Before: 9000, After: 3000, Saved: 6000, FirstByteMS: 0.25, TotalMS: 1500, Status: 200,
				Usage: &UsageView{5, 6, 7, 100}, SpentUSD: (5 + 7*2 + 6*0.5) / 1e6, SavedUSD: 6000 * 0.5 / 1e6}
			if diff := cmp.Diff(want, got, approx()); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
	d := New(Options{})
	getJSON(t, d.Handler(), "/ctxguard/api/request/7", http.StatusNotFound, nil)
	getJSON(t, d.Handler(), "/ctxguard/api/request/x", http.StatusBadRequest, nil)
}

// TestConfigView: the YAML as given, the registry entry and price of
// each model seen, and the summarizer's breakers as they are now.
func TestConfigView(t *testing.T) {
	until := time.Date(2026, 11, 3, 9, 0, 30, 0, time.UTC)
	breakers := []BreakerView{{Dependency: "summarizer", Upstream: "https://api.anthropic.com", Model: "claude-haiku-4-5",
		State: "open", Since: until.Add(-30 * time.Second), Fails: 1, Error: "status 500", Until: &until, Trips: 1, Refused: 4}}
	d := New(Options{Prices: prices, Config: func() []byte { return []byte("listen: 127.0.0.1:8787\n") },
		Model: func(id string) model.Info {
			return model.Info{ID: "id-" + id, Provider: model.Anthropic, Window: 1000, MaxOutput: 100, Known: id == "m1"}
		},
		Breakers: func() []BreakerView { return breakers }})
	x := ex("h:a", 1, 1)
	y := ex("h:a", 1, 1)
	y.Model, y.ModelID = "m2-2030", ""
	feed(d, x, y, x)
	var got ConfigView
	getJSON(t, d.Handler(), "/ctxguard/api/config", http.StatusOK, &got)
	p := prices["m1"]
	want := ConfigView{YAML: "listen: 127.0.0.1:8787\n", Models: []ModelView{
		{Name: "m1", ID: "id-m1", Provider: "anthropic", Window: 1000, MaxOutput: 100, Known: true, Price: &p},
		{Name: "m2-2030", ID: "id-m2-2030", Provider: "anthropic", Window: 1000, MaxOutput: 100},
	}, Breakers: breakers}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	breakers = nil
	getJSON(t, d.Handler(), "/ctxguard/api/config", http.StatusOK, &got)
	if got.Breakers == nil || len(got.Breakers) != 0 {
		t.Errorf("no breaker: %#v, want an empty list", got.Breakers)
	}
}

// TestHeaders: every answer carries the security headers; API answers
// are not cached; pages and assets are served, unknown paths are JSON 404s.
func TestHeaders(t *testing.T) {
	d := New(Options{})
	feed(d, ex("h:a", 1, 1))
	h := d.Handler()
	for _, tc := range []struct {
		path, ctype string
		code        int
		noStore     bool
	}{
		{"/ctxguard/", "text/html; charset=utf-8", 200, false},
		{"/ctxguard/session?key=h:a", "text/html; charset=utf-8", 200, false},
		{"/ctxguard/request?seq=1", "text/html; charset=utf-8", 200, false},
		{"/ctxguard/config", "text/html; charset=utf-8", 200, false},
		{"/ctxguard/static/app.js", "text/javascript; charset=utf-8", 200, false},
		{"/ctxguard/static/app.css", "text/css; charset=utf-8", 200, false},
		{"/ctxguard/static/index.html", "application/json", 404, true},
		{"/ctxguard/api/overview", "application/json", 200, true},
		{"/ctxguard/api/session/h:a", "application/json", 200, true},
		{"/ctxguard/api/session/h:a/chart.svg", "image/svg+xml", 200, true},
		{"/ctxguard/api/request/1", "application/json", 200, true},
		{"/ctxguard/api/config", "application/json", 200, true},
		{"/ctxguard/nothing", "application/json", 404, true},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", tc.path, nil))
		res := w.Result()
		if res.StatusCode != tc.code || res.Header.Get("Content-Type") != tc.ctype {
			t.Errorf("%s: %d %s, want %d %s", tc.path, res.StatusCode, res.Header.Get("Content-Type"), tc.code, tc.ctype)
		}
		if got := res.Header.Get("Content-Security-Policy"); !strings.HasPrefix(got, "default-src 'self'") {
			t.Errorf("%s: CSP %q", tc.path, got)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no nosniff", tc.path)
		}
		if (res.Header.Get("Cache-Control") == "no-store") != tc.noStore {
			t.Errorf("%s: Cache-Control %q", tc.path, res.Header.Get("Cache-Control"))
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/ctxguard/api/overview", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST overview: %d", w.Code)
	}
}

// TestEscaping: a session key, model name and stub text that are HTML
// reach the API only as JSON strings (with <, > escaped), and the chart
// only as escaped text; the pages never hold data.
func TestEscaping(t *testing.T) {
	const evil = `<img src=x onerror=alert(1)>`
	d := New(Options{BlobURL: func(id string) string { return "/ctxguard/v1/blobs/" + id }})
	x := ex(evil, 100, 50)
	x.Model = evil
	x.Client = evil
	x.Stubs = []record.Stub{{Blob: "aaaaaaaaaaaaa", Head: []byte(strconv.Quote(evil))}}
	x.Notes = []string{evil}
	feed(d, x)
	h := d.Handler()
	key := url.PathEscape(evil)
	for _, path := range []string{"/ctxguard/api/overview", "/ctxguard/api/session/" + key, "/ctxguard/api/session/" + key + "/chart.svg",
		"/ctxguard/api/request/1", "/ctxguard/api/config", "/ctxguard/", "/ctxguard/session?key=" + url.QueryEscape(evil)} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		if w.Code != http.StatusOK {
			t.Errorf("%s: %d %s", path, w.Code, w.Body)
			continue
		}
		if strings.Contains(w.Body.String(), "<img") {
			t.Errorf("%s holds the key unescaped:\n%s", path, w.Body)
		}
	}
	var o Overview
	getJSON(t, h, "/ctxguard/api/overview", http.StatusOK, &o)
	if len(o.Sessions) != 1 || o.Sessions[0].Key != evil || o.Sessions[0].Model != evil {
		t.Errorf("the key or model did not round-trip: %+v", o.Sessions)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/ctxguard/api/session/"+key+"/chart.svg", nil))
	if !strings.Contains(w.Body.String(), "&lt;img src=x onerror=alert(1)&gt;") {
		t.Errorf("the chart does not show the key escaped:\n%s", w.Body)
	}
}

// getJSON GETs path from h, checks the status and decodes the body into v
// (when not nil).
func getJSON(t *testing.T, h http.Handler, path string, code int, v any) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
	if w.Code != code {
		t.Fatalf("GET %s: %d, want %d: %s", path, w.Code, code, w.Body)
	}
	if v == nil {
		var e struct{ Error struct{ Message, ID string } }
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Message == "" || e.Error.ID == "" {
			t.Errorf("GET %s: error body %q", path, w.Body)
		}
		return
	}
	b, _ := io.ReadAll(w.Body)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}
