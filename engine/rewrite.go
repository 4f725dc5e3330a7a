package engine

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/session"
	"github.com/ctxguard/ctxguard/tokens"
)

// Result is what a rewrite did to one request.
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
	// Cause says why the event happened (record.Cause*), "" without one.
	Cause string
	// Cold: the request found its session's prompt cache expired (the
	// engine's stored decision, pipeline.Env.Cold); CacheTTL is the
	// lifetime it was timed with.
	Cold     bool
	CacheTTL time.Duration
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

// rewrite rewrites one body under compiled configuration s; urgent marks
// the retry of a request the upstream found too long
// (pipeline.Env.Urgent). A rewritten body goes into memory out supplies
// (see pipeline.Request.Out), nil: fresh memory. body stays the caller's:
// nothing rewrite keeps (the session's cached parse) refers to it once it
// returns.
func (e *Engine) rewrite(ctx context.Context, s *compiled, proto protocol.Protocol, h http.Header, body []byte, out func(n int) []byte, urgent bool) (res Result) {
	res = Result{Body: body, original: body}
	if h.Get(BypassHeader) == "1" {
		res.Skipped, res.Session = "bypass", session.Key(proto.Name(), h, nil)
		return res
	}
	mem := e.sessions.acquire(s.cacheKey(cacheKey(proto, h, body)), body)
	defer mem.release()
	var prev *conversation.Conversation // the session's previous request, without its body (valid until keep)
	var prevPrint *fingerprint
	prevModel := ""
	if mem != nil && mem.conv != nil {
		prev, prevPrint, prevModel = mem.conv, &mem.fingerprint, mem.model
	}
	c, stable, err := mem.parse(proto, body)
	if err != nil {
		res.Skipped = "invalid json"
		if errors.Is(err, protocol.ErrShape) {
			res.Skipped = "not a messages request"
		}
		res.Session = session.Key(proto.Name(), h, nil)
		e.log.Debug("not rewritten", "session", res.Session, "reason", err)
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
	feat := proto.Features(h, c)
	if feat.ClientCompaction {
		// The client summarizes its own history: that request goes as it
		// came. The history it starts afterwards is short, and every
		// decision about it is made afresh from its own messages. Its
		// record still tells its model and size.
		res.Skipped = "client compaction"
		res.RequestModel = c.Model
		res.Model = s.models.LookupRequest(c.Model, feat.Betas...)
		res.TokensBefore, _ = promptTokens(c, 0, nil, nil)
		res.TokensAfter = res.TokensBefore
		return res
	}
	if prevModel != "" && extendsPrev(prev, prevPrint, c, stable) {
		e.recordSignatures(c, len(prev.Messages), prevModel)
	}
	if mem != nil {
		mem.model = c.Model
	}
	res.RequestModel = c.Model
	res.Model = s.models.LookupRequest(c.Model, feat.Betas...)
	if w := e.limits.window(ctx, e, res.Model.ID); w > 0 && w < res.Model.Window {
		res.Model.Window = w // what an overflow taught (limits.go)
	}
	e.runPipeline(ctx, s, proto, h, c, stable, mem, out, urgent, &res)
	return res
}

// runPipeline runs s's pipeline over c, the parse of res's body, whose
// first stable messages the session's previous request held (mem, may
// be nil), and completes res with what it did: the body to send (unless
// a pass failed, or in a dry run), the token estimates, the notes and
// stubs.
func (e *Engine) runPipeline(ctx context.Context, s *compiled, proto protocol.Protocol, h http.Header, c *conversation.Conversation, stable int,
	mem *cachedSession, out func(n int) []byte, urgent bool, res *Result) {
	env := &pipeline.Env{Window: res.Model.Window, MaxOutput: res.Model.MaxOutput, Binding: res.Model.Binding, Protocol: proto.Name(), Header: h, Urgent: urgent}
	env.CacheWrite, env.CacheRead = res.Model.CachePrices()
	e.coldClock(ctx, c, env, res)
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
		e.log.Error("rewrite failed; forwarding the original body", "id", res.ID, "session", res.Session, "pass", run.FailedIn, "err", run.Err)
		return
	}
	for _, n := range run.Notes {
		if n == "edit-event" {
			res.Event = true
			res.Cause = cause(env, res)
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
		return
	}
	res.Body, res.Changed, res.Headers = run.Body, run.Changed, run.Headers
	res.Stubs = stubs(run.Stubs)
	// The body goes out: the blobs it refers to were used now. If one
	// is gone, what the Engine cached of sessions may skip storing it
	// again; forget that, so the next request stores it.
	if s.blobs.Use(ctx, run.Blobs) > 0 {
		e.log.Warn("blobs a request refers to were missing from the store; the next request stores them again", "session", res.Session)
		e.sessions.dropAll()
	}
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
