// Package engine rewrites requests: it is what a Guard does to one
// request body between the client and the upstream. Engine.Rewrite (the
// proxy's Rewriter hook) parses a body with its protocol adapter
// (conversation), runs the compiled pipeline of passes over it (pass/...,
// pipeline, splice), and returns the body to send with the record of what
// it did; Engine.Publish completes that record and hands it to the
// observers of Records.
//
// The Engine owns what the rewrites share: the per-session cache that
// makes a session's next parse incremental (sessionCache), the model
// windows overflow errors taught (learnedLimits), the attribution of
// thinking signatures to the model family that minted them, and the
// configuration compiled into a pipeline (compiled), which Reload swaps
// whole. Every decision about old history is a deterministic function of
// the session's history: what the Engine caches only saves work, and a
// fresh Engine on the same store sends the same bytes.
//
// Contracts. An Engine is safe for concurrent use. A body given to it is
// the caller's: it is never modified, and nothing refers to it once the
// call returns (the session cache keeps offsets and hashes, not bytes).
// A rewritten body is the caller's too, in pooled memory when the caller
// hands it back (proxy.Outcome.Release). A request reads the compiled
// configuration once, when it starts, and keeps it to its end, overflow
// retry included. The Engine never imports the HTTP server side (package
// serve); the proxy reaches it only through the hooks of proxy.Rewriter
// and proxy.Options.
package engine

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/thinking"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

// BypassHeader, set to 1 on a request, makes ctxguard forward it untouched.
const BypassHeader = "X-Ctxguard-Bypass"

// Engine rewrites requests. Build it with New.
type Engine struct {
	// cfg is the configuration New was given; its restart-only settings
	// (config.RestartOnly) hold for the Engine's life. The configuration
	// in force is current().cfg.
	cfg        config.Config
	protocols  []protocol.Protocol
	log        *slog.Logger
	store      store.Store
	sigs       *thinking.Signatures // who minted the thinking blocks seen
	summarizer pass.Summarizer      // Options.Summarizer; nil: the configured one
	calib      *tokens.Calibration
	now        func() time.Time

	// compiled is what the configuration in force built (compiled.go).
	compiled atomic.Pointer[compiled]
	reloadMu sync.Mutex
	retired  []pass.Closer // passes reloads replaced that work in the background, closed by Close

	bus      record.Bus
	limits   learnedLimits
	sessions *sessionCache
	cold     *coldBook // the cache's clock (coldclock.go)
}

// Options are what an Engine works with besides its configuration.
type Options struct {
	// Store keeps removed content, summaries and learned limits. Required.
	Store store.Store
	// Protocols are the APIs the Engine's summarizer may call, most
	// preferred first.
	Protocols []protocol.Protocol
	// Log receives what the rewrites report (default: discard).
	Log *slog.Logger
	// Summarizer writes compaction summaries and digests; nil: the
	// configured one (compact.SummarizerConfig, made by package summarize).
	Summarizer pass.Summarizer
	// Calibration converts the estimator's tokens to the API's in the
	// records and headers; nil: a new one. Rewrites never read it.
	Calibration *tokens.Calibration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// New builds an Engine from cfg, which must be valid (config.ExpandPaths
// done and config.Config.Validate passed).
func New(cfg config.Config, o Options) (*Engine, error) {
	e := &Engine{cfg: cfg, protocols: o.Protocols, log: o.Log, store: o.Store, summarizer: o.Summarizer, calib: o.Calibration, now: o.Now}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.calib == nil {
		e.calib = tokens.NewCalibration()
	}
	e.sessions = newSessionCache(cfg.Limits.Sessions, cfg.Limits.SessionMemory, cfg.Limits.SessionIdle)
	e.sessions.now = e.now
	e.cold = newColdBook(e.store, cfg.BlobTTL, e.now, cfg.Limits.Sessions)
	e.sigs = thinking.NewSignatures(pass.Get[thinking.Config](cfg.Passes), e.now)
	s, err := e.build(cfg, nil)
	if err != nil {
		return nil, err
	}
	e.compiled.Store(s)
	return e, nil
}

// Records returns the bus the record of every exchange is published on
// (Publish).
func (e *Engine) Records() *record.Bus { return &e.bus }

// Config returns the configuration in force (the last one Reload took).
func (e *Engine) Config() config.Config { return e.current().cfg }

// Store returns the Engine's store.
func (e *Engine) Store() store.Store { return e.store }

// Calibration returns the calibration the records are figured with.
func (e *Engine) Calibration() *tokens.Calibration { return e.calib }

// Log returns the Engine's logger.
func (e *Engine) Log() *slog.Logger { return e.log }

// Now returns the time by the Engine's clock.
func (e *Engine) Now() time.Time { return e.now() }

// SweepSessions drops the cached sessions idle for limits.session_idle
// and returns the bytes freed.
func (e *Engine) SweepSessions() int64 { return e.sessions.sweep() }

// SessionUsage reports how many sessions are cached and the bytes they
// hold (bounded by limits.sessions and limits.session_memory).
func (e *Engine) SessionUsage() (n int, bytes int64) { return e.sessions.usage() }

// Close stops the passes' background work (the summaries compaction is
// writing), the current ones' and those reloads replaced. The store is the caller's to close.
func (e *Engine) Close() {
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	closeAll(append(e.retired, e.current().built.Closers(nil)...))
	e.retired = nil
}
