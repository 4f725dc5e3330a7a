// Package pipeline runs an ordered list of passes over one request and
// splices their edits into the body once.
//
// A Pipeline is compiled once from configuration and is safe for
// concurrent use; each request gets its own Request. A pass reads the
// Conversation (and, through Request.Current, what earlier passes made of
// it) and returns edits; it never re-serializes the body. If any pass
// returns an error or panics, Run fails open: the result carries the
// original body unchanged and the failure, which the caller counts and
// logs.
package pipeline

import (
	"context"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math/bits"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/splice"
)

// Span is a byte range in the request body.
type Span = conversation.Span

// Pass is one rewrite rule.
type Pass interface {
	// Name identifies the pass in logs, headers and reports.
	Name() string
	// Run inspects r and returns the edits it wants. It must not modify
	// r.Conv or the body, and must be safe for concurrent use: one Pass
	// value serves every request. Edits that cover edits of earlier
	// passes replace them.
	Run(r *Request) ([]splice.Edit, error)
}

// PerMessage is implemented by passes whose edits of a message depend on
// that message alone (and on the tool calls it answers). Given a session's
// memory, Run remembers their edits and, on the next request, hands them
// back for the Stable messages and has the pass look only from r.From on.
type PerMessage interface {
	Pass
	PerMessage()
}

// Request is the state of one request moving through a pipeline. It is
// used by one goroutine at a time.
type Request struct {
	Ctx     context.Context
	Conv    *conversation.Conversation
	Session string // the session key (see package session), may be empty
	Env     *Env   // per-request facts shared by passes (model limits, ...)
	// Stable is how many leading messages are byte for byte, at the same
	// offsets, the messages of the previous request of this session that
	// went through this pipeline (0 when unknown). A pass may reuse what
	// it decided about them then; it must reach the same result as if it
	// looked again.
	Stable int
	// Memo, if not nil, is the session's memory between requests: passes
	// (and Run, for PerMessage passes) keep there what lets them skip the
	// Stable messages next time. Keys are pass names.
	Memo map[string]any
	// From is set by Run for a PerMessage pass: the first message it must
	// examine; Run supplies its earlier edits of the messages before.
	From int
	// Sizes, when a history pass set it, tells the passes after it how
	// large the session's earlier requests were as sent (with that pass's
	// edits), so that a pass judging the history by size replays the same
	// figures on every request. Nil means no pass set it: then sizes are
	// those of the messages as the client sent them (RawSizes).
	Sizes HistorySizer
	// Out, if not nil, supplies the memory Run writes a rewritten body
	// into: it is asked, once and only when there are edits, for a
	// buffer of at least n bytes, n being the rewritten body's exact
	// size (splice.Set.Size), so a pool can hand out memory of the size
	// that is sent rather than of the size that came in. Result.Body
	// then aliases that buffer, owned by the caller. Nil means a fresh
	// slice.
	Out func(n int) []byte

	edits        splice.Set
	removals     []Span
	settings     conversation.Settings
	settingEdits []conversation.SettingEdit
	headers      [][2]string
	notes        []string
}

// HistorySizer reports the sizes of a session's earlier requests. Request
// k of a session is the one that held the first k messages of the current
// request: what the client would have sent at that turn, against which
// savings are measured.
type HistorySizer interface {
	// Size returns the estimated tokens of messages [from, at) as they
	// were sent in the request that held the first at messages (0 <=
	// from <= at <= len(Messages)). It is a deterministic function of
	// those messages: the same on every later request of the session.
	Size(at, from int) int
}

// RawSizes is a HistorySizer over per-message token counts as the client
// sent them: Size(at, from) is the sum of counts[from:at].
type RawSizes []int

// NewRawSizes returns the prefix sums of counts as a RawSizes.
func NewRawSizes(counts []int) RawSizes {
	s := make(RawSizes, len(counts)+1)
	for i, n := range counts {
		s[i+1] = s[i] + n
	}
	return s
}

