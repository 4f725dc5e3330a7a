// Package ctxguard keeps long-running LLM agent sessions inside their
// context window and cheap by rewriting their requests on the wire.
//
// A Guard is built once from a config.Config. It rewrites Anthropic
// Messages request bodies (Rewrite), serves as a local reverse proxy
// (Handler), and plugs into Go HTTP clients and the official SDKs
// (Transport, Middleware). The request path is visible in the packages it
// uses: protocol adapter (anthropic) → conversation → passes
// (pipeline, pass/...) → splice → upstream (proxy).
//
// A Guard is safe for concurrent use. Bodies passed to it are never
// modified or retained after a call returns.
package ctxguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/dashboard"
	"github.com/ctxguard/ctxguard/engine"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/proxy"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

// BypassHeader, set to 1 on a request, makes ctxguard forward it untouched.
const BypassHeader = engine.BypassHeader

// Guard rewrites requests. Build it with New.
type Guard struct {
	// cfg is the configuration New was given; its restart-only settings
	// (config.RestartOnly) hold for the Guard's life. The configuration
	// in force is the engine's.
	cfg        config.Config
	engine     *engine.Engine      // rewrites
	protocols  []protocol.Protocol // the APIs it knows, most preferred first
	log        *slog.Logger
	store      store.Store
	summarizer compact.Summarizer // WithSummarizer's; nil: the configured one
	calib      *tokens.Calibration
	now        func() time.Time

	// The engine's records bus carries the record of every exchange to
	// its observers: the statistics, the session statistics, the
	// calibration, the log and, when the local endpoints are served, the
	// metrics and the dashboard.
	stats    Stats
	sessions sessions

	localOnce   sync.Once
	localMux    http.Handler                        // the local endpoints (Local)
	localRoutes []string                            // the patterns it serves
	dash        atomic.Pointer[dashboard.Dashboard] // the dashboard, once Local mounted it
}

// Result is what a rewrite did to one request (RewriteBody).
type Result = engine.Result

// Deps are what a compiled pipeline's passes work with besides their
// configuration (Compile).
type Deps = engine.Deps

// Compile builds the pipeline cfg describes, in the order passes must run
// (engine.Compile). It also returns the compaction pass, if any, whose
// background work its owner stops (compact.Pass.Close).
func Compile(cfg config.Config, d Deps) (*pipeline.Pipeline, *compact.Pass, error) {
	return engine.Compile(cfg, d)
}

// RewriteBody rewrites one request body of protocol proto (one of
// Protocols). h is the request's header (may be nil). It never fails: on
// any problem the result carries the original body. Its record
// (Records), with no transport figures, is published before it returns.
func (g *Guard) RewriteBody(ctx context.Context, proto protocol.Protocol, h http.Header, body []byte) Result {
	return g.engine.RewriteBody(ctx, proto, h, body)
}

// Rewrite implements proxy.Rewriter (engine.Engine.Rewrite).
func (g *Guard) Rewrite(ctx context.Context, req *http.Request, proto protocol.Protocol, body []byte) proxy.Outcome {
	return g.engine.Rewrite(ctx, req, proto, body)
}

// calibrationKey is the store record holding the learned calibration.
const calibrationKey = "calibration"

// Stats counts what a Guard did since it started, by the outcome of each
// exchange's record (record.Outcome). It observes the records
// (Guard.Records) and is counted nowhere else. Safe for concurrent use.
type Stats struct {
	Requests  atomic.Int64 // exchanges recorded: rewritable requests
	Rewritten atomic.Int64 // outcome rewritten: the body sent differed
	Unchanged atomic.Int64 // outcome unchanged (dry runs included)
	Bypassed  atomic.Int64 // outcome bypassed: not rewritten by design (bypass header, bad JSON, other shapes, buffers full)
	Failed    atomic.Int64 // outcome failed_open: a pass failed, the original went
	Recovered atomic.Int64 // outcome recovered: retried compacted after the upstream found it too long, successfully
	// RecoveryFailed counts outcome recovery_failed: the upstream found
	// it too long, and the compacted retry failed too (or there was none).
	RecoveryFailed atomic.Int64
	Refused        atomic.Int64 // outcome refused: ctxguard answered with its own error
	Events         atomic.Int64 // edit events
	Compactions    atomic.Int64 // requests that carried a compaction for the first time
	// Observed counts the usages the calibration took; the calibration
	// observer counts it.
	Observed atomic.Int64
}

