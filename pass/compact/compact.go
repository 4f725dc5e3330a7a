package compact

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/splice"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

// How a compaction is decided.
//
// Like clearing, compaction is a deterministic function of the session's
// history and of what the store holds: the pass replays the requests the
// client sent before this one (request k held the messages before
// assistant message k), with their sizes as the passes before it sent
// them (pipeline.Request.Sizes). Where a request reached Prepare, the span
// to summarize is fixed: from the first user message (or the end of the
// previous compaction) up to the protected tail, cut before an assistant
// message so that every tool call keeps its results. The span is named by
// a hash of its bytes and of the previous compaction's name; its summary
// is a store record under that name, written once (by a background model
// call, or extractively) and never replaced. The first request at or above
// Swap whose span has a summary carries it, and so does every later
// request: the size the replay measures without that compaction only
// grows. So a restarted process, or a second one on the same store, sends
// the same bytes; a span is summarized once; and the prompt cache breaks
// once per compaction.

// Pass is the compiled compaction pass. It is safe for concurrent use.
type Pass struct {
	cfg   Config
	blobs *store.Blobs
	sum   pass.Summarizer // nil: extractive only
	log   *slog.Logger
	now   func() time.Time

	records store.Decisions[*record] // summaries, by span name
	acts    store.Decisions[int]     // the request that first carried each
	jobs    jobs
}

// Options are a Pass's collaborators.
type Options struct {
	// Blobs keeps the originals of every summarized span, and records
	// the summaries (Blobs.Store). Required.
	Blobs *store.Blobs
	// Summarizer writes summaries; nil writes extractive ones only.
	Summarizer pass.Summarizer
	// Log receives what happens in the background (default: discard).
	Log *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// JobTimeout bounds one background summary, waits included
	// (default 10 minutes).
	JobTimeout time.Duration
}