// Size implements HistorySizer.
func (s RawSizes) Size(at, from int) int { return s[at] - s[from] }

// Env carries what passes need to know about a request beyond its body.
// It is filled by the caller before Run.
type Env struct {
	Window    int // the model's context window in tokens
	MaxOutput int // the model's maximum output in tokens
	// Binding reports that the model enforces thinking-block binding to
	// the exact prefix it was produced with.
	Binding bool
	// Protocol names the request's protocol ("anthropic", "responses",
	// "chat"): passes that key what they store by content include it.
	Protocol string
	// Header is the request's header. Passes read it only to make a
	// model call on the session's behalf (its credentials), never retain
	// it past that call, and never log it.
	Header http.Header
	// Urgent is set when the request is a retry after the upstream said
	// it did not fit (overflow recovery): a pass must not wait for work
	// in the background, and uses what it has.
	Urgent bool
	// CacheWrite and CacheRead are the prices of a prompt-cache write and
	// read in thousandths of the base input price (model.Info.CachePrices);
	// zero means Anthropic's, 1250 and 100.
	CacheWrite, CacheRead int
	// Cold lists, in ascending order, the requests of the session that
	// arrived after its prompt cache had expired, each by the number of
	// messages it held (the `at` of the passes' replays of history). The
	// current request is among them when Cold holds len(Conv.Messages).
	// The engine decides each once, when the request arrives, and stores
	// it, so every later request, in any process on the store, sees the
	// same list: a pass may make an edit at a cold request that it would
	// not make at a warm one (the cache is written anew either way), and
	// its replays of history reproduce it. Entries beyond the current
	// request (a client that went back in its history) are to be ignored.
	Cold []int
}

// ColdAt reports whether the request holding the first at messages found
// the session's prompt cache cold (Cold). Safe on a nil Env.
func (e *Env) ColdAt(at int) bool {
	if e == nil {
		return false
	}
	_, ok := slices.BinarySearch(e.Cold, at)
	return ok
}

// Context returns the request's context: Ctx, or context.Background()
// when none was set. Passes bound their store calls with it.
func (r *Request) Context() context.Context {
	if r.Ctx == nil {
		return context.Background()
	}
	return r.Ctx
}

// Current returns the bytes of span sp as earlier passes left them: none
// when sp lies inside what an earlier pass replaced whole (a message the
// thinking guard rewrote, say), whose bytes are gone.
func (r *Request) Current(sp Span) ([]byte, error) {
	if r.edits.Inside(sp) {
		return nil, nil
	}
	return r.edits.Current(r.Conv.Body, sp)
}

// Edited reports whether any earlier edit touches sp.
func (r *Request) Edited(sp Span) bool { return r.edits.Touches(sp) }

// Require asks for request settings (conversation.Settings): the
// conversation's Dialect renders them, as edits counted to the pass that
// asked and headers the caller adds (Result.Headers).
func (r *Request) Require(s conversation.Settings) { r.settings |= s }

// Note records a short fact about what a pass decided, for logs and the
// x-ctxguard-* response headers. Notes never contain request content.
func (r *Request) Note(s string) { r.notes = append(r.notes, s) }

// RemoveBlock returns the edit that removes block bi of message mi. The
// pipeline widens it to take one separator with it (RemoveSpan). A pass
// must not remove every block of a message; it removes the message
// instead.
func (r *Request) RemoveBlock(mi, bi int) splice.Edit {
	return r.RemoveSpan(r.Conv.Messages[mi].Blocks[bi].Span)
}

// RemoveSpan returns the edit that removes sp, an element of a JSON array
// or a member of a JSON object (key through value). When the edits are
// finalized it is widened to take one separator with it (the comma after
// it, else the one before), and adjacent removals are merged, so the
// container stays valid JSON. Removing every element of a container is an
// error.
func (r *Request) RemoveSpan(sp Span) splice.Edit {
	r.removals = append(r.removals, sp)
	return splice.Edit{Span: sp}
}

