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
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/dashboard"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass/clear"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/pass/compress"
	"github.com/ctxguard/ctxguard/pass/digest"
	"github.com/ctxguard/ctxguard/pass/persist"
	"github.com/ctxguard/ctxguard/pass/thinking"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/proxy"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/session"
	"github.com/ctxguard/ctxguard/splice"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

// BypassHeader, set to 1 on a request, makes ctxguard forward it untouched.
const BypassHeader = "X-Ctxguard-Bypass"

// Guard rewrites requests. Build it with New.
type Guard struct {
	// cfg is the configuration New was given; its restart-only settings
	// (config.RestartOnly) hold for the Guard's life. The configuration
	// in force is current().cfg.
	cfg        config.Config
	protocols  []protocol.Protocol // the APIs it knows, most preferred first
	log        *slog.Logger
	store      store.Store
	sigs       *thinking.Signatures // who minted the thinking blocks seen
	summarizer compact.Summarizer   // WithSummarizer's; nil: the configured one
	calib      *tokens.Calibration
	now        func() time.Time

	// setup is what the configuration in force built (reload.go).
	setup    atomic.Pointer[setup]
	reloadMu sync.Mutex
	retired  []*compact.Pass // compaction passes reloads replaced, closed by Close

	// bus carries the record of every exchange to its observers: the
	// statistics, the session statistics, the calibration, the log and,
	// when the local endpoints are served, the metrics and the dashboard.
	bus      record.Bus
	stats    Stats
	sessions sessions
	limits   learnedLimits
	recent   *recent

	localOnce   sync.Once
	localMux    http.Handler                        // the local endpoints (Local)
	localRoutes []string                            // the patterns it serves
	dash        atomic.Pointer[dashboard.Dashboard] // the dashboard, once Local mounted it
}

// outBufs holds buffers for rewritten bodies.
var outBufs bufPool

// bufPool is a pool of byte buffers; buffers over 8 MB are not kept.
type bufPool struct{ p sync.Pool }

// get returns a buffer of at least n bytes (its whole capacity).
func (b *bufPool) get(n int) []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		if cap(*v) >= n {
			return (*v)[:cap(*v)]
		}
		b.p.Put(v) // too small for this one; kept for a smaller body
	}
	return make([]byte, max(n, 64<<10))
}

func (b *bufPool) put(buf []byte) {
	if c := cap(buf); c > 0 && c <= 8<<20 {
		buf = buf[:c]
		b.p.Put(&buf)
	}
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
	g.recent = newRecent(cfg.Limits.Sessions, cfg.Limits.SessionMemory, cfg.Limits.SessionIdle)
	g.recent.now = g.now
	var err error
	if _, err = model.NewRegistry(cfg.Models); err != nil {
		return nil, err // before the store is opened
	}
	if g.store == nil {
		if g.store, err = g.openStore(); err != nil {
			return nil, err
		}
	}
	g.sigs = thinking.NewSignatures(cfg.ThinkingGuard, g.now)
	s, err := g.build(cfg, nil)
	if err != nil {
		return nil, err
	}
	g.setup.Store(s)
	g.calib = tokens.NewCalibration()
	ctx, cancel := storeContext()
	defer cancel()
	if b, err := g.store.Get(ctx, calibrationKey); err == nil {
		if err := g.calib.UnmarshalJSON(b); err != nil {
			g.log.Warn("ignoring a stored calibration that does not decode", "err", err)
		}
	}
	g.bus.Subscribe(&g.stats)
	g.bus.Subscribe(record.ObserverFunc(g.sessions.record))
	g.bus.Subscribe(record.ObserverFunc(g.observeUsage))
	g.bus.Subscribe(record.ObserverFunc(g.logExchange))
	return g, nil
}

// Records returns the bus the record of every exchange is published on
// (record.Exchange): one per rewritable request through the proxy
// (Handler), the Middleware or Transport, or RewriteBody. Subscribe to
// see what the Guard does.
func (g *Guard) Records() *record.Bus { return &g.bus }

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

