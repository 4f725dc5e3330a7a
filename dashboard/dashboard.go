// Package dashboard is ctxguard's live dashboard: a record.Observer that
// keeps a bounded summary of the exchanges it sees, and an http.Handler
// that serves it under /ctxguard/ as a JSON API, a live event stream
// (SSE) and four embedded pages (overview, session, request,
// configuration) written in plain HTML, CSS and JavaScript.
//
// Memory is bounded whatever arrives: at most Options.Sessions sessions
// (the least recently seen go first), at most Options.Requests compact
// points per session, full records (with their stubs) for the last
// RecentRecords exchanges overall, and bodies (only with ShowBodies) for
// the last RecentBodies.
//
// Sessions. A request is listed under its session when it has a session
// key and ctxguard read its body (it estimated the prompt): bypassed and
// unreadable requests, and those refused before they were read, are
// counted in the totals (Totals.Unlisted) and listed nowhere. A session's
// requests are numbered from 1 in the order they arrived (Point.N), on
// the pages and on its chart alike.
//
// Savings. The tokens saved are what ctxguard's rules took out of the
// prompts (record.Exchange.Saved: net of the stubs and summaries put in
// their place). What a rule adds on purpose (the thinking binding's
// drop_block setting, about 17 tokens a request) is counted apart
// (Totals.Added), never as a negative saving; in a dry run the would-be
// figures are counted apart too (Totals.WouldSave), since nothing was
// saved.
//
// Money. Dollars come from a price.Table (USD per million tokens).
// A request's cost is the prompt the API reported in its usage, each part
// at its rate (uncached input at the input price, cache writes at the
// cache-write price, cache reads at the cache-read price); a request
// without usage costs nothing here. The tokens saved are priced on the
// cache's clock: at the cache-read rate when the request arrived within
// its cache lifetime of its session's previous request, since most of
// what ctxguard removes is old history that the prompt cache would have
// served; at the cache-write rate when it arrived later (Point.Cold),
// since the cache had expired and the client's prompt would have been
// written again in full. Which it was is the engine's decision on
// arrival (record.Exchange.Cold), made once for every observer. A
// request found cold whose usage still shows cache reads found the cache
// warm (the provider kept it longer), and is priced as warm. This stays a lower bound of the money saved
// (edit events, which cost cache writes, are shown but not subtracted).
// What was added on purpose is priced the same way, apart. Output
// tokens are not counted: they do not change.
//
// Today. "Today" runs from local midnight (in the clock's location). With
// Options.Store its totals go through the store, so that they survive a
// restart and add up over the instances sharing a store (see dayKey).
//
// The dashboard reads only records: it never sees headers, so API keys
// cannot reach it; bodies are shown only when the configuration asks.
package dashboard

import (
	"log/slog"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/dashboard/price"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
)

// Bounds of what the dashboard keeps besides the configured caps.
const (
	// RecentRecords is how many full records (passes, stubs, notes) are
	// kept, the newest overall; older requests show their point only.
	RecentRecords = 256
	// RecentBodies is how many requests' bodies are kept with ShowBodies.
	RecentBodies = 16
	// maxModels bounds the model names remembered for the configuration
	// page (names come from clients).
	maxModels = 64
	// liveFor is how long after its last request a session counts as live.
	liveFor = 10 * time.Minute
)

// Options configure a Dashboard. Every func may be nil.
type Options struct {
	// Now is the clock; "today" starts at midnight in the location of
	// the times it returns. Default time.Now.
	Now func() time.Time
	// ShowBodies keeps the last RecentBodies requests' bodies (from
	// record.Exchange.Bodies) for the request page.
	ShowBodies bool
	// Sessions caps the sessions kept (default 200); Requests the points
	// kept per session (default 2000).
	Sessions, Requests int
	// Config returns the effective configuration as YAML (secrets
	// redacted), for the configuration page.
	Config func() []byte
	// Model returns the registry entry of a model id.
	Model func(id string) model.Info
	// Summary returns the text of the compaction stored under key (a
	// record's Compaction).
	Summary func(key string) (string, error)
	// BlobURL returns the link to a stub's blob.
	BlobURL func(id string) string
	// Breakers returns the state of ctxguard's circuit breakers (the
	// summarizer's, one per upstream and model), for the configuration
	// page.
	Breakers func() []BreakerView
	// Prices turn tokens into dollars; default price.Default().
	Prices price.Table
	// Store, if set, keeps today's totals, so that they survive a
	// restart and add up over the instances that share the store. Nil:
	// in memory only.
	Store store.Store
	// Log receives the store's failures (the overview shows them too);
	// nil discards them.
	Log *slog.Logger
}