// RemoveBlocks returns the edits that remove blocks bis (indexes in
// increasing order) of message mi. When they are every block of the
// message, the message is rewritten instead (Dialect.ReplaceMessage) to
// hold one text block with note, a JSON string literal (quotes included),
// since a message must not be left empty. The rewrite depends on the
// message and note alone, so two passes that empty the same message
// with the same note make the same edit.
func (r *Request) RemoveBlocks(mi int, bis []int, note []byte) []splice.Edit {
	m := &r.Conv.Messages[mi]
	if len(bis) == 0 {
		return nil
	}
	if len(bis) == len(m.Blocks) {
		d := r.Conv.Dialect
		sp, repl := d.ReplaceMessage(r.Conv, mi, [][]byte{d.AppendText(nil, m.Role, note, nil)})
		return []splice.Edit{{Span: sp, Repl: repl}}
	}
	out := make([]splice.Edit, len(bis))
	for i, bi := range bis {
		out[i] = r.RemoveBlock(mi, bi)
	}
	return out
}

// PassStat is what one pass did to one request: its name, its edits and
// the bytes it removed (negative if it added bytes). It is the
// exchange record's type (record.Pass).
type PassStat = record.Pass

// Result is the outcome of running a pipeline on one request.
type Result struct {
	Body    []byte // the body to send: the original when nothing changed or on failure
	Changed bool
	Passes  []PassStat
	// Headers are values to add to the request's list headers (name,
	// value), such as anthropic-beta, for the settings passes required.
	Headers [][2]string
	Notes   []string
	// Blobs are the distinct ids of the blobs the body refers to: those
	// named by the edits that made it (splice.Edit.Blob), each once, in
	// body order. An edit a later pass superseded does not count. The
	// caller keeps them alive (store.Blobs.Use) when it sends the body.
	// Nil when nothing changed or a pass failed.
	Blobs []string
	// Stubs are the edits of the body sent that name a blob (a stub or a
	// preview in place of content that was stored), in body order, for
	// the exchange's record. Their Repl is owned by the pass that made
	// it and not modified afterwards. Nil when nothing changed or a pass
	// failed.
	Stubs []splice.Edit
	// Settings are the edits of the settings passes required
	// (Request.Require), as the dialect rendered them: what the body
	// gained on purpose, not in place of content (PassStat.Added counts
	// their bytes). Nil when there were none or a pass failed.
	Settings []conversation.SettingEdit
	// Err is set when a pass failed and the original body was kept.
	Err      error
	FailedIn string // the pass that failed
	Elapsed  time.Duration
}

// Pipeline is a compiled, ordered list of passes.
type Pipeline struct {
	passes []Pass
	log    *slog.Logger
}

// New returns a pipeline running passes in order.
func New(log *slog.Logger, passes ...Pass) *Pipeline {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pipeline{passes: passes, log: log}
}

// Passes returns the names of the passes in order.
func (p *Pipeline) Passes() []string {
	n := make([]string, len(p.passes))
	for i, x := range p.passes {
		n[i] = x.Name()
	}
	return n
}

// PassError is a pass failure, with the pass's name.
type PassError struct {
	Pass string
	Err  error
}

func (e *PassError) Error() string { return fmt.Sprintf("pass %s: %v", e.Pass, e.Err) }
func (e *PassError) Unwrap() error { return e.Err }