// Deps are what a compiled pipeline's passes work with besides their
// configuration.
type Deps struct {
	// Blobs keeps removed content. Required.
	Blobs *store.Blobs
	// Log receives the passes' background work (default: discard).
	Log *slog.Logger
	// Summarizer writes compaction summaries; nil writes them without a
	// model (the extractive summary).
	Summarizer compact.Summarizer
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Signatures tells the thinking guard who minted thinking blocks; nil
	// makes a cache of its own (which nothing fills).
	Signatures *thinking.Signatures
	// Compact, when set, is the compaction pass to use rather than a new
	// one (a reload that left compaction's settings alone keeps the
	// summaries it is writing).
	Compact *compact.Pass
}

// Compile builds the pipeline cfg describes, in the order passes must run:
// per-result compression first (it shortens a result the same way on every
// request), then the small model's digest of a large result (opt-in),
// then persistence of what is still too large (it stores the
// original and previews the compressed text), then history clearing,
// which replaces whole old results and so supersedes both, then
// compaction, which replaces the oldest part of a long history, cleared
// or not, with a summary. It also returns the compaction pass, if any,
// whose background work its owner stops (compact.Pass.Close).
func Compile(cfg config.Config, d Deps) (*pipeline.Pipeline, *compact.Pass, error) {
	var passes []pipeline.Pass
	if cfg.Compress.Enabled {
		p, err := compress.New(cfg.Compress)
		if err != nil {
			return nil, nil, err
		}
		passes = append(passes, p)
	}
	if cfg.Digest.Enabled {
		p, err := digest.New(cfg.Digest, d.Blobs, d.Summarizer, d.Log)
		if err != nil {
			return nil, nil, err
		}
		passes = append(passes, p)
	}
	if cfg.Persist.Enabled {
		p, err := persist.New(cfg.Persist, d.Blobs)
		if err != nil {
			return nil, nil, err
		}
		passes = append(passes, p)
	}
	if cfg.ThinkingGuard.Enabled {
		sigs := d.Signatures
		if sigs == nil {
			sigs = thinking.NewSignatures(cfg.ThinkingGuard, d.Now)
		}
		p, err := thinking.New(sigs)
		if err != nil {
			return nil, nil, err
		}
		passes = append(passes, p)
	}
	if cfg.Clear.Enabled {
		p, err := clear.New(cfg.Clear, d.Blobs)
		if err != nil {
			return nil, nil, err
		}
		passes = append(passes, p)
	}
	var cp *compact.Pass
	if cfg.Compact.Enabled {
		if cp = d.Compact; cp == nil {
			var err error
			cp, err = compact.New(cfg.Compact, compact.Options{Blobs: d.Blobs, Summarizer: d.Summarizer, Log: d.Log, Now: d.Now})
			if err != nil {
				return nil, nil, err
			}
		}
		passes = append(passes, cp)
	}
	return pipeline.New(d.Log, passes...), cp, nil
}

// Config returns the configuration the Guard runs with (the last one
// Reload took).
func (g *Guard) Config() config.Config { return g.current().cfg }

// Stats returns the Guard's counters.
func (g *Guard) Stats() *Stats { return &g.stats }

// Store returns the Guard's store.
func (g *Guard) Store() store.Store { return g.store }

// Calibration returns what the Guard learned of its estimator's error per
// model, from the usage the API reported.
func (g *Guard) Calibration() *tokens.Calibration { return g.calib }

// Observe records the usage the API reported for a request whose body
// ctxguard estimated at estimate tokens. It feeds the calibration, which
// reports use; rewrite decisions never do (BRIEF principle 3).
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
	g.closeSetups()
	g.Flush()
	return g.store.Close()
}