// Dashboard keeps what the pages show. It is safe for concurrent use:
// Observe may run on many request goroutines while Handler serves.
type Dashboard struct {
	o Options

	mu       sync.Mutex
	sessions map[string]*session
	tick     uint64 // recency clock for sessions
	recent   ring[kept]
	bodies   ring[bodies]
	day      date
	today    Totals // this process's, since midnight
	all      Totals
	days     days            // today's totals in the store
	models   map[string]bool // model ids seen, for the configuration page
	prices   map[string]priced
	subs     subscribers
}

// kept is a full record the dashboard keeps, with its number in its
// session (0: listed in none).
type kept struct {
	x    *record.Exchange
	n    int
	cold bool // Point.Cold
}

// New returns a Dashboard with o's defaults filled in.
func New(o Options) *Dashboard {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sessions < 1 {
		o.Sessions = 200
	}
	if o.Requests < 1 {
		o.Requests = 2000
	}
	if o.Prices == nil {
		o.Prices = price.Default()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	d := &Dashboard{o: o, sessions: map[string]*session{}, models: map[string]bool{}, prices: map[string]priced{}}
	d.recent.max = RecentRecords
	d.bodies.max = RecentBodies
	d.subs.init()
	d.day = dayOf(o.Now())
	return d
}

// Totals sums requests (today's, a session's, or all since start).
type Totals struct {
	Requests  int `json:"requests"`
	Rewritten int `json:"rewritten"`
	// Unlisted counts the requests listed in no session: bypassed,
	// unreadable, or refused before ctxguard read them.
	Unlisted int `json:"unlisted"`
	// DryRun counts the requests of a dry run (nothing was changed).
	DryRun int `json:"dry_run"`
	// Events and Compactions count the edit events and compactions sent
	// (a dry run's would-be ones are not).
	Events      int `json:"events"`
	Compactions int `json:"compactions"`
	Stubs       int `json:"stubs"`
	// Before and After are the prompts' estimates as the clients sent
	// them and as ctxguard sent them.
	Before int `json:"tokens_before"`
	After  int `json:"tokens_after"`
	// Saved is what the rules took out (record.Exchange.Saved); Added
	// what they added on purpose (settings the API needs), shown apart;
	// WouldSave what they would have taken out in a dry run.
	Saved     int `json:"tokens_saved"`
	Added     int `json:"tokens_added"`
	WouldSave int `json:"tokens_would_save"`
	// Dollars: saved and added at cache-read prices (see the package
	// doc), would-be savings alike, and spent as the API billed.
	SavedUSD     float64 `json:"saved_usd"`
	AddedUSD     float64 `json:"added_usd"`
	WouldSaveUSD float64 `json:"would_save_usd"`
	SpentUSD     float64 `json:"spent_usd"`
	CacheRead    int     `json:"cache_read"`
	CacheWrite   int     `json:"cache_write"`
}

func (t *Totals) add(p *Point) {
	t.Requests++
	if p.Outcome == record.Rewritten || p.Outcome == record.Recovered {
		t.Rewritten++
	}
	if p.N == 0 {
		t.Unlisted++
	}
	if p.DryRun {
		t.DryRun++
	}
	if p.Event && !p.DryRun { // a dry run's would be: its chart shows them
		t.Events++
	}
	if p.Compaction && !p.DryRun {
		t.Compactions++
	}
	t.Stubs += p.Stubs
	t.Before += p.Before
	t.After += p.After
	t.Saved += p.Saved
	t.Added += p.Added
	t.WouldSave += p.WouldSave
	t.SavedUSD += p.SavedUSD
	t.AddedUSD += p.AddedUSD
	t.WouldSaveUSD += p.WouldSaveUSD
	t.SpentUSD += p.SpentUSD
	t.CacheRead += p.CacheRead
	t.CacheWrite += p.CacheWrite
}

// plus returns t and u summed.
func (t Totals) plus(u Totals) Totals {
	t.Requests += u.Requests
	t.Rewritten += u.Rewritten
	t.Unlisted += u.Unlisted
	t.DryRun += u.DryRun
	t.Events += u.Events
	t.Compactions += u.Compactions
	t.Stubs += u.Stubs
	t.Before += u.Before
	t.After += u.After
	t.Saved += u.Saved
	t.Added += u.Added
	t.WouldSave += u.WouldSave
	t.SavedUSD += u.SavedUSD
	t.AddedUSD += u.AddedUSD
	t.WouldSaveUSD += u.WouldSaveUSD
	t.SpentUSD += u.SpentUSD
	t.CacheRead += u.CacheRead
	t.CacheWrite += u.CacheWrite
	return t
}

// Point is one request, compact.
type Point struct {
	// N is the request's number in its session, from 1 (0: listed in
	// none); Seq its number in the process (record.Exchange.Seq), which
	// names its request page.
	N      int       `json:"n"`
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Before int       `json:"tokens_before"` // ctxguard's estimates
	After  int       `json:"tokens_after"`
	// Saved, Added and WouldSave are record.Exchange's Saved,
	// TokensAdded and WouldSave.
	Saved     int `json:"tokens_saved"`
	Added     int `json:"tokens_added,omitempty"`
	WouldSave int `json:"tokens_would_save,omitempty"`
	// DryRun: the request was of a dry run; WouldSend is what ctxguard
	// would have sent (After is then Before: the client's body went).
	DryRun    bool `json:"dry_run,omitempty"`
	WouldSend int  `json:"would_send,omitempty"`
	// CalBefore and CalAfter are in the API's tokens (record's
	// Calibrated fields), 0 when unknown.
	CalBefore  int            `json:"calibrated_before"`
	CalAfter   int            `json:"calibrated_after"`
	Event      bool           `json:"event,omitempty"`
	Compaction bool           `json:"compaction,omitempty"`
	Client     bool           `json:"client_compaction,omitempty"` // the client compacted by itself
	Stubs      int            `json:"stubs,omitempty"`
	Outcome    record.Outcome `json:"outcome"`
	Status     int            `json:"status"`
	CacheRead  int            `json:"cache_read"`
	CacheWrite int            `json:"cache_write"`
	// Cold: the request arrived after its session's prompt cache
	// expired (see the package doc, Money); its savings are priced at the
	// cache-write rate.
	Cold         bool    `json:"cold,omitempty"`
	SpentUSD     float64 `json:"spent_usd"`
	SavedUSD     float64 `json:"saved_usd"`
	AddedUSD     float64 `json:"added_usd,omitempty"`
	WouldSaveUSD float64 `json:"would_save_usd,omitempty"`
}

// shown is what the point's chart and rows show as sent: in a dry run,
// what would have been.
func (p *Point) shown() int {
	if p.DryRun && p.WouldSend > 0 {
		return p.WouldSend
	}
	return p.After
}

// session is what the dashboard keeps of one session.
type session struct {
	key               string
	client, protocol  string
	model, modelID    string
	window, maxOutput int
	first, last       time.Time
	seen              uint64 // Dashboard.tick at the last request
	points            ring[Point]
	totals            Totals
	lastOutcome       record.Outcome
	lastStatus        int
}

type bodies struct {
	seq uint64
	b   *record.Bodies
}

// date is a calendar day.
type date struct {
	y int
	m time.Month
	d int
}

func dayOf(t time.Time) date {
	y, m, d := t.Date()
	return date{y, m, d}
}

// String returns the date as 2006-01-02.
func (d date) String() string {
	return time.Date(d.y, d.m, d.d, 0, 0, 0, 0, time.UTC).Format(time.DateOnly)
}

// listed reports whether x is listed under its session: it has a key, and
// ctxguard read its body (it estimated its prompt).
func listed(x *record.Exchange) bool { return x.Session != "" && x.TokensBefore > 0 }

// Observe records x. It implements record.Observer: it takes the lock for
// a few map and slice operations, hands the live stream a note without
// waiting for any subscriber, and leaves writing today's totals to the
// store to a goroutine of its own (at most one at a time).
func (d *Dashboard) Observe(x *record.Exchange) {
	now := d.o.Now()
	d.mu.Lock()
	key := ""
	var s *session
	if listed(x) {
		s = d.sessionLocked(x.Session, now)
	}
	p := d.point(x, cold(x))
	if s != nil {
		p.N = int(s.points.n) + 1
		s.points.push(p)
		s.totals.add(&p)
		s.last = now
		s.lastOutcome, s.lastStatus = x.Outcome, x.Status
		if x.Client != "" {
			s.client = x.Client
		}
		if x.Protocol != "" {
			s.protocol = x.Protocol
		}
		if x.Model != "" {
			s.model, s.modelID = x.Model, x.ModelID
		}
		if x.Window > 0 {
			s.window, s.maxOutput = x.Window, x.MaxOutput
		}
		key = s.key
	}
	if x.Model != "" && (len(d.models) < maxModels || d.models[modelKey(x)]) {
		d.models[modelKey(x)] = true
	}
	d.rollDay(now)
	d.today.add(&p)
	d.all.add(&p)
	d.changedLocked(now)
	keep := *x
	keep.Bodies = nil // bodies have their own, shorter, ring
	d.recent.push(kept{&keep, p.N, p.Cold})
	if d.o.ShowBodies && x.Bodies != nil {
		d.bodies.push(bodies{x.Seq, x.Bodies})
	}
	d.mu.Unlock()
	d.subs.publish(event{Seq: x.Seq, Session: key})
}

func modelKey(x *record.Exchange) string {
	if x.ModelID != "" {
		return x.ModelID
	}
	return x.Model
}

// sessionLocked returns the session with key k, created if need be and
// marked as the most recently seen; a new session over the cap evicts the
// least recently seen.
func (d *Dashboard) sessionLocked(k string, now time.Time) *session {
	d.tick++
	if s, ok := d.sessions[k]; ok {
		s.seen = d.tick
		return s
	}
	if len(d.sessions) >= d.o.Sessions {
		var old *session
		for _, s := range d.sessions {
			if old == nil || s.seen < old.seen {
				old = s
			}
		}
		delete(d.sessions, old.key)
	}
	s := &session{key: k, first: now, seen: d.tick}
	s.points.max = d.o.Requests
	d.sessions[k] = s
	return s
}

// rollDay starts a new "today" when now is on another day; the day that
// ends is written to the store once more if it changed since. d.mu is
// held.
func (d *Dashboard) rollDay(now time.Time) {
	if day := dayOf(now); day != d.day {
		d.endDayLocked(now)
		d.day, d.today = day, Totals{}
	}
}

// cold reports whether x found its session's prompt cache expired: the
// engine's decision when the request arrived (record.Exchange.Cold, timed
// with the lifetime the request asked for), unless its usage shows cache
// reads (the package doc, Money).
func cold(x *record.Exchange) bool {
	return x.Cold && (x.Usage == nil || x.Usage.CacheRead == 0)
}

// point makes x's point, cold saying whether it found its cache expired
// (Dashboard.cold); d.mu is held (for the price cache).
func (d *Dashboard) point(x *record.Exchange, cold bool) Point {
	p := Point{
		Seq: x.Seq, Time: x.Start, Before: x.TokensBefore, After: x.TokensAfter,
		Saved: x.Saved(), Added: x.TokensAdded, WouldSave: x.WouldSave(),
		DryRun: x.DryRun(), WouldSend: x.WouldSend,
		CalBefore: x.CalibratedBefore, CalAfter: x.CalibratedAfter,
		Event: x.Event || x.Compaction != "", Compaction: x.Compaction != "",
		Client:  x.Skipped == "client compaction",
		Stubs:   len(x.Stubs),
		Outcome: x.Outcome, Status: x.Status, Cold: cold,
	}
	if x.Usage != nil {
		p.CacheRead, p.CacheWrite = x.Usage.CacheRead, x.Usage.CacheWrite
	}
	if pr, ok := d.price(modelKey(x)); ok {
		if x.Usage != nil {
			p.SpentUSD = spent(pr, *x.Usage)
		}
		// In the API's tokens when known (the calibrated figures, and
		// the other estimates scaled as the prompt sent was), else in
		// the estimates.
		before, after, scale := x.TokensBefore, x.TokensAfter, 1.0
		if x.CalibratedBefore > 0 && x.CalibratedAfter > 0 {
			before, after = x.CalibratedBefore, x.CalibratedAfter
			if x.TokensAfter > 0 {
				scale = float64(x.CalibratedAfter) / float64(x.TokensAfter)
			}
		}
		api := func(n int) int { return int(float64(n)*scale + 0.5) }
		added := api(p.Added)
		top := cacheRead
		if cold {
			top = cacheWrite
		}
		p.SavedUSD = top(pr, before, before-after+added)
		p.AddedUSD = top(pr, after, added)
		p.WouldSaveUSD = top(pr, before, api(p.WouldSave))
	}
	return p
}

// priced is a cached price lookup.
type priced struct {
	p  price.Price
	ok bool
}

// price looks a model up in the price table, caching the answer (the
// cache is dropped when it grows past maxModels: names come from
// clients); d.mu is held.
func (d *Dashboard) price(id string) (price.Price, bool) {
	if id == "" {
		return price.Price{}, false
	}
	if c, ok := d.prices[id]; ok {
		return c.p, c.ok
	}
	if len(d.prices) >= maxModels {
		clear(d.prices)
	}
	p, _, ok := d.o.Prices.Lookup(id)
	d.prices[id] = priced{p, ok}
	return p, ok
}

// spent is what the API billed for a prompt, by its usage.
func spent(p price.Price, u protocol.Usage) float64 {
	return p.Bill(u.Input, u.CacheWrite, u.CacheRead)
}

// cacheRead prices n tokens at the top of a prompt of top tokens at the
// cache-read rate (the package doc says why), the long-prompt rate
// applying to a prompt above its threshold; 0 when n is not positive.
func cacheRead(p price.Price, top, n int) float64 {
	if n <= 0 {
		return 0
	}
	return p.Cost(top, top) - p.Cost(top-n, top-n)
}

// cacheWrite is cacheRead at the cache-write rate: the top n tokens of a
// prompt that found its cache expired.
func cacheWrite(p price.Price, top, n int) float64 {
	if n <= 0 {
		return 0
	}
	return p.Cost(top, 0) - p.Cost(top-n, 0)
}

// ring keeps the last max values pushed.
type ring[T any] struct {
	max  int
	buf  []T
	next int // where the next push goes once full
	n    uint64
}

func (r *ring[T]) push(v T) {
	r.n++
	if len(r.buf) < r.max {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.next] = v
	r.next = (r.next + 1) % r.max
}

// last returns the value pushed last.
func (r *ring[T]) last() (T, bool) {
	if len(r.buf) == 0 {
		var zero T
		return zero, false
	}
	return r.buf[(r.next+len(r.buf)-1)%len(r.buf)], true
}

// line is the session's overflow line (window less maximum output), 0
// when unknown.
func (s *session) line() int {
	if s.window > s.maxOutput && s.maxOutput > 0 {
		return s.window - s.maxOutput
	}
	return 0
}

// each calls f on the values, oldest first, until f returns false.
func (r *ring[T]) each(f func(T) bool) {
	for i := range r.buf {
		if !f(r.buf[(r.next+i)%len(r.buf)]) {
			return
		}
	}
}

// dropped is how many values were pushed out.
func (r *ring[T]) dropped() uint64 { return r.n - uint64(len(r.buf)) }