// Run applies every pass to r and splices the result. It never panics: a
// failing pass makes it return the original body with Err set.
func (p *Pipeline) Run(r *Request) (res Result) {
	start := time.Now()
	body := r.Conv.Body
	res.Body = body
	defer func() { res.Elapsed = time.Since(start) }()
	for _, ps := range p.passes {
		st, err := p.runPass(ps, r)
		if err != nil {
			return Result{Body: body, Err: &PassError{Pass: ps.Name(), Err: err}, FailedIn: ps.Name(), Passes: res.Passes}
		}
		res.Passes = append(res.Passes, st)
	}
	if err := r.finalize(); err != nil {
		return Result{Body: body, Err: &PassError{Pass: "splice", Err: err}, FailedIn: "splice", Passes: res.Passes}
	}
	var out []byte
	var err error
	if r.Out != nil && r.edits.Len() > 0 {
		out, err = r.edits.AppendApply(r.Out(r.edits.Size(body))[:0], body)
	} else {
		out, err = r.edits.Apply(body)
	}
	if err != nil {
		return Result{Body: body, Err: &PassError{Pass: "splice", Err: err}, FailedIn: "splice", Passes: res.Passes}
	}
	res.Body = out
	res.Changed = r.edits.Len() > 0
	res.Headers = r.headers
	res.Settings = r.settingEdits
	res.Notes = r.notes
	edits := r.edits.Edits()
	res.Blobs = blobs(edits)
	if len(res.Blobs) > 0 {
		res.Stubs = make([]splice.Edit, 0, len(res.Blobs))
		for _, e := range edits {
			if e.Blob != "" {
				res.Stubs = append(res.Stubs, e)
			}
		}
	}
	return res
}

// blobs returns the distinct blob ids edits name, in the order they first
// appear. It runs on every request, over every edit: duplicates are
// dropped through a pooled open-addressing table of indexes into the
// result (a sort or a map costs about three times the collection).
func blobs(edits []splice.Edit) []string {
	n := 0
	for _, e := range edits {
		if e.Blob != "" {
			n += 1 + strings.Count(e.Blob, " ")
		}
	}
	if n == 0 {
		return nil
	}
	ids := make([]string, 0, n)
	if n == 1 {
		for _, e := range edits {
			if e.Blob != "" {
				return append(ids, e.Blob)
			}
		}
	}
	size := 1 << bits.Len(uint(2*n)) // a power of two over twice n: short probes
	tp, _ := idTables.Get().(*[]int32)
	if tp == nil {
		tp = new([]int32)
	}
	if cap(*tp) < size {
		*tp = make([]int32, size)
	}
	table := (*tp)[:size]
	clear(table) // 0 is empty; else index+1 in ids
	mask := uint64(size - 1)
	for _, e := range edits {
		for s := e.Blob; s != ""; {
			var id string
			id, s, _ = strings.Cut(s, " ")
			for h := maphash.String(idSeed, id) & mask; ; h = (h + 1) & mask {
				if table[h] == 0 {
					ids = append(ids, id)
					table[h] = int32(len(ids))
					break
				}
				if ids[table[h]-1] == id {
					break
				}
			}
		}
	}
	if size <= 1<<16 {
		idTables.Put(tp)
	}
	return ids
}

var (
	idSeed   = maphash.MakeSeed()
	idTables sync.Pool // of *[]int32, for blobs
)

func (p *Pipeline) runPass(ps Pass, r *Request) (st PassStat, err error) {
	st.Name = ps.Name()
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
		}
	}()
	asked := r.settings
	edits, err := runPass(ps, r)
	if err != nil {
		return st, err
	}
	if s := r.settings &^ asked; s != 0 && r.Conv.Dialect != nil {
		se, hs := r.Conv.Dialect.Settings(r.Conv, s)
		for _, e := range se {
			edits = append(edits, splice.Edit{Span: e.Span, Repl: e.Repl})
			st.Added += len(e.Repl) - e.Span.Len()
			r.settingEdits = append(r.settingEdits, e)
		}
		r.headers = append(r.headers, hs...)
	}
	before := r.edits.Size(r.Conv.Body)
	if err := r.edits.AddAll(edits); err != nil {
		return st, err
	}
	st.Edits = len(edits)
	st.Saved = before - r.edits.Size(r.Conv.Body) + st.Added
	return st, nil
}