// Result is what Rewrite did to one request.
type Result struct {
	Body    []byte // the body to send (the input when unchanged)
	Changed bool
	Session string
	Model   model.Info
	// RequestModel is the model the request names (Model is its registry
	// entry).
	RequestModel string
	// TokensBefore and TokensAfter are estimates of the prompt sent by
	// the client and by ctxguard; TokensAdded is the part of TokensAfter
	// added on purpose (record.Exchange.TokensAdded).
	TokensBefore, TokensAfter, TokensAdded int
	// WouldSend and WouldAdd are, in a dry run, the estimates of the
	// prompt the rewrite would have sent and of what it would have added
	// on purpose (Body is then the client's, and TokensAfter
	// TokensBefore).
	WouldSend, WouldAdd int
	Passes              []pipeline.PassStat
	// Headers are list-header values to add upstream (name, value), such
	// as anthropic-beta, for settings the rewrite needs.
	Headers [][2]string
	Event   bool // an edit event: history before the newest turn changed
	// Notes are the passes' decisions (pipeline.Request.Note).
	Notes []string
	// Stubs are the items of the body sent that were replaced with a
	// stub naming a blob.
	Stubs []record.Stub
	// Compaction is the store key of the compaction this request carries
	// for the first time (compact.ReadRecord tells what it cost), or "".
	Compaction string
	// Skipped says why the body was not rewritten: "bypass", "invalid
	// json", "not a messages request", "client compaction" or
	// record.SkipDryRun; empty when it was.
	Skipped string
	// Err is a pass failure; the original body is kept (fail open).
	Err error
	ID  string // the failure's ID, also in the log line

	original []byte // the client's body
}

// RewriteBody rewrites one request body of protocol proto (one of
// Protocols). h is the request's header (may be nil). It never fails: on
// any problem the result carries the original body. Its record
// (Records), with no transport figures, is published before it returns.
func (g *Guard) RewriteBody(ctx context.Context, proto protocol.Protocol, h http.Header, body []byte) (res Result) {
	start := time.Now()
	res = g.rewrite(ctx, g.current(), proto, h, body, nil, false)
	rec := g.newRecord(proto, h, &res)
	rec.Start, rec.Rewrite, rec.BytesIn, rec.BytesOut = start, time.Since(start), int64(len(body)), int64(len(res.Body))
	g.publish(rec)
	return res
}

// newRecord starts the record of a request from its rewrite's result.
func (g *Guard) newRecord(proto protocol.Protocol, h http.Header, res *Result) *record.Exchange {
	x := &record.Exchange{
		Protocol:     proto.Name(),
		Client:       record.Client(h.Get("User-Agent")),
		Session:      res.Session,
		Model:        res.RequestModel,
		Family:       model.Family(res.RequestModel),
		Window:       res.Model.Window,
		MaxOutput:    res.Model.MaxOutput,
		Skipped:      res.Skipped,
		ErrorID:      res.ID,
		Passes:       res.Passes,
		Notes:        res.Notes,
		Event:        res.Event,
		Compaction:   res.Compaction,
		Stubs:        res.Stubs,
		TokensBefore: res.TokensBefore,
		TokensAfter:  res.TokensAfter,
		TokensAdded:  res.TokensAdded,
		WouldSend:    res.WouldSend,
		WouldAdd:     res.WouldAdd,
	}
	if res.Model.ID != "" && res.RequestModel != "" {
		x.ModelID = res.Model.ID
	}
	switch {
	case res.Err != nil:
		x.Outcome, x.Error = record.FailedOpen, res.Err.Error()
	case res.Skipped != "" && res.Skipped != record.SkipDryRun:
		x.Outcome = record.Bypassed
	case res.Changed:
		x.Outcome = record.Rewritten
	default:
		x.Outcome = record.Unchanged
	}
	if cfg := g.current().cfg; cfg.Dashboard.ShowBodies || cfg.Log.DumpBodies {
		x.Bodies = &record.Bodies{Before: bytes.Clone(res.original), After: bytes.Clone(res.Body)}
	}
	g.calibrate(x)
	return x
}