// Observe implements record.Observer.
func (s *Stats) Observe(x *record.Exchange) {
	s.Requests.Add(1)
	switch x.Outcome {
	case record.Rewritten:
		s.Rewritten.Add(1)
	case record.Unchanged:
		s.Unchanged.Add(1)
	case record.Bypassed:
		s.Bypassed.Add(1)
	case record.FailedOpen:
		s.Failed.Add(1)
	case record.Recovered:
		s.Recovered.Add(1)
	case record.RecoveryFailed:
		s.RecoveryFailed.Add(1)
	case record.Refused:
		s.Refused.Add(1)
	}
	if x.Event {
		s.Events.Add(1)
	}
	if x.Compaction != "" {
		s.Compactions.Add(1)
	}
}

// Option adjusts a Guard at construction.
type Option func(*Guard)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(g *Guard) { g.log = l } }

// WithStore replaces the embedded store (tests, replays, a shared store).
func WithStore(s store.Store) Option { return func(g *Guard) { g.store = s } }

// WithSummarizer sets what writes compaction summaries and digests
// (default: the configured one, compact.SummarizerConfig, made by package
// summarize).
func WithSummarizer(s compact.Summarizer) Option { return func(g *Guard) { g.summarizer = s } }

// WithClock sets the clock blob uses and sweeps are timed by (default
// time.Now), for tests. A store given with WithStore keeps its own clock.
func WithClock(now func() time.Time) Option { return func(g *Guard) { g.now = now } }