// New compiles cfg.
func New(cfg Config, o Options) (*Pass, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	if o.Blobs == nil {
		return nil, fmt.Errorf("compact: no blob store")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.JobTimeout <= 0 {
		o.JobTimeout = 10 * time.Minute
	}
	p := &Pass{cfg: cfg, blobs: o.Blobs, sum: o.Summarizer, log: o.Log, now: o.Now}
	p.initRecords()
	p.jobs.init(p, o.JobTimeout)
	return p, nil
}

// Name implements pipeline.Pass.
func (p *Pass) Name() string { return "compact" }

// Close stops the summaries being written in the background and waits for
// them to end.
func (p *Pass) Close() { p.jobs.close() }

// compaction is one step of a session's plan: messages [first, end) are
// summarized by the record named key.
type compaction struct {
	end int
	key string
	rec *record // nil while no summary exists
}

// NotePrefix starts the note (pipeline.Request.Note) of a request that
// carries a compaction for the first time; the store key of its record
// (ReadRecord) follows.
const NotePrefix = "compaction:"

// memoKey names what the pass keeps in a session's memory.
const memoKey = "compact/keys"

// keyMemo remembers span names computed for a session, so the bytes of a
// span are hashed once per process. Entries hold for as long as their
// span is stable (pipeline.Request.Stable).
type keyMemo struct{ spans []spanKey }

type spanKey struct {
	from, to, start, end int // messages and their bytes
	prev, key            string
}

// Footprint implements pipeline.Footprinter.
func (m *keyMemo) Footprint() int { return len(m.spans) * 128 }

// Run implements pipeline.Pass.
func (p *Pass) Run(r *pipeline.Request) ([]splice.Edit, error) {
	c := r.Conv
	if !p.cfg.Enabled || len(c.Messages) < 3 || c.Continued {
		return nil, nil
	}
	first := firstUser(c)
	if first < 0 {
		return nil, nil
	}
	env := r.Env
	if env == nil {
		env = &pipeline.Env{}
	}
	lim := p.cfg.resolve(env.Window, env.MaxOutput)
	sizes := r.Sizes
	if sizes == nil {
		sizes = rawSizes(r)
	}
	base := tokens.Estimate(c.Body[:c.Messages[0].Span.Start]) + tokens.Estimate(c.Body[c.List.End:])
	memo, _ := r.Memo[memoKey].(*keyMemo)
	if memo == nil {
		memo = &keyMemo{}
	}
	if r.Memo != nil {
		r.Memo[memoKey] = memo
	}
	// A summary this request writes (at the overflow line) counts from the
	// first request at swap on, as the next request's replay will count
	// it: the history is replayed again with it, until no new one is
	// needed.
	var pl *planState
	var now current
	for range maxRounds {
		pl = &planState{p: p, r: r, lim: lim, sizes: sizes, base: base, first: first, proto: env.Protocol, memo: memo, stable: r.Stable, now: &now}
		if err := pl.replay(); err != nil {
			return nil, err
		}
		wrote, err := pl.step(len(c.Messages), env)
		if err != nil {
			return nil, err
		}
		if !wrote {
			break
		}
		now.event = true
	}
	if len(pl.applied) == 0 {
		return nil, nil
	}
	if env.Binding {
		// The prefix of every thinking block after the summary changed.
		r.Require(conversation.DropInvalidThinking)
	}
	last := pl.applied[len(pl.applied)-1]
	if pl.fresh {
		r.Note("edit-event")
		r.Note(NotePrefix + last.key)
	}
	return p.edits(r, first, last)
}

// firstUser returns the index of the first user message, where a summary
// goes, or -1. Messages before it (system and developer prompts) stay.
func firstUser(c *conversation.Conversation) int {
	for i := range c.Messages {
		if c.Messages[i].Role == conversation.RoleUser {
			return i
		}
	}
	return -1
}

// rawSizes measures the messages as the request holds them, when no pass
// before this one said how earlier requests were sent.
func rawSizes(r *pipeline.Request) pipeline.HistorySizer {
	c := r.Conv
	counts := make([]int, len(c.Messages))
	for i := range c.Messages {
		end := c.List.End
		if i+1 < len(c.Messages) {
			end = c.Messages[i+1].Span.Start
		}
		counts[i] = tokens.Estimate(c.Body[c.Messages[i].Span.Start:end])
	}
	return pipeline.NewRawSizes(counts)
}

// current is what the current request did so far, kept across the
// replays of its history.
type current struct {
	waited bool // it waited for a model's summary (it waits once)
	event  bool // it carries a compaction for the first time
	// absent names a summary the store did not have when this request
	// asked: the replays of one request ask once, not at every step.
	absent string
}

// planState is one request's replay.
type planState struct {
	p      *Pass
	r      *pipeline.Request
	lim    limits
	sizes  pipeline.HistorySizer
	base   int
	first  int
	proto  string
	memo   *keyMemo
	stable int

	now     *current // what the current request did, across replays
	fresh   bool     // the current request is the first to carry a compaction
	applied []compaction
	pending *compaction // planned, not yet applied
}

// get returns the summary under key, nil when there is none. One request
// asks the store once for a summary it lacks (the store is read as of
// then); a summary the request itself gets (step) clears that.
func (s *planState) get(key string) (*record, error) {
	if s.now.absent == key {
		return nil, nil
	}
	rec, err := s.p.get(s.r.Context(), key)
	if err == nil && rec == nil {
		s.now.absent = key
	}
	return rec, err
}

// size is the request holding the first at messages under the applied
// compactions.
func (s *planState) size(at int) int {
	if len(s.applied) == 0 {
		return s.base + s.sizes.Size(at, 0)
	}
	last := s.applied[len(s.applied)-1]
	return s.base + s.sizes.Size(at, 0) - s.sizes.Size(at, s.first) + last.rec.Tokens + s.kept(at, last.end) + s.sizes.Size(at, last.end)
}

// kept is the size of the system and developer messages inside the span
// [first, end): a compaction leaves them in place.
func (s *planState) kept(at, end int) int {
	n := 0
	msgs := s.r.Conv.Messages
	for i := s.first + 1; i < end; i++ {
		if keepsRole(msgs[i].Role) {
			n += s.sizes.Size(at, i) - s.sizes.Size(at, i+1)
		}
	}
	return n
}

// keepsRole reports whether a message of role r inside a summarized span
// stays (instructions, not conversation).
func keepsRole(r conversation.Role) bool {
	return r == conversation.RoleSystem || r == conversation.RoleDeveloper
}

// boundary reports whether request at (holding the first at messages) is
// one the client sent: every request ends before an assistant message;
// the current one counts unless it ends with one (a prefill).
func boundary(msgs []conversation.Message, at int) bool {
	n := len(msgs)
	if at < n {
		return msgs[at].Role == conversation.RoleAssistant
	}
	return msgs[n-1].Role != conversation.RoleAssistant
}

// replay walks the session's requests before this one and finds the
// compactions that were applied.
func (s *planState) replay() error {
	msgs := s.r.Conv.Messages
	for at := 1; at < len(msgs); at++ {
		if boundary(msgs, at) {
			if _, err := s.step(at, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// step decides at request at: it fixes the span to summarize once the
// size reaches prepare, and swaps the span's summary in at swap when one
// exists. For the current request (env not nil) it also starts the
// summary in the background, and at the overflow line waits for it, then
// falls back to the extractive one. After a compaction the request is
// judged again, so a request far over the line (the first one seen of a
// long session, or one the upstream refused) gets as many as it needs.
func (s *planState) step(at int, env *pipeline.Env) (wrote bool, err error) {
	for range maxRounds {
		cur := s.size(at)
		if cur < s.lim.prepare {
			return false, nil
		}
		if s.pending == nil {
			cp, err := s.plan(at)
			if err != nil || cp == nil {
				return false, err
			}
			s.pending = cp
		}
		// Below swap a ready summary goes in only at a request that found
		// the prompt cache cold (ColdSwap): no cached prefix is lost.
		below := cur < s.lim.swap
		if below {
			if env != nil {
				s.p.jobs.start(s, env) // ready by swap, with luck
			}
			if !s.p.cfg.ColdSwap || !s.r.Env.ColdAt(at) {
				return false, nil
			}
		}
		key := s.pending.key
		rec, err := s.get(key)
		if err != nil {
			return false, err
		}
		// A summary counts from the request that first carried it (its
		// activation), never earlier: what earlier requests sent stays
		// what they sent.
		act := 0
		if rec != nil {
			if act, err = s.p.activation(s.r.Context(), key); err != nil {
				return false, err
			}
		}
		if env == nil {
			if rec == nil || act == 0 || act > at {
				return false, nil
			}
		} else {
			if rec == nil {
				switch {
				case below && s.p.sum != nil:
					return false, nil // not ready: it waits for swap
				case below:
					// Without a model the extractive summary is ready
					// at once.
					rec, err = s.p.put(s.r.Context(), key, s.extractive())
				default:
					rec, err = s.summary(cur, env)
				}
				if err != nil || rec == nil {
					return false, err
				}
				s.now.absent = ""
				act = 0 // written now; activated below
			}
			if act == 0 {
				if act, err = s.p.activate(s.r.Context(), key, at); err != nil {
					return false, err
				}
				// The history is replayed again with it (the caller).
				return true, nil
			}
			if act > at {
				return false, nil // another instance carried it from a later request
			}
			if act == at {
				s.fresh = true
			}
		}
		s.pending.rec = rec
		s.applied = append(s.applied, *s.pending)
		s.pending = nil
	}
	return false, nil
}

// maxRounds bounds the compactions one request can add, and the replays
// it runs.
const maxRounds = 16

// plan fixes the span a compaction at request at summarizes, or returns
// nil when none would help: the span ends before the protected tail, at an
// assistant message, after the previous compaction's end.
func (s *planState) plan(at int) (*compaction, error) {
	msgs := s.r.Conv.Messages
	from := s.first
	if n := len(s.applied); n > 0 {
		from = s.applied[n-1].end
	}
	// The newest assistant message whose tail holds protect tokens.
	e := -1
	for i := at - 1; i > from; i-- {
		if msgs[i].Role == conversation.RoleAssistant && s.sizes.Size(at, i) >= s.lim.protect {
			e = i
			break
		}
	}
	if e < 0 {
		// Nothing old enough to go without the protected tail: at swap,
		// protection yields (below), from the oldest candidate on.
		if s.size(at) < s.lim.swap {
			return nil, nil
		}
		for i := from + 1; i < at; i++ {
			if msgs[i].Role == conversation.RoleAssistant {
				e = i
				break
			}
		}
		if e < 0 {
			return nil, nil
		}
	}
	// A tail too large to sit under swap with a summary gives up its
	// protection, down to the newest turn.
	for e < at-1 && s.base+s.lim.budget+s.sizes.Size(at, e) > s.lim.swap {
		next := -1
		for i := e + 1; i < at; i++ {
			if msgs[i].Role == conversation.RoleAssistant {
				next = i
				break
			}
		}
		if next < 0 {
			break
		}
		e = next
	}
	// The span must be worth a summary, and buy the session the growth
	// from prepare to swap before the next one.
	if s.sizes.Size(at, from)-s.sizes.Size(at, e) < max(2*s.lim.budget/3, s.lim.swap-s.lim.prepare) {
		return nil, nil
	}
	key, err := s.key(from, e)
	if err != nil {
		return nil, err
	}
	return &compaction{end: e, key: key}, nil
}

// key names the span [from, to): a hash of its bytes, chained to the name
// of the compaction before it.
func (s *planState) key(from, to int) (string, error) {
	msgs := s.r.Conv.Messages
	prev := "v1|" + s.proto
	if n := len(s.applied); n > 0 {
		prev = s.applied[n-1].key
	}
	start, end := msgs[from].Span.Start, msgs[to-1].Span.End
	for _, k := range s.memo.spans {
		if k.from == from && k.to == to && k.start == start && k.end == end && k.prev == prev && to <= s.stable {
			return k.key, nil
		}
	}
	h := sha256.New()
	h.Write([]byte(prev))
	h.Write([]byte{0})
	h.Write(s.r.Conv.Body[start:end])
	key := "compact/" + hex.EncodeToString(h.Sum(nil)[:16])
	// Keep only what is still stable, plus this one.
	kept := s.memo.spans[:0]
	for _, k := range s.memo.spans {
		if k.to <= s.stable {
			kept = append(kept, k)
		}
	}
	s.memo.spans = append(kept, spanKey{from: from, to: to, start: start, end: end, prev: prev, key: key})
	return key, nil
}

// summary returns the pending span's summary for the current request,
// which is cur tokens: nil below the overflow line while a model writes it
// in the background (started here if need be); at the line, the model's
// if it lands within wait, else the extractive one. With no model to ask,
// the extractive one serves from swap on.
func (s *planState) summary(cur int, env *pipeline.Env) (*record, error) {
	// With no model, the extractive summary serves from swap on; a
	// request that already breaks the cache compacts below swap at once,
	// so that one event does what two would.
	force := cur >= s.lim.force || (cur >= s.lim.swap && (s.p.sum == nil || s.now.event))
	wait := !env.Urgent && !s.now.waited && !s.now.event && s.p.cfg.Wait > 0
	var job *job
	if !force || wait {
		job = s.p.jobs.start(s, env)
	}
	if !force {
		return nil, nil
	}
	var rec *record
	if job != nil && wait && !job.probe {
		// Only while the summarizer's breaker is closed: not for a call
		// cut short, nor for another job's probe.
		if ok, probe := s.p.allows(env.Protocol, s.r.Conv.Model, false); ok && !probe {
			s.now.waited = true
			rec = job.wait(s.r.Ctx, s.p.cfg.Wait)
		}
	}
	if rec != nil {
		return rec, nil
	}
	if job == nil && s.p.sum != nil {
		s.p.allows(env.Protocol, s.r.Conv.Model, true) // counts a refusal, if that is why
	}
	// No summary in time: the extractive one, unless a model's landed
	// meanwhile (the first record written wins).
	return s.p.put(s.r.Context(), s.pending.key, s.extractive())
}

// spanInput is what summarizing the pending span needs, copied out of the
// request so a background job holds no request memory.
type spanInput struct {
	prevSummary string // the previous compaction's summary, for a model
	prev        *facts // the previous compaction's facts
	cur         *facts // the span's own facts (span index 0)
	from, to    int    // messages
	transcript  []byte
	count       int // messages summarized in all
	budget      int // tokens the summary may take
}

// input collects the pending span's input.
func (s *planState) input() (*spanInput, error) {
	c := s.r.Conv
	in := &spanInput{to: s.pending.end, from: s.first, budget: s.lim.budget, prev: previousFacts(nil)}
	in.count = s.pending.end - s.first
	if n := len(s.applied); n > 0 {
		prev := s.applied[n-1]
		in.prevSummary, in.prev, in.from = prev.rec.Summary, previousFacts(prev.rec), prev.end
	}
	in.cur = scanSpan(c, in.from, in.to, 0)
	var err error
	in.transcript, err = c.AppendTranscript(nil, in.from, in.to-1)
	return in, err
}

// extractive writes the pending span's summary without a model.
func (s *planState) extractive() *record {
	in, err := s.input()
	if err != nil {
		in.transcript = nil // the originals cannot be kept; the facts can
	}
	rec := s.p.newRecord(s.r.Context(), in, "", "", tokens.EstimateText(in.prevSummary)+tokens.Estimate(in.transcript), 0)
	rec.OutputTokens = tokens.EstimateText(rec.Summary)
	return rec
}

// edits replaces the summarized messages of the current request: the first
// user message becomes the summary, every other message of the span goes
// but for system and developer ones.
func (p *Pass) edits(r *pipeline.Request, first int, cp compaction) ([]splice.Edit, error) {
	c := r.Conv
	msgs := c.Messages
	d := c.Dialect
	if d == nil {
		return nil, fmt.Errorf("compact: the conversation has no dialect")
	}
	quoted := jsonscan.AppendQuote(nil, cp.rec.Text)
	block := d.AppendText(nil, msgs[first].Role, quoted, nil)
	sp, repl := d.ReplaceMessage(c, first, [][]byte{block})
	out := []splice.Edit{{Span: sp, Repl: repl, Blob: strings.Join(cp.rec.Blobs, " ")}}
	for i := first + 1; i < cp.end; {
		if keepsRole(msgs[i].Role) {
			i++
			continue
		}
		j := i
		for j+1 < cp.end && !keepsRole(msgs[j+1].Role) {
			j++
		}
		// Messages [i, j] go, with the separator after them (message j+1
		// exists: the tail is never empty).
		out = append(out, splice.Edit{Span: splice.Span{Start: msgs[i].Span.Start, End: msgs[j+1].Span.Start}})
		i = j + 1
	}
	return out, nil
}