// calibrate sets a record's calibrated token figures from its estimates,
// through the calibration learned so far; publish replaces them with the
// API's count when the answer reports usage.
func (g *Guard) calibrate(x *record.Exchange) {
	x.CalibratedBefore, x.CalibratedAfter = x.TokensBefore, x.TokensAfter
	if x.ModelID != "" {
		x.CalibratedBefore = g.calib.Adjust(x.ModelID, x.TokensBefore)
		x.CalibratedAfter = g.calib.Adjust(x.ModelID, x.TokensAfter)
	}
}

// publish completes a record with the API's count of the prompt, when
// the answer reported usage, and hands it to the observers.
func (g *Guard) publish(x *record.Exchange) {
	if x.Usage != nil && x.Status/100 == 2 && x.TokensAfter > 0 {
		// The API counted the prompt it got; the one the client sent is
		// scaled by the same ratio.
		x.CalibratedAfter = x.Usage.PromptTokens()
		x.CalibratedBefore = int(int64(x.TokensBefore) * int64(x.CalibratedAfter) / int64(x.TokensAfter))
	}
	g.bus.Publish(x)
}

// rewrite rewrites one body under setup s; urgent marks the retry of a
// request the upstream found too long (pipeline.Env.Urgent). A rewritten
// body goes into memory out supplies (see pipeline.Request.Out), nil:
// fresh memory. body stays the caller's: nothing rewrite keeps (the
// session's memo) refers to it once it returns.
func (g *Guard) rewrite(ctx context.Context, s *setup, proto protocol.Protocol, h http.Header, body []byte, out func(n int) []byte, urgent bool) (res Result) {
	res = Result{Body: body, original: body}
	if h.Get(BypassHeader) == "1" {
		res.Skipped, res.Session = "bypass", session.Key(proto.Name(), h, nil)
		return res
	}
	mem := g.recent.acquire(s.memoKey(memoKey(proto, h, body)), body)
	defer mem.release()
	var prev *conversation.Conversation // the session's previous request, without its body (valid until keep)
	var prevPrint *print
	prevModel := ""
	if mem != nil && mem.conv != nil {
		prev, prevPrint, prevModel = mem.conv, &mem.print, mem.model
	}
	c, stable, err := mem.parse(proto, body)
	if err != nil {
		res.Skipped = "invalid json"
		if errors.Is(err, protocol.ErrShape) {
			res.Skipped = "not a messages request"
		}
		res.Session = session.Key(proto.Name(), h, nil)
		g.log.Debug("not rewritten", "session", res.Session, "reason", err)
		return res
	}
	defer func() {
		switch {
		case mem != nil && res.Err == nil:
			mem.keep(c, body) // the next request of the session starts from it
		case mem != nil:
			c.Release()
			mem.forget() // what passes kept may belong to this failed request
		default:
			c.Release()
		}
	}()
	res.Session = session.Key(proto.Name(), h, c)
	if clientCompaction(c) {
		// The client summarizes its own history: that request goes as it
		// came. The history it starts afterwards is short, and every
		// decision about it is made afresh from its own messages. Its
		// record still tells its model and size.
		res.Skipped = "client compaction"
		res.RequestModel = c.Model
		res.Model = s.models.LookupRequest(c.Model, h.Values("Anthropic-Beta")...)
		res.TokensBefore, _ = promptTokens(c, 0, nil, nil)
		res.TokensAfter = res.TokensBefore
		return res
	}
	if prevModel != "" && extendsPrev(prev, prevPrint, c, stable) {
		g.recordSignatures(c, len(prev.Messages), prevModel)
	}
	if mem != nil {
		mem.model = c.Model
	}
	res.RequestModel = c.Model
	res.Model = s.models.LookupRequest(c.Model, h.Values("Anthropic-Beta")...)
	if w := g.limits.window(ctx, g, res.Model.ID); w > 0 && w < res.Model.Window {
		res.Model.Window = w // what an overflow taught (recover.go)
	}
	env := &pipeline.Env{Window: res.Model.Window, MaxOutput: res.Model.MaxOutput, Binding: res.Model.Binding, Protocol: proto.Name(), Header: h, Urgent: urgent}
	env.CacheWrite, env.CacheRead = res.Model.CachePrices()
	req := &pipeline.Request{
		Ctx: ctx, Conv: c, Session: res.Session, Out: out, Stable: stable, Memo: mem.passes(),
		Env: env,
	}
	run := s.pipe.Run(req)
	res.Passes = run.Passes
	if mem != nil {
		res.TokensBefore, mem.msgTokens = promptTokens(c, stable, mem.msgTokens, mem.msgTokens)
	} else {
		res.TokensBefore, _ = promptTokens(c, 0, nil, nil)
	}
	res.Notes = run.Notes
	if run.Err != nil {
		res.ID = protocol.NewErrorID()
		res.Err = run.Err
		res.TokensAfter = res.TokensBefore
		g.log.Error("rewrite failed; forwarding the original body", "id", res.ID, "session", res.Session, "pass", run.FailedIn, "err", run.Err)
		return res
	}
	for _, n := range run.Notes {
		if n == "edit-event" {
			res.Event = true
		}
		if k, ok := strings.CutPrefix(n, compact.NotePrefix); ok {
			res.Compaction = k
		}
	}
	res.TokensAfter = res.TokensBefore
	if run.Changed {
		// What is sent is usually much smaller than what came in (and
		// cheaper to estimate than the spans the edits replaced).
		res.TokensAfter = tokens.Estimate(run.Body)
		res.TokensAdded = addedTokens(c, &run, res.TokensBefore, res.TokensAfter)
	}
	if s.cfg.DryRun {
		// The client's body goes; the record and the headers tell what
		// would have gone instead.
		res.Skipped = record.SkipDryRun
		res.Notes = append(res.Notes, "dry-run: would send "+strconv.Itoa(res.TokensAfter)+" tokens")
		res.WouldSend, res.WouldAdd = res.TokensAfter, res.TokensAdded
		res.TokensAfter, res.TokensAdded = res.TokensBefore, 0
		return res
	}
	res.Body, res.Changed, res.Headers = run.Body, run.Changed, run.Headers
	res.Stubs = stubs(run.Stubs)
	// The body goes out: the blobs it refers to were used now. If one
	// is gone, what the Guard memoized of sessions may skip storing it
	// again; forget that, so the next request stores it.
	if s.blobs.Use(ctx, run.Blobs) > 0 {
		g.log.Warn("blobs a request refers to were missing from the store; the next request stores them again", "session", res.Session)
		g.recent.dropAll()
	}
	return res
}

