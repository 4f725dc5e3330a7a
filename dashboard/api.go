package dashboard

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/ctxguard/ctxguard/dashboard/price"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
)

// Prefix is the path the handler serves under. It expects whole paths
// (mount it at Prefix without stripping it).
const Prefix = "/ctxguard/"

//go:embed ui
var ui embed.FS

// Handler serves the dashboard:
//
//	GET /ctxguard/                          the overview page
//	GET /ctxguard/session?key=K             a session's page
//	GET /ctxguard/request?seq=N             a request's page
//	GET /ctxguard/config                    the configuration page
//	GET /ctxguard/static/...                the pages' script and styles
//	GET /ctxguard/api/overview              sessions and today's totals (JSON)
//	GET /ctxguard/api/session/{key}         a session's points (JSON)
//	GET /ctxguard/api/session/{key}/chart.svg[?theme=dark]
//	GET /ctxguard/api/request/{seq}         a request's record (JSON)
//	GET /ctxguard/api/config                configuration and models (JSON)
//	GET /ctxguard/api/events                live notes (SSE)
//
// Access control is the caller's (ctxguard's local endpoints apply
// local.access and the Host check before it). Every answer forbids
// framing and other origins' resources (Content-Security-Policy) and
// sniffing; API answers are not cached. Errors are JSON
// {"error": message} with their status.
func (d *Dashboard) Handler() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, h func(http.ResponseWriter, *http.Request) error) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := h(w, r); err != nil {
				protocol.Write(r.Context(), w, nil, nil, err)
			}
		})
	}
	d.Register(handle)
	handle("/ctxguard/", func(w http.ResponseWriter, _ *http.Request) error {
		securityHeaders(w.Header())
		return errNotFound
	})
	return mux
}

// Register adds the dashboard's pages and API (see Handler) to a server
// through handle, which serves pattern (http.ServeMux syntax) with h and
// renders the errors h returns (protocol.Write: a JSON body whose
// error.message the pages show). Only the dashboard's own paths are
// registered; what else lives under /ctxguard/ is the caller's.
func (d *Dashboard) Register(handle func(pattern string, h func(http.ResponseWriter, *http.Request) error)) {
	reg := func(pattern string, h func(http.ResponseWriter, *http.Request) error) {
		handle(pattern, func(w http.ResponseWriter, r *http.Request) error {
			securityHeaders(w.Header())
			return h(w, r)
		})
	}
	static, _ := fs.Sub(ui, "ui")
	page := func(name string) func(http.ResponseWriter, *http.Request) error {
		return func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Cache-Control", "no-cache")
			http.ServeFileFS(w, r, static, name)
			return nil
		}
	}
	// One page: the script draws the one its path names.
	for _, p := range []string{"GET /ctxguard/{$}", "GET /ctxguard/session", "GET /ctxguard/request", "GET /ctxguard/config"} {
		reg(p, page("page.html"))
	}
	reg("GET /ctxguard/static/{file}", func(w http.ResponseWriter, r *http.Request) error {
		f := r.PathValue("file")
		if f != "app.js" && f != "app.css" {
			return errNotFound
		}
		return page(f)(w, r)
	})
	reg("GET /ctxguard/api/overview", d.serveJSON(func(r *http.Request) (any, error) { return d.Overview(), nil }))
	reg("GET /ctxguard/api/session/{key}", d.serveJSON(func(r *http.Request) (any, error) {
		v, ok := d.Session(r.PathValue("key"))
		if !ok {
			return nil, errNoSession
		}
		return v, nil
	}))
	reg("GET /ctxguard/api/session/{key}/chart.svg", d.serveChart)
	reg("GET /ctxguard/api/request/{seq}", d.serveJSON(func(r *http.Request) (any, error) {
		seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
		if err != nil {
			return nil, protocol.Errorf(http.StatusBadRequest, protocol.InvalidRequest, nil, "the request number must be a positive integer")
		}
		return d.Request(seq)
	}))
	reg("GET /ctxguard/api/config", d.serveJSON(func(r *http.Request) (any, error) { return d.ConfigView(), nil }))
	reg("GET /ctxguard/api/events", d.serveEvents)
	reg("/ctxguard/api/", func(w http.ResponseWriter, r *http.Request) error {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return &protocol.Error{Status: http.StatusMethodNotAllowed, Kind: protocol.InvalidRequest,
				Message: "the dashboard is read-only", Header: http.Header{"Allow": {"GET, HEAD"}}}
		}
		return errNotFound
	})
}