// New expands the paths in cfg (config.ExpandPaths), validates it and
// builds a Guard. Unless WithStore gave a store, cfg.Store's Redis server
// is used (it must answer now: see openShared), or else the embedded store
// is opened under cfg.DataDir (see store.OpenDir: created private if absent,
// adopted if empty, refused if it holds files that are not ctxguard's).
// If the data directory cannot be written (store.ErrNotWritable), the
// Guard serves without persistence: removed content is kept in memory,
// at most cfg.Limits.MemoryStore bytes, for cfg.BlobTTL after
// its last use, and lost on exit; a warning says so and Persistent
// reports false.
func New(cfg config.Config, opts ...Option) (*Guard, error) {
	if err := cfg.ExpandPaths(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Guard{cfg: cfg, log: slog.New(slog.DiscardHandler), now: time.Now, protocols: Protocols()}
	for _, o := range opts {
		o(g)
	}
	var err error
	if _, err = model.NewRegistry(cfg.Models); err != nil {
		return nil, err // before the store is opened
	}
	if g.store == nil {
		if g.store, err = g.openStore(); err != nil {
			return nil, err
		}
	}
	g.calib = tokens.NewCalibration()
	ctx, cancel := storeContext()
	defer cancel()
	if b, err := g.store.Get(ctx, calibrationKey); err == nil {
		if err := g.calib.UnmarshalJSON(b); err != nil {
			g.log.Warn("ignoring a stored calibration that does not decode", "err", err)
		}
	}
	if g.engine, err = engine.New(cfg, engine.Options{Store: g.store, Protocols: g.protocols, Log: g.log, Summarizer: g.summarizer, Calibration: g.calib, Now: g.now}); err != nil {
		return nil, err
	}
	bus := g.engine.Records()
	bus.Subscribe(&g.stats)
	bus.Subscribe(record.ObserverFunc(g.sessions.record))
	bus.Subscribe(record.ObserverFunc(g.observeUsage))
	bus.Subscribe(record.ObserverFunc(g.logExchange))
	return g, nil
}

// Records returns the bus the record of every exchange is published on
// (record.Exchange): one per rewritable request through the proxy
// (Handler), the Middleware or Transport, or RewriteBody. Subscribe to
// see what the Guard does.
func (g *Guard) Records() *record.Bus { return g.engine.Records() }

// openStore opens the shared store cfg.Store names, else the embedded
// store, or the memory store when the data directory cannot be written.
func (g *Guard) openStore() (store.Store, error) {
	cfg := g.cfg
	if cfg.Store != "" {
		return g.openShared()
	}
	d, err := store.OpenDir(cfg.DataDir, cfg.BlobTTL)
	if err == nil {
		d.Now = g.now
		for _, w := range d.Warnings() {
			g.log.Warn(w)
		}
		return d, nil
	}
	if !errors.Is(err, store.ErrNotWritable) {
		return nil, err
	}
	limit := "at most " + strconv.FormatFloat(float64(cfg.Limits.MemoryStore)/(1<<20), 'f', -1, 64) + " MiB"
	g.log.Warn("the data dir "+cfg.DataDir+" cannot be written; serving without persistence: removed content is kept in memory only, "+limit+", and lost on exit",
		"data_dir", cfg.DataDir, "reason", err, "memory_store", cfg.Limits.MemoryStore)
	return store.NewMemoryWith(store.MemoryOptions{MaxBytes: cfg.Limits.MemoryStore, TTL: cfg.BlobTTL, Now: g.now}), nil
}

// Persistent reports whether removed content outlives the process: false
// when the Guard keeps it in memory (the data directory could not be
// written, or WithStore gave a store.Memory); true for the embedded and
// the shared (Redis) store.
func (g *Guard) Persistent() bool {
	_, mem := g.store.(*store.Memory)
	return !mem
}

// Protocols returns the APIs ctxguard speaks, most preferred first: the
// Anthropic Messages API, the OpenAI Responses API and OpenAI Chat
// Completions.
func Protocols() []protocol.Protocol {
	return []protocol.Protocol{anthropic.Protocol, responses.Protocol, chat.Protocol}
}

// Config returns the configuration the Guard runs with (the last one
// Reload took).
func (g *Guard) Config() config.Config { return g.engine.Config() }

// Stats returns the Guard's counters.
func (g *Guard) Stats() *Stats { return &g.stats }

// Store returns the Guard's store.
func (g *Guard) Store() store.Store { return g.store }

// Calibration returns what the Guard learned of its estimator's error per
// model, from the usage the API reported.
func (g *Guard) Calibration() *tokens.Calibration { return g.calib }

// Observe records the usage the API reported for a request whose body
// ctxguard estimated at estimate tokens. It feeds the calibration, which
// reports use; rewrite decisions never do (they depend on the session's
// history alone).
func (g *Guard) Observe(modelID string, estimate int, u protocol.Usage) {
	g.ObserveSession("", modelID, estimate, u)
}

// observeUsage is the calibration's observer: it learns from the usage
// of every 2xx answer.
func (g *Guard) observeUsage(x *record.Exchange) {
	if x.Usage != nil && x.ModelID != "" && x.Status/100 == 2 {
		g.ObserveSession(x.Session, x.ModelID, x.TokensAfter, *x.Usage)
	}
}

// ObserveSession is Observe for a request of the session with the given
// key: the calibration also learns from the growth since the session's
// previous request (tokens.Calibration.ObserveSession). The Guard calls
// it for every recorded exchange; call it for usage it does not see.
func (g *Guard) ObserveSession(session, modelID string, estimate int, u protocol.Usage) {
	if g.calib.ObserveSession(session, modelID, estimate, u.PromptTokens()) {
		if g.stats.Observed.Add(1)%20 == 0 {
			g.saveCalibration()
		}
	}
}

func (g *Guard) saveCalibration() {
	b, err := g.calib.MarshalJSON()
	if err == nil {
		ctx, cancel := storeContext()
		err = g.store.Put(ctx, calibrationKey, b)
		cancel()
	}
	if err != nil {
		g.log.Warn("saving the calibration", "err", err)
	}
}

// Close flushes what the Guard learned and releases the store.
func (g *Guard) Close() error {
	g.engine.Close()
	g.Flush()
	return g.store.Close()
}

// Handler returns the reverse proxy: every request goes to the upstream
// of its protocol's family (or of its named route), rewritable requests
// through the pipeline, and /ctxguard/ paths are served locally (blob
// retrieval). It takes the configuration in force: after a Reload that
// reports Reloaded.Handler, build a new one.
func (g *Guard) Handler() (*proxy.Proxy, error) {
	cfg := g.engine.Config()
	ups := map[string]*url.URL{}
	for fam, raw := range map[string]string{"anthropic": cfg.Upstreams.Anthropic, "openai": cfg.Upstreams.OpenAI} {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("upstreams.%s: %w", fam, err)
		}
		ups[fam] = u
	}
	var routes []proxy.Route
	for name, raw := range cfg.Routes {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("routes.%s: %w", name, err)
		}
		routes = append(routes, proxy.Route{Prefix: config.RoutePrefix(name), Upstream: u})
	}
	return proxy.New(proxy.Options{
		Upstream:    ups["anthropic"],
		Upstreams:   ups,
		Routes:      routes,
		Protocols:   g.protocols,
		MaxBody:     cfg.MaxBody,
		MaxBuffered: cfg.Limits.MaxBuffered,
		AuthToken:   cfg.AuthToken,
		LocalAuth:   g.localAuth,
		SignIn:      signInPath,
		Timeouts:    proxyTimeouts(cfg.Timeouts),
		Logger:      g.log,
		Rewriter:    g.engine,
		Extra:       g.Local(),
		Record:      g.engine.Publish,
		DumpBodies:  cfg.Log.DumpBodies,
	})
}