// addedTokens estimates the tokens the settings of run (the pipeline's
// result for c) added to the prompt on purpose, the prompt estimated at
// before tokens as it came and after as it goes. When the settings are
// run's only edits, all the prompt grew by is theirs (so the estimates'
// rounding shows as neither a saving nor a loss); else each setting is
// estimated alone.
func addedTokens(c *conversation.Conversation, run *pipeline.Result, before, after int) int {
	if len(run.Settings) == 0 {
		return 0
	}
	edits := 0
	for _, p := range run.Passes {
		edits += p.Edits
	}
	if edits == len(run.Settings) {
		return after - before
	}
	n := 0
	for _, e := range run.Settings {
		n += tokens.Estimate(e.Repl) - tokens.Estimate(c.Bytes(e.Span))
	}
	return n
}

// stubs turns the edits that name blobs into the record's stubs (at most
// record.MaxStubs): one per blob, the edit's sizes and head on its first.
// The heads are copied into one allocation: they are decoded only when
// someone looks (record.Stub.Text).
func stubs(edits []splice.Edit) []record.Stub {
	if len(edits) == 0 {
		return nil
	}
	size := 0
	for _, e := range edits {
		size += min(len(e.Repl), record.StubHeadMax)
	}
	heads := make([]byte, 0, size)
	out := make([]record.Stub, 0, min(len(edits), record.MaxStubs))
	for _, e := range edits {
		first := true
		for id := range strings.FieldsSeq(e.Blob) {
			if len(out) == record.MaxStubs {
				return out
			}
			st := record.Stub{Blob: id}
			if first {
				at := len(heads)
				heads = append(heads, e.Repl[:min(len(e.Repl), record.StubHeadMax)]...)
				st.Bytes, st.Sent, st.Head = e.Span.Len(), len(e.Repl), heads[at:len(heads):len(heads)]
				first = false
			}
			out = append(out, st)
		}
	}
	return out
}

