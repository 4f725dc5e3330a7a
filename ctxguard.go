// Package ctxguard keeps long-running LLM agent sessions inside their
// context window and cheap by rewriting their requests on the wire.
//
// A Guard is built once from a config.Config. It rewrites the request
// bodies of the Anthropic Messages API, the OpenAI Responses API and
// OpenAI Chat Completions (RewriteBody), serves as a local reverse proxy
// (Handler), and plugs into Go HTTP clients and the official SDKs
// (Transport, Middleware). This package is a facade; the work is done in
// the packages whose names trace the request path: protocol adapter
// (anthropic, openai/...) → conversation → engine (the session cache,
// learned limits, the compiled pipeline, overflow recovery) → passes
// (pipeline, pass/...) → splice → upstream (proxy, wired by serve), with
// the records of every exchange observed by observe, metrics and
// dashboard.
//
// A Guard is safe for concurrent use. Bodies passed to it are never
// modified or retained after a call returns.
package ctxguard

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/engine"
	"github.com/ctxguard/ctxguard/gemini"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/observe"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/proxy"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/serve"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

// BypassHeader, set to 1 on a request, makes ctxguard forward it untouched.
const BypassHeader = engine.BypassHeader

// Guard rewrites requests. Build it with New.
type Guard struct {
	engine *engine.Engine // rewrites
	server *serve.Server  // the HTTP side
	obs    *observe.Set   // the records' standard observers

	// What the Options set, for New.
	log        *slog.Logger
	store      store.Store
	summarizer pass.Summarizer
	now        func() time.Time
}

// Result is what a rewrite did to one request (RewriteBody).
type Result = engine.Result

// Stats counts what a Guard did since it started (Guard.Stats).
type Stats = observe.Stats

// SessionStats is what ctxguard did to one agent session.
type SessionStats = observe.SessionStats

// Deps are what a compiled pipeline's passes work with besides their
// configuration (Compile).
type Deps = engine.Deps

// Option adjusts a Guard at construction.
type Option func(*Guard)

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(g *Guard) { g.log = l } }

// WithStore replaces the embedded store (tests, replays, a shared store).
func WithStore(s store.Store) Option { return func(g *Guard) { g.store = s } }

// WithSummarizer sets what writes compaction summaries and digests
// (default: the configured one, compact.SummarizerConfig, made by package
// summarize).
func WithSummarizer(s pass.Summarizer) Option { return func(g *Guard) { g.summarizer = s } }

// WithClock sets the clock blob uses and sweeps are timed by (default
// time.Now), for tests. A store given with WithStore keeps its own clock.
func WithClock(now func() time.Time) Option { return func(g *Guard) { g.now = now } }