// csp allows the page's own script, styles, images and API, nothing
// inline and no framing.
const csp = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// securityHeaders sets the headers every answer of the dashboard
// carries; pages and assets replace Cache-Control.
func securityHeaders(hd http.Header) {
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Security-Policy", csp)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
}

var (
	errNotFound  = protocol.Errorf(http.StatusNotFound, protocol.NotFound, nil, "no such dashboard page")
	errNoSession = protocol.Errorf(http.StatusNotFound, protocol.NotFound, nil, "no such session (it may have been evicted: dashboard.sessions caps them)")
	errBusy      = protocol.Errorf(http.StatusServiceUnavailable, protocol.Overloaded, nil, "too many live event streams; poll /ctxguard/api/overview instead")
)

func (d *Dashboard) serveJSON(f func(*http.Request) (any, error)) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		v, err := f(r)
		if err != nil {
			return err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		_, _ = w.Write(b)
		return nil
	}
}

// SessionView is a session's summary, as the overview lists it.
type SessionView struct {
	Key      string    `json:"key"`
	Client   string    `json:"client,omitempty"`
	Protocol string    `json:"protocol,omitempty"`
	Model    string    `json:"model,omitempty"`
	ModelID  string    `json:"model_id,omitempty"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	Live     bool      `json:"live"`
	Totals
	// LastBefore and LastAfter are the last request's estimates (in a
	// dry run, LastAfter is what would have been sent); LastSent is what
	// the gauge shows: the API's tokens of the last prompt sent when
	// known, else the estimate.
	LastSeq     uint64         `json:"last_seq"`
	LastBefore  int            `json:"last_before"`
	LastAfter   int            `json:"last_after"`
	LastSent    int            `json:"last_sent"`
	LastOutcome record.Outcome `json:"last_outcome"`
	LastStatus  int            `json:"last_status"`
	// Window is the model's context window; Full is LastSent / Window
	// (0 when the window is unknown). Line is the overflow line: the
	// window less the model's maximum output (0 when unknown).
	Window int     `json:"window"`
	Line   int     `json:"overflow_line"`
	Full   float64 `json:"full"`
	// DryRun says the session's last request was of a dry run: its
	// figures after are what would have been sent.
	DryRun bool `json:"dry_run,omitempty"`
}

// Overview is the overview page's data.
type Overview struct {
	Now time.Time `json:"now"`
	// Today sums today's requests (since local midnight) of every
	// process on the store (Options.Store); TodayError says why the store
	// could not be used for them, the last time it was tried.
	Today      Totals        `json:"today"`
	TodayError string        `json:"today_error,omitempty"`
	All        Totals        `json:"since_start"`
	ShowBodies bool          `json:"show_bodies"`
	Sessions   []SessionView `json:"sessions"` // the most recently seen first
}

// Overview returns the overview. With a store, it reads the other
// processes' totals of today when they were not read within a few
// seconds.
func (d *Dashboard) Overview() Overview {
	now := d.o.Now()
	d.mu.Lock()
	d.rollDay(now)
	d.mu.Unlock()
	d.refreshOthers(context.Background(), now)
	d.mu.Lock()
	defer d.mu.Unlock()
	o := Overview{Now: now, Today: d.today.plus(d.othersLocked()), All: d.all, ShowBodies: d.o.ShowBodies, Sessions: []SessionView{}}
	if err := d.days.err; err != nil {
		o.TodayError = err.Error()
	}
	ss := make([]*session, 0, len(d.sessions))
	for _, s := range d.sessions {
		ss = append(ss, s)
	}
	slices.SortFunc(ss, func(a, b *session) int { return cmp.Compare(b.seen, a.seen) })
	for _, s := range ss {
		o.Sessions = append(o.Sessions, s.view(now))
	}
	return o
}

func (s *session) view(now time.Time) SessionView {
	v := SessionView{Key: s.key, Client: s.client, Protocol: s.protocol, Model: s.model, ModelID: s.modelID,
		First: s.first, Last: s.last, Live: now.Sub(s.last) < liveFor, Totals: s.totals,
		LastOutcome: s.lastOutcome, LastStatus: s.lastStatus, Window: s.window, Line: s.line()}
	if p, ok := s.points.last(); ok {
		v.LastSeq, v.LastBefore, v.LastAfter, v.LastSent, v.DryRun = p.Seq, p.Before, p.shown(), p.After, p.DryRun
		if p.CalAfter > 0 {
			v.LastSent = p.CalAfter
		}
	}
	if v.Window > 0 {
		v.Full = float64(v.LastSent) / float64(v.Window)
	}
	return v
}

// SessionDetail is a session's page data.
type SessionDetail struct {
	Session SessionView `json:"session"`
	// Points are its requests, oldest first; Dropped counts the older
	// ones no longer kept (dashboard.requests).
	Points  []PointView `json:"points"`
	Dropped uint64      `json:"dropped"`
}

// PointView is a Point with whether its full record is still kept.
type PointView struct {
	Point
	Detail bool `json:"detail"`
}

// Session returns a session's data, false if it is not kept.
func (d *Dashboard) Session(key string) (SessionDetail, bool) {
	now := d.o.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.sessions[key]
	if !ok {
		return SessionDetail{}, false
	}
	full := map[uint64]bool{}
	d.recent.each(func(k kept) bool { full[k.x.Seq] = true; return true })
	v := SessionDetail{Session: s.view(now), Points: make([]PointView, 0, len(s.points.buf)), Dropped: s.points.dropped()}
	s.points.each(func(p Point) bool {
		v.Points = append(v.Points, PointView{p, full[p.Seq]})
		return true
	})
	return v, true
}

// RequestDetail is a request's page data: its record, less what is only
// for the log, with links and the compaction's summary.
type RequestDetail struct {
	Seq   uint64    `json:"seq"`
	Start time.Time `json:"start"`
	// Session is the session it is listed under ("" for none), N its
	// number there.
	Session  string `json:"session,omitempty"`
	N        int    `json:"n,omitempty"`
	Protocol string `json:"protocol,omitempty"`
	Route    string `json:"route,omitempty"`
	Path     string `json:"path,omitempty"`
	Client   string `json:"client,omitempty"`
	Model    string `json:"model,omitempty"`
	ModelID  string `json:"model_id,omitempty"`
	Window   int    `json:"window,omitempty"`
	// MaxOutput is the model's output limit the rewrite used.
	MaxOutput int            `json:"max_output,omitempty"`
	Outcome   record.Outcome `json:"outcome"`
	Skipped   string         `json:"skipped,omitempty"`
	ErrorID   string         `json:"error_id,omitempty"`
	// Reason says why an overflow recovery failed (record.Exchange.Reason).
	Reason string        `json:"reason,omitempty"`
	Passes []record.Pass `json:"passes"`
	Notes  []string      `json:"notes"`
	Event  bool          `json:"event"`
	// Cause says why the event happened (record.Exchange.Cause).
	Cause      string `json:"cause,omitempty"`
	Compaction string `json:"compaction,omitempty"`
	// Summary is the compaction's summary text; SummaryError says why it
	// could not be read.
	Summary      string     `json:"summary,omitempty"`
	SummaryError string     `json:"summary_error,omitempty"`
	Stubs        []StubView `json:"stubs"`
	Before       int        `json:"tokens_before"`
	After        int        `json:"tokens_after"`
	Added        int        `json:"tokens_added"`
	Saved        int        `json:"tokens_saved"`
	DryRun       bool       `json:"dry_run,omitempty"`
	WouldSend    int        `json:"would_send,omitempty"`
	WouldSave    int        `json:"tokens_would_save,omitempty"`
	CalBefore    int        `json:"calibrated_before"`
	CalAfter     int        `json:"calibrated_after"`
	// Durations in milliseconds.
	ReadMS      float64    `json:"read_ms"`
	RewriteMS   float64    `json:"rewrite_ms"`
	FirstByteMS float64    `json:"first_byte_ms"`
	TotalMS     float64    `json:"total_ms"`
	Status      int        `json:"status"`
	Usage       *UsageView `json:"usage,omitempty"`
	BytesIn     int64      `json:"bytes_in"`
	BytesOut    int64      `json:"bytes_out"`
	BytesResp   int64      `json:"bytes_resp"`
	SpentUSD    float64    `json:"spent_usd"`
	SavedUSD    float64    `json:"saved_usd"`
	AddedUSD    float64    `json:"added_usd"`
	// Cold: the request arrived after its session's prompt cache
	// expired, so its savings are priced at the cache-write rate
	// (Point.Cold).
	Cold bool `json:"cold,omitempty"`
	// Bodies are the request's bodies before and after, only with
	// dashboard.show_bodies and for the last RecentBodies requests.
	Bodies *BodiesView `json:"bodies,omitempty"`
}

// StubView is a stub with the link to its blob.
type StubView struct {
	record.Stub
	Text string `json:"text,omitempty"` // its head, decoded
	URL  string `json:"url,omitempty"`
}

// UsageView is the usage the API reported.
type UsageView struct {
	Input      int `json:"input"`
	CacheRead  int `json:"cache_read"`
	CacheWrite int `json:"cache_write"`
	Output     int `json:"output"`
}

// BodiesView holds a request's bodies as text.
type BodiesView struct {
	Before string `json:"before"`
	After  string `json:"after"`
}

// Request returns a kept request's data.
func (d *Dashboard) Request(seq uint64) (*RequestDetail, error) {
	d.mu.Lock()
	var x *record.Exchange
	n, cold := 0, false
	d.recent.each(func(k kept) bool {
		if k.x.Seq == seq {
			x, n, cold = k.x, k.n, k.cold
		}
		return x == nil
	})
	var b *record.Bodies
	d.bodies.each(func(v bodies) bool {
		if v.seq == seq {
			b = v.b
		}
		return b == nil
	})
	var p Point
	if x != nil {
		p = d.point(x, cold)
	}
	d.mu.Unlock()
	if x == nil {
		return nil, protocol.Errorf(http.StatusNotFound, protocol.NotFound, nil, "request %d is not kept (the dashboard keeps the last %d in full)", seq, RecentRecords)
	}
	v := &RequestDetail{Seq: x.Seq, Start: x.Start, N: n, Protocol: x.Protocol, Route: x.Route, Path: x.Path,
		Client: x.Client, Model: x.Model, ModelID: x.ModelID, Window: x.Window, MaxOutput: x.MaxOutput,
		Outcome: x.Outcome, Skipped: x.Skipped, ErrorID: x.ErrorID, Reason: x.Reason,
		Passes: nonNil(x.Passes), Notes: nonNil(x.Notes), Event: x.Event, Cause: x.Cause, Compaction: x.Compaction, Stubs: []StubView{},
		Before: x.TokensBefore, After: x.TokensAfter, Added: p.Added, Saved: p.Saved,
		DryRun: p.DryRun, WouldSend: p.WouldSend, WouldSave: p.WouldSave,
		CalBefore: x.CalibratedBefore, CalAfter: x.CalibratedAfter,
		ReadMS: ms(x.Read), RewriteMS: ms(x.Rewrite), FirstByteMS: ms(x.FirstByte), TotalMS: ms(x.Total),
		Status: x.Status, BytesIn: x.BytesIn, BytesOut: x.BytesOut, BytesResp: x.BytesResp,
		SpentUSD: p.SpentUSD, SavedUSD: p.SavedUSD, AddedUSD: p.AddedUSD, Cold: p.Cold}
	if n > 0 {
		v.Session = x.Session
	}
	for _, s := range x.Stubs {
		sv := StubView{Stub: s, Text: s.Text()}
		if d.o.BlobURL != nil {
			sv.URL = d.o.BlobURL(s.Blob)
		}
		v.Stubs = append(v.Stubs, sv)
	}
	if u := x.Usage; u != nil {
		v.Usage = &UsageView{u.Input, u.CacheRead, u.CacheWrite, u.Output}
	}
	if x.Compaction != "" && d.o.Summary != nil {
		// Outside the lock: the summary is read from the store.
		s, err := d.o.Summary(x.Compaction)
		if err != nil {
			v.SummaryError = err.Error()
		}
		v.Summary = s
	}
	if b != nil {
		v.Bodies = &BodiesView{string(b.Before), string(b.After)}
	}
	return v, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ConfigView is the configuration page's data.
type ConfigView struct {
	YAML     string        `json:"yaml"`
	Models   []ModelView   `json:"models"`
	Breakers []BreakerView `json:"breakers"`
}

// BreakerView is the state of one circuit breaker: of the summarizer's
// calls to one upstream and model.
type BreakerView struct {
	Dependency string `json:"dependency"` // "summarizer"
	Upstream   string `json:"upstream"`
	Model      string `json:"model"`
	// State is "closed" (calls are made), "open" (calls fail at once
	// until Until) or "probing" (one call checks whether it is back).
	State string    `json:"state"`
	Since time.Time `json:"since"`
	// Fails counts the failures in a row; Error is the last one.
	Fails int        `json:"fails"`
	Error string     `json:"error,omitempty"`
	Until *time.Time `json:"until,omitempty"`
	// Trips counts the times it opened; Refused the calls it refused.
	Trips   uint64 `json:"trips"`
	Refused uint64 `json:"refused"`
}

// ModelView is the registry entry and price of a model seen.
type ModelView struct {
	Name       string       `json:"name"` // as requests named it (or its canonical id)
	ID         string       `json:"id"`
	Provider   string       `json:"provider"`
	Window     int          `json:"window"`
	LongWindow int          `json:"long_window,omitempty"`
	MaxOutput  int          `json:"max_output"`
	Binding    bool         `json:"binding,omitempty"`
	Known      bool         `json:"known"`
	Price      *price.Price `json:"price,omitempty"`
}

// ConfigView returns the configuration and the models seen.
func (d *Dashboard) ConfigView() ConfigView {
	d.mu.Lock()
	names := make([]string, 0, len(d.models))
	for m := range d.models {
		names = append(names, m)
	}
	d.mu.Unlock()
	slices.Sort(names)
	v := ConfigView{Models: []ModelView{}, Breakers: []BreakerView{}}
	if d.o.Config != nil {
		v.YAML = string(d.o.Config())
	}
	if d.o.Breakers != nil {
		v.Breakers = append(v.Breakers, d.o.Breakers()...)
	}
	for _, n := range names {
		m := ModelView{Name: n, ID: n}
		if d.o.Model != nil {
			i := d.o.Model(n)
			m = ModelView{Name: n, ID: i.ID, Provider: string(i.Provider), Window: i.Window, LongWindow: i.LongWindow,
				MaxOutput: i.MaxOutput, Binding: i.Binding, Known: i.Known}
		}
		if p, _, ok := d.o.Prices.Lookup(n); ok {
			m.Price = &p
		}
		v.Models = append(v.Models, m)
	}
	return v
}