// extendsPrev reports whether c continues prev, the previous request of
// its session (a parse without its body, whose body's print is p): c has
// more messages, starts with prev's system prompt, holds every message of
// prev but its last byte for byte, and the last (which the client may
// re-encode, a string as a list of blocks, a cache marker moved) with the
// same role and text. stable is what the incremental parse found: when it
// covers those messages, the bytes were verified already; when the model
// or another early member changed length, the offsets moved and the
// messages are compared by their hashes. A message's bytes after its first
// are hashed (print): for a JSON value they determine the first too (an
// object ends with '}', an array with ']', a string with '"').
func extendsPrev(prev *conversation.Conversation, p *print, c *conversation.Conversation, stable int) bool {
	n := len(prev.Messages)
	if n == 0 || len(c.Messages) <= n || len(p.sums) != 2*n {
		return false
	}
	if stable > 0 && stable >= n-1 {
		return true
	}
	if maphash.Bytes(memoSeed, c.Bytes(c.System)) != p.sys {
		return false
	}
	for i := 0; i < n-1; i++ {
		ps, cs := prev.Messages[i].Span, c.Messages[i].Span
		if ps.Len() != cs.Len() || maphash.Bytes(memoSeed, c.Body[cs.Start+1:cs.End]) != p.sums[2*i+1] {
			return false
		}
	}
	return prev.Messages[n-1].Role == c.Messages[n-1].Role && textSum(c, n-1) == p.last
}

// recordSignatures attributes the signed blocks (thinking.Signed: thinking
// blocks, Responses reasoning items) of the assistant messages c holds
// from message from on (those the answer to the session's previous
// request added) to the family of that request's model, for the
// thinking guard.
func (g *Guard) recordSignatures(c *conversation.Conversation, from int, prevModel string) {
	fam := model.Family(prevModel)
	for mi := from; mi < len(c.Messages); mi++ {
		m := &c.Messages[mi]
		if m.Role != conversation.RoleAssistant {
			continue
		}
		for bi := range m.Blocks {
			if b := &m.Blocks[bi]; thinking.Signed(b) {
				g.sigs.Record(fam, c.Bytes(b.Signature))
			}
		}
	}
}

// Rewrite implements proxy.Rewriter.
func (g *Guard) Rewrite(ctx context.Context, req *http.Request, proto protocol.Protocol, body []byte) proxy.Outcome {
	// A rewritten body goes into pooled memory of its own size, which
	// the proxy hands back (Outcome.Release) once the upstream has it.
	// body is the proxy's (it pools it too); nothing here keeps it past
	// the exchange.
	s := g.current()
	res := g.rewrite(ctx, s, proto, req.Header, body, outBufs.get, false)
	rec := g.newRecord(proto, req.Header, &res)
	hdr := http.Header{}
	g.describe(hdr, &res, rec)
	if res.Skipped != "" {
		hdr.Set("X-Ctxguard-Skipped", res.Skipped)
	}
	if res.Err != nil {
		hdr.Set("X-Ctxguard-Error-Id", res.ID)
	}
	out := proxy.Outcome{Body: res.Body, AddHeader: res.Headers, RespHeader: hdr, Record: rec}
	if res.Changed {
		// The rewritten body is pooled memory: it goes back to the pool
		// when the proxy is done with it.
		out.Release = func() { outBufs.put(res.Body) }
	}
	if s.compact != nil && (res.Skipped == "" || res.Skipped == record.SkipDryRun) && res.Err == nil {
		out.Recover = g.recoverer(s, proto, req.Header.Clone(), body, res, rec, hdr)
	}
	return out
}