// New expands the paths in cfg (config.ExpandPaths), validates it and
// builds a Guard. Unless WithStore gave a store, cfg.Store's Redis server
// is used (it must answer now), or else the embedded store is opened
// under cfg.DataDir (see serve.OpenStore and store.OpenDir: created
// private if absent, adopted if empty, refused if it holds files that are
// not ctxguard's). If the data directory cannot be written
// (store.ErrNotWritable), the Guard serves without persistence: removed
// content is kept in memory, at most cfg.Limits.MemoryStore bytes, for
// cfg.BlobTTL after its last use, and lost on exit; a warning says so and
// Persistent reports false.
func New(cfg config.Config, opts ...Option) (*Guard, error) {
	if err := cfg.ExpandPaths(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Guard{log: slog.New(slog.DiscardHandler), now: time.Now}
	for _, o := range opts {
		o(g)
	}
	if _, err := model.NewRegistry(cfg.Models); err != nil {
		return nil, err // before the store is opened
	}
	if g.store == nil {
		var err error
		if g.store, err = serve.OpenStore(cfg, g.log, g.now); err != nil {
			return nil, err
		}
	}
	protocols := Protocols()
	e, err := engine.New(cfg, engine.Options{Store: g.store, Protocols: protocols, Log: g.log, Summarizer: g.summarizer,
		Calibration: observe.LoadCalibration(g.store, g.log), Now: g.now})
	if err != nil {
		return nil, err
	}
	g.engine = e
	g.obs = observe.NewSet(g.store, e.Calibration(), g.log)
	g.obs.Subscribe(e.Records())
	g.server = serve.New(e, g.obs, protocols)
	return g, nil
}

// Protocols returns the APIs ctxguard speaks, most preferred first: the
// Anthropic Messages API, the OpenAI Responses API, OpenAI Chat
// Completions and Google's Gemini API.
func Protocols() []protocol.Protocol {
	return []protocol.Protocol{anthropic.Protocol, responses.Protocol, chat.Protocol, gemini.Protocol}
}

// Compile builds the pipeline cfg describes: the passes it switches on,
// as package pass's registry has them (engine.Compile). stop ends the
// passes' background work (the summaries compaction is writing); call it
// once the pipeline is no longer used.
func Compile(cfg config.Config, d Deps) (pipe *pipeline.Pipeline, stop func(), err error) {
	return engine.Compile(cfg, d)
}

// Records returns the bus the record of every exchange is published on
// (record.Exchange): one per rewritable request through the proxy
// (Handler), the Middleware or Transport, or RewriteBody. Subscribe to
// see what the Guard does.
func (g *Guard) Records() *record.Bus { return g.engine.Records() }

// Persistent reports whether removed content outlives the process: false
// when the Guard keeps it in memory (the data directory could not be
// written, or WithStore gave a store.Memory); true for the embedded and
// the shared (Redis) store.
func (g *Guard) Persistent() bool {
	_, mem := g.store.(*store.Memory)
	return !mem
}

// Config returns the configuration the Guard runs with (the last one
// Reload took).
func (g *Guard) Config() config.Config { return g.engine.Config() }

// Stats returns the Guard's counters.
func (g *Guard) Stats() *Stats { return &g.obs.Stats }

// Store returns the Guard's store.
func (g *Guard) Store() store.Store { return g.store }

// Calibration returns what the Guard learned of its estimator's error per
// model, from the usage the API reported.
func (g *Guard) Calibration() *tokens.Calibration { return g.engine.Calibration() }

// Observe records the usage the API reported for a request whose body
// ctxguard estimated at estimate tokens. It feeds the calibration, which
// reports use; rewrite decisions never do (they depend on the session's
// history alone).
func (g *Guard) Observe(modelID string, estimate int, u protocol.Usage) {
	g.ObserveSession("", modelID, estimate, u)
}

// ObserveSession is Observe for a request of the session with the given
// key: the calibration also learns from the growth since the session's
// previous request (tokens.Calibration.ObserveSession). The Guard calls
// it for every recorded exchange; call it for usage it does not see.
func (g *Guard) ObserveSession(session, modelID string, estimate int, u protocol.Usage) {
	g.obs.Calibration.ObserveSession(session, modelID, estimate, u)
}

// Flush writes the stats of sessions that changed since the last flush,
// the calibration and the dashboard's totals of today to the store.
func (g *Guard) Flush() { g.server.Flush() }

// Close flushes what the Guard learned and releases the store.
func (g *Guard) Close() error {
	g.engine.Close()
	g.Flush()
	return g.store.Close()
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

// Handler returns the reverse proxy: every request goes to the upstream
// of its protocol's family (or of its named route), rewritable requests
// through the pipeline, and /ctxguard/ paths are served locally (Local).
// It takes the configuration in force: after a Reload that reports
// Reloaded.Handler, build a new one.
func (g *Guard) Handler() (*proxy.Proxy, error) { return g.server.Handler() }

// Local returns the handler of ctxguard's own endpoints (blobs, stats,
// sessions, probes, sign-in, metrics and the dashboard as configured),
// which the proxy serves instead of forwarding (serve.Server.Local tells
// each and who may reach them). The dashboard and the metrics subscribe
// to the records when Local is first called; a Guard used only in
// process pays for neither.
func (g *Guard) Local() http.Handler { return g.server.Local() }

// Middleware rewrites the requests an HTTP client makes in process,
// without the proxy, with overflow recovery like the proxy's
// (serve.Server.Middleware). Its signature matches the option.Middleware
// of the official Go SDKs (anthropic-sdk-go and openai-go), so it plugs
// in with one line:
//
//	client := anthropic.NewClient(option.WithMiddleware(
//		func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
//			return guard.Middleware(r, next)
//		}))
func (g *Guard) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	return g.server.Middleware(req, next)
}

// Transport returns an http.RoundTripper that rewrites requests as
// Middleware does and sends everything through base
// (http.DefaultTransport when nil), for any Go HTTP client.
func (g *Guard) Transport(base http.RoundTripper) http.RoundTripper { return g.server.Transport(base) }

// Maintain runs the Guard's housekeeping until ctx ends: it drops session
// memories idle for limits.session_idle, hands freed memory back to the
// operating system once idle, and every hour flushes statistics and the
// calibration to the store and sweeps expired blobs and records
// (serve.Server.Maintain). "serve" runs it; so should a program that uses
// the Guard in process for hours.
func (g *Guard) Maintain(ctx context.Context) { g.server.Maintain(ctx) }

// Reloaded says what a Reload did.
type Reloaded struct {
	// Changed are the top-level keys whose values changed
	// (config.Changed), now in force. Empty: cfg was the configuration
	// already in force.
	Changed []string
	// Kept are the restart-only settings (config.RestartOnly) that cfg
	// changes and the Guard kept at their running values: they take
	// effect at the next start.
	Kept []string
	// Handler reports that the change concerns the proxy (upstreams,
	// routes, max_body, limits.max_buffered, auth_token, the proxy's
	// timeouts, log.dump_bodies): a Handler built before keeps the old
	// values; build a new one.
	Handler bool
}

// Reload makes cfg the Guard's configuration for the requests that start
// after it returns; those in flight end with the one they started with.
// cfg is checked like New's, its restart-only settings are kept at their
// running values, and an invalid cfg is an error that changes nothing
// (engine.Engine.Reload). What the Guard learned and counts is kept: the
// store, the calibration, the learned limits, the statistics, the
// records' observers (dashboard, metrics), the thinking guard's
// signatures; the sessions' memories are dropped when the configuration
// changed, so the next request of each session is rewritten to the bytes
// a restart with cfg would give.
func (g *Guard) Reload(cfg config.Config) (Reloaded, error) {
	r, err := g.engine.Reload(cfg)
	if err != nil {
		return Reloaded{}, err
	}
	return Reloaded{Changed: r.Changed, Kept: r.Kept, Handler: len(r.Changed) > 0 && serve.HandlerChanged(r.From, r.To)}, nil
}