// proxyTimeouts maps the configuration's timeouts (0 disables one) to the
// proxy's (0 takes the default, negative disables). The others
// (request_header, keep_alive, drain) bound the http.Server, which
// the caller configures.
func proxyTimeouts(t config.Timeouts) proxy.Timeouts {
	return proxy.Timeouts{
		BodyRead:       off(t.BodyRead),
		BodyMinRate:    off(t.BodyMinRate),
		Dial:           off(t.Dial),
		UpstreamWrite:  off(t.UpstreamWrite),
		ResponseHeader: off(t.ResponseHeader),
		Idle:           off(t.Idle),
		ClientWrite:    off(t.ClientWrite),
	}
}

// off maps a configuration's 0 (disabled) to the proxy's -1.
func off[T ~int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// Maintain runs the Guard's housekeeping until ctx ends: every tick (a
// minute, or half of limits.session_idle when that is shorter, at least a
// second) it drops session memories idle for limits.session_idle and,
// once no request came for a whole tick, hands freed memory back to the
// operating system; every hour it flushes statistics and the calibration
// to the store and sweeps expired blobs and records. "serve" runs it; so
// should a program that uses the Guard in process for hours.
func (g *Guard) Maintain(ctx context.Context) {
	t := time.NewTicker(tickEvery(g.cfg.Limits.SessionIdle))
	defer t.Stop()
	var j janitor
	for {
		j.tick(g, g.now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// janitor is Maintain's state between ticks.
type janitor struct {
	lastStore time.Time // the last store sweep
	requests  int64     // the request count at the last tick
	released  bool      // memory was handed back since the last request
	free      func()    // hands memory back; nil means debug.FreeOSMemory, twice
}

// tickEvery is Maintain's tick for a session_idle of idle.
func tickEvery(idle time.Duration) time.Duration {
	return min(time.Minute, max(idle/2, time.Second))
}

// storeSweepEvery is how often Maintain sweeps the store.
const storeSweepEvery = time.Hour

// tick does one round of housekeeping at time now.
func (j *janitor) tick(g *Guard, now time.Time) {
	freed := g.engine.SweepSessions()
	if j.lastStore.IsZero() || now.Sub(j.lastStore) >= storeSweepEvery {
		j.lastStore = now
		g.Flush()
		ctx, cancel := storeContext()
		n, err := g.store.Sweep(ctx, now)
		cancel()
		if err != nil {
			g.log.Warn("store sweep", "err", err)
		} else if n > 0 {
			g.log.Info("store sweep", "removed", n)
		}
	}
	reqs := g.stats.Requests.Load()
	if reqs != j.requests {
		j.requests, j.released = reqs, false
		return
	}
	if !j.released || freed > 0 {
		// Idle for a whole tick: what pools and freed memories hold
		// goes back now rather than whenever the next collection runs.
		if j.free != nil {
			j.free()
		} else {
			// Twice, because sync.Pool keeps a victim generation.
			debug.FreeOSMemory()
			debug.FreeOSMemory()
		}
		j.released = true
		g.log.Debug("idle: memory handed back", "memo_bytes_freed", freed)
	}
}