// describe sets the response headers that describe the body sent
// upstream, from its rewrite res and its record rec: the token estimates
// (in a dry run, of what would have been sent), the API's tokens through
// the calibration, the passes that changed it and whether it was an edit
// event.
func (g *Guard) describe(hdr http.Header, res *Result, rec *record.Exchange) {
	hdr.Set("X-Ctxguard-Tokens-Before", strconv.Itoa(rec.TokensBefore))
	hdr.Set("X-Ctxguard-Tokens-After", strconv.Itoa(rec.TokensAfter))
	if rec.DryRun() {
		// What would have been sent: the body went as it came.
		hdr.Set("X-Ctxguard-Dry-Run", "1")
		if res.WouldSend > 0 {
			hdr.Set("X-Ctxguard-Tokens-After", strconv.Itoa(res.WouldSend))
		}
	}
	if applied := rec.Applied(); res.Changed || (rec.DryRun() && len(applied) > 0) {
		hdr.Set("X-Ctxguard-Passes", strings.Join(applied, ","))
	}
	event := "0"
	if rec.Event {
		event = "1"
	}
	hdr.Set("X-Ctxguard-Edit-Event", event)
	switch {
	case res.Skipped == "":
		hdr.Set("X-Ctxguard-Tokens-Calibrated", strconv.Itoa(rec.CalibratedAfter))
	case rec.DryRun() && res.WouldSend > 0:
		would := res.WouldSend
		if rec.ModelID != "" {
			would = g.calib.Adjust(rec.ModelID, would)
		}
		hdr.Set("X-Ctxguard-Tokens-Calibrated", strconv.Itoa(would))
	}
}

// Handler returns the reverse proxy: every request goes to the upstream
// of its protocol's family (or of its named route), rewritable requests
// through the pipeline, and /ctxguard/ paths are served locally (blob
// retrieval). It takes the configuration in force: after a Reload that
// reports Reloaded.Handler, build a new one.
func (g *Guard) Handler() (*proxy.Proxy, error) {
	cfg := g.current().cfg
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
		Rewriter:    g,
		Extra:       g.Local(),
		Record:      g.publish,
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
	freed := g.recent.sweep()
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

// clientCompactPrompt starts the request Claude Code sends to have its own
// history summarized (/compact and auto-compact, full and partial: "...
// of the conversation so far", "... of the RECENT portion of the
// conversation").
const clientCompactPrompt = "Your task is to create a detailed summary of the "

// clientCompaction reports whether c is a client's own compaction request:
// its last user message holds a text block that starts (after white
// space) with clientCompactPrompt. (Codex compacts through
// /v1/responses/compact, which is never rewritten.)
func clientCompaction(c *conversation.Conversation) bool {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		m := &c.Messages[i]
		if m.Role != conversation.RoleUser {
			continue
		}
		for j := range m.Blocks {
			b := &m.Blocks[j]
			if b.Kind != conversation.Text || b.Text.Len() < len(clientCompactPrompt) {
				continue
			}
			// The string's head as sent: the prompt has nothing to escape,
			// so only leading white space (raw or escaped) comes first.
			head := c.Bytes(conversation.Span{Start: b.Text.Start + 1, End: min(b.Text.End, b.Text.Start+1+64+len(clientCompactPrompt))})
			for len(head) > 0 {
				if head[0] == ' ' || head[0] == '\t' {
					head = head[1:]
				} else if len(head) > 1 && head[0] == '\\' && (head[1] == 'n' || head[1] == 't' || head[1] == 'r') {
					head = head[2:]
				} else {
					break
				}
			}
			if bytes.HasPrefix(head, []byte(clientCompactPrompt)) {
				return true
			}
		}
		return false
	}
	return false
}
