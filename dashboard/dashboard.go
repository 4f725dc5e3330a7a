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
// Money. Dollars come from a price.Table (USD per million tokens).
// A request's cost is the prompt the API reported in its usage, each part
// at its rate (uncached input at the input price, cache writes at the
// cache-write price, cache reads at the cache-read price); a request
// without usage costs nothing here. The tokens saved are priced at the
// cache-read rate: most of what ctxguard removes is old history that the
// prompt cache would have served, so this is a lower bound of the money
// saved (edit events, which cost cache writes, are shown but not
// subtracted). Output tokens are not counted: they do not change.
//
// The dashboard reads only records: it never sees headers, so API keys
// cannot reach it; bodies are shown only when the configuration asks.
package dashboard

import (
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/replay/price"
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
}

// Dashboard keeps what the pages show. It is safe for concurrent use:
// Observe may run on many request goroutines while Handler serves.
type Dashboard struct {
	o Options

	mu       sync.Mutex
	sessions map[string]*session
	tick     uint64 // recency clock for sessions
	recent   ring[*record.Exchange]
	bodies   ring[bodies]
	day      date
	today    Totals
	all      Totals
	models   map[string]bool // model ids seen, for the configuration page
	prices   map[string]priced
	subs     subscribers
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
	d := &Dashboard{o: o, sessions: map[string]*session{}, models: map[string]bool{}, prices: map[string]priced{}}
	d.recent.max = RecentRecords
	d.bodies.max = RecentBodies
	d.subs.init()
	return d
}

// Totals sums requests (today's, a session's, or all since start).
type Totals struct {
	Requests    int     `json:"requests"`
	Rewritten   int     `json:"rewritten"`
	Events      int     `json:"events"`
	Compactions int     `json:"compactions"`
	Stubs       int     `json:"stubs"`
	Before      int     `json:"tokens_before"`
	After       int     `json:"tokens_after"`
	Saved       int     `json:"tokens_saved"`
	SavedUSD    float64 `json:"saved_usd"`
	SpentUSD    float64 `json:"spent_usd"`
	CacheRead   int     `json:"cache_read"`
	CacheWrite  int     `json:"cache_write"`
}

func (t *Totals) add(p *Point) {
	t.Requests++
	if p.Outcome == record.Rewritten || p.Outcome == record.Recovered {
		t.Rewritten++
	}
	if p.Event {
		t.Events++
	}
	if p.Compaction {
		t.Compactions++
	}
	t.Stubs += p.Stubs
	t.Before += p.Before
	t.After += p.After
	t.Saved += p.Before - p.After
	t.SavedUSD += p.SavedUSD
	t.SpentUSD += p.SpentUSD
	t.CacheRead += p.CacheRead
	t.CacheWrite += p.CacheWrite
}

// Point is one request of a session, compact.
type Point struct {
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"`
	Before int       `json:"tokens_before"` // ctxguard's estimates
	After  int       `json:"tokens_after"`
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
	SpentUSD   float64        `json:"spent_usd"`
	SavedUSD   float64        `json:"saved_usd"`
}

// session is what the dashboard keeps of one session.
type session struct {
	key              string
	client, protocol string
	model, modelID   string
	window           int
	first, last      time.Time
	seen             uint64 // Dashboard.tick at the last request
	points           ring[Point]
	totals           Totals
	lastOutcome      record.Outcome
	lastStatus       int
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

// Observe records x. It implements record.Observer: it takes the lock for
// a few map and slice operations, and hands the live stream a note
// without waiting for any subscriber.
func (d *Dashboard) Observe(x *record.Exchange) {
	now := d.o.Now()
	d.mu.Lock()
	p := d.point(x)
	d.rollDay(now)
	d.today.add(&p)
	d.all.add(&p)
	s := d.sessionLocked(x.Session, now)
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
		if len(d.models) < maxModels || d.models[modelKey(x)] {
			d.models[modelKey(x)] = true
		}
	}
	if x.Window > 0 {
		s.window = x.Window
	}
	keep := *x
	keep.Bodies = nil // bodies have their own, shorter, ring
	d.recent.push(&keep)
	if d.o.ShowBodies && x.Bodies != nil {
		d.bodies.push(bodies{x.Seq, x.Bodies})
	}
	d.mu.Unlock()
	d.subs.publish(event{Seq: x.Seq, Session: sessionKey(x.Session)})
}

func modelKey(x *record.Exchange) string {
	if x.ModelID != "" {
		return x.ModelID
	}
	return x.Model
}

// noSession is the key of requests that had no session key (record
// keys always have a prefix and a colon, so it names none of them).
const noSession = "-"

func sessionKey(k string) string {
	if k == "" {
		return noSession
	}
	return k
}

// sessionLocked returns the session with key k, created if need be and
// marked as the most recently seen; a new session over the cap evicts the
// least recently seen.
func (d *Dashboard) sessionLocked(k string, now time.Time) *session {
	k = sessionKey(k)
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

// rollDay starts a new "today" when now is on another day.
func (d *Dashboard) rollDay(now time.Time) {
	if day := dayOf(now); day != d.day {
		d.day, d.today = day, Totals{}
	}
}

// point makes x's point; d.mu is held (for the price cache).
func (d *Dashboard) point(x *record.Exchange) Point {
	p := Point{
		Seq: x.Seq, Time: x.Start, Before: x.TokensBefore, After: x.TokensAfter,
		CalBefore: x.CalibratedBefore, CalAfter: x.CalibratedAfter,
		Event: x.Event || x.Compaction != "", Compaction: x.Compaction != "",
		Client:  x.Skipped == "client compaction",
		Stubs:   len(x.Stubs),
		Outcome: x.Outcome, Status: x.Status,
	}
	if x.Usage != nil {
		p.CacheRead, p.CacheWrite = x.Usage.CacheRead, x.Usage.CacheWrite
	}
	if pr, ok := d.price(modelKey(x)); ok {
		if x.Usage != nil {
			p.SpentUSD = spent(pr, *x.Usage)
		}
		before, after := x.TokensBefore, x.TokensAfter
		if x.CalibratedBefore > 0 {
			before, after = x.CalibratedBefore, x.CalibratedAfter
		}
		p.SavedUSD = saved(pr, before, after)
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

// saved prices the tokens not sent at the cache-read rate (the package
// doc says why), the long-prompt rate applying to a prompt above its
// threshold.
func saved(p price.Price, before, after int) float64 {
	return p.Cost(before, before) - p.Cost(after, after)
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