// finalize widens removals so each takes one separator with it. Runs of
// adjacent removals (nothing but white space and one comma between them)
// are merged into one edit.
func (r *Request) finalize() error {
	if len(r.removals) == 0 {
		return nil
	}
	rm := r.removals
	slices.SortFunc(rm, func(a, b Span) int { return a.Start - b.Start })
	rm = slices.Compact(rm)
	// A removal inside what a later pass replaced whole (a message a
	// compaction summarized) is superseded with it.
	rm = slices.DeleteFunc(rm, r.edits.Inside)
	if len(rm) == 0 {
		return nil
	}
	body := r.Conv.Body
	widened := make([]splice.Edit, 0, len(rm))
	for i := 0; i < len(rm); {
		start, end := rm[i].Start, rm[i].End
		for i++; i < len(rm) && adjacent(body, end, rm[i].Start); i++ {
			end = rm[i].End
		}
		if k := jsonscan.SkipSpace(body, end); k < len(body) && body[k] == ',' {
			widened = append(widened, splice.Edit{Span: Span{Start: start, End: jsonscan.SkipSpace(body, k+1)}})
			continue
		}
		if k := spaceBefore(body, start); k > 0 && body[k-1] == ',' {
			widened = append(widened, splice.Edit{Span: Span{Start: spaceBefore(body, k-1), End: end}})
			continue
		}
		return fmt.Errorf("removal of every element of the container at offset %d", start)
	}
	return r.edits.AddAll(widened)
}

// adjacent reports whether only white space and one comma lie between
// offsets a and b of body.
func adjacent(body []byte, a, b int) bool {
	k := jsonscan.SkipSpace(body, a)
	return k < b && body[k] == ',' && jsonscan.SkipSpace(body, k+1) == b
}

// spaceBefore returns the offset at or before i where the white space
// that ends at i begins.
func spaceBefore(body []byte, i int) int {
	for i > 0 {
		switch body[i-1] {
		case ' ', '\t', '\n', '\r':
			i--
			continue
		}
		break
	}
	return i
}

// Footprinter is implemented by what passes keep in Request.Memo, to say
// how many bytes it holds.
type Footprinter interface{ Footprint() int }

// MemoFootprint approximates the bytes a session's Request.Memo holds:
// the edits Run keeps for PerMessage passes, and whatever passes keep
// that implements Footprinter (other values count nothing).
func MemoFootprint(memo map[string]any) int {
	n := 0
	for _, v := range memo {
		switch v := v.(type) {
		case []splice.Edit:
			n += cap(v) * int(unsafe.Sizeof(splice.Edit{}))
			for _, e := range v {
				n += cap(e.Repl)
			}
		case Footprinter:
			n += v.Footprint()
		}
	}
	return n
}

// runPass runs ps, reusing its earlier edits of the stable messages when
// it is a PerMessage pass and the session's memory has them.
func runPass(ps Pass, r *Request) ([]splice.Edit, error) {
	if _, ok := ps.(PerMessage); !ok || r.Memo == nil {
		r.From = 0
		return ps.Run(r)
	}
	key := "pipeline/" + ps.Name()
	var reused []splice.Edit
	r.From = 0
	if prev, ok := r.Memo[key].([]splice.Edit); ok && r.Stable > 0 && r.Stable <= len(r.Conv.Messages) {
		end := r.Conv.Messages[r.Stable-1].Span.End
		for _, e := range prev {
			if e.Span.End > end {
				break // edits are in body order
			}
			reused = append(reused, e)
		}
		r.From = r.Stable
	}
	edits, err := ps.Run(r)
	r.From = 0
	if err != nil {
		return nil, err
	}
	all := append(reused, edits...)
	byStart := func(a, b splice.Edit) int { return a.Span.Start - b.Span.Start }
	if !slices.IsSortedFunc(all, byStart) {
		slices.SortFunc(all, byStart)
	}
	r.Memo[key] = all
	return all, nil
}
