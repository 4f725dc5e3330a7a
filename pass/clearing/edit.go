package clearing

import (
	"errors"
	"slices"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/internal/stub"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/splice"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

// edits turns a plan into edits of the current request, in body order
// (message by message), so the pipeline need not sort them.
func (p *Pass) edits(r *pipeline.Request, a *analysis, pl plan) ([]splice.Edit, error) {
	c := r.Conv
	var out []splice.Edit
	runs := p.trimRuns(c, a, pl)
	var kept []int // items the latest event kept (file reads), ascending
	if n := len(pl.kept); n > 0 {
		for _, ri := range pl.kept[n-1] {
			kept = append(kept, a.reads[ri].item)
		}
	}
	firstItem := firstCleared(a, pl)
	trimmed := func(mi int) bool {
		for _, rn := range runs {
			if mi >= rn[0] && mi <= rn[1] {
				return true
			}
		}
		return false
	}
	to, mark, hasMark := p.cacheMarker(c, pl, trimmed)
	last := max(pl.clearTo, pl.thinkTo)
	if hasMark {
		last = max(last, to)
	}
	var howto string // of the drop notes, once per request
	if len(runs) > 0 {
		howto = p.blobs.Howto()
	}
	it := 0
	var msgEdits []splice.Edit
	for mi := 0; mi < last; mi++ {
		if len(runs) > 0 && mi == runs[0][0] {
			e, err := p.dropRun(r, runs[0][0], runs[0][1], howto)
			if errors.Is(err, store.ErrTooLarge) {
				// Over the store's blob limit: the run stays whole
				// (nothing is removed that cannot be got back).
				r.Note("clear: a run over the store's blob limit stays whole")
				e, err = nil, nil
			}
			if err != nil {
				return nil, err
			}
			out = append(out, e...)
			mi = runs[0][1]
			runs = runs[1:]
			for it < len(a.items) && a.items[it].msg <= mi {
				it++
			}
			continue
		}
		msgEdits = msgEdits[:0]
		for ; it < len(a.items) && a.items[it].msg == mi; it++ {
			item := a.items[it]
			if mi >= pl.clearTo {
				continue
			}
			for len(kept) > 0 && kept[0] < it {
				kept = kept[1:]
			}
			if len(kept) > 0 && kept[0] == it {
				continue // a file read the latest event kept
			}
			// The first item the session's events cleared never changes
			// (see firstCleared), so its stub carries, once, the
			// explanation of how to get a blob back; every other stub is
			// short. (When trimming dropped it, the drop notes say it.)
			e, ok, err := p.itemStub(r, item, it == firstItem)
			if err != nil {
				return nil, err
			}
			if ok {
				msgEdits = append(msgEdits, e)
			}
		}
		if p.cfg.Thinking && mi < pl.thinkTo {
			msgEdits = append(msgEdits, removeThinking(r, mi)...)
		}
		if hasMark && mi == to-1 {
			msgEdits = append(msgEdits, mark)
		}
		if len(msgEdits) > 1 {
			slices.SortFunc(msgEdits, func(x, y splice.Edit) int {
				if x.Span.Start != y.Span.Start {
					return x.Span.Start - y.Span.Start
				}
				return x.Span.End - y.Span.End
			})
		}
		out = append(out, msgEdits...)
	}
	return out, nil
}

// firstCleared returns the index (in a.items) of the first item the
// plan's events cleared: the lowest of those cleared by the earliest
// event that cleared any. Later events never change it, since they only
// add events after it. -1 if none.
func firstCleared(a *analysis, pl plan) int {
	from, it := 0, 0
	var prev []int // reads the previous event kept
	for k, e := range pl.events {
		first := -1
		// A read kept before and cleared now (prev is in item order).
		for _, ri := range prev {
			if !pl.keeps(k, ri) {
				first = a.reads[ri].item
				break
			}
		}
		// The first item of the event's new region it did not keep.
		for ; it < len(a.items) && a.items[it].msg < e.clearTo; it++ {
			if a.items[it].msg >= from && !keptItem(a, pl, k, it) {
				if first < 0 || it < first {
					first = it
				}
				break
			}
		}
		if first >= 0 {
			return first
		}
		from, prev = e.clearTo, pl.kept[k]
	}
	return -1
}

// keptItem reports whether event k of pl kept item it (a file read).
func keptItem(a *analysis, pl plan, k, it int) bool {
	for _, ri := range pl.kept[k] {
		if a.reads[ri].item == it {
			return true
		}
	}
	return false
}

// resultStub replaces a tool result's content with a stub naming the tool,
// the size, and where the full text is kept.
func (p *Pass) resultStub(r *pipeline.Request, b *conversation.Block, first bool) (splice.Edit, error) {
	c := r.Conv
	key := p.memo.key(c.Bytes(b.Content), 'r', first, c.Bytes(b.Name), p.blobs.Epoch())
	if m, ok := p.memo.get(key); ok {
		return splice.Edit{Span: b.Content, Repl: m.repl, Blob: m.blob}, nil
	}
	k, err := p.blobs.KeepFrom(r.Context(), c.Bytes(b.Content), func([]byte) ([]byte, error) { return c.ResultText(b) })
	if err != nil {
		return splice.Edit{}, err
	}
	m := stubEdit{repl: jsonscan.AppendQuote(nil, p.stub(c.ToolName(b)+" result, ", k, first)), blob: k.ID}
	p.memo.put(key, m)
	return splice.Edit{Span: b.Content, Repl: m.repl, Blob: m.blob}, nil
}

// stub renders the text that replaces a cleared item.
func (p *Pass) stub(what string, k store.Kept, first bool) string {
	core := what + stub.Size(k.Chars) + " chars, blob " + p.blobs.Name(k.ID) + "]"
	if first {
		return "[ctxguard clears old tool output to keep this session small; each cleared item names a blob with its full text: " +
			p.blobs.Howto() + ". This one: " + core
	}
	return "[ctxguard cleared " + core
}

// inputAfter estimates the tokens of a tool input once inputStub has
// rewritten it, and reports whether it has any field to clear.
func inputAfter(body []byte, in conversation.Span) (int, bool) {
	if jsonscan.KindOf(body, in) == jsonscan.String {
		// Free-form text (a custom tool's input) is cleared whole.
		return stubTokens, in.Len() >= inputFieldMin
	}
	n, big := 2, false
	jsonscan.ObjectEach(body, in.Start, 0, func(k jsonscan.Span, v int) (int, error) {
		val, err := jsonscan.ValueAt(body, v, 1)
		if err != nil {
			return 0, err
		}
		n += tokens.Estimate(k.Bytes(body)) + 1
		if val.Len() < inputFieldMin {
			n += tokens.Estimate(val.Bytes(body))
		} else {
			n += stubTokens
			big = true
		}
		return val.End, nil
	})
	return n, big
}

// inputFieldMin is the size (bytes of JSON) above which a tool input's
// field is cleared; smaller fields such as paths and flags stay.
const inputFieldMin = 200

// inputStub rewrites a tool call's input object, replacing each large field
// with a stub and keeping the small ones (file paths, flags) verbatim. An
// input sent encoded in a string is rewritten inside the string, which is
// then encoded again; a free-form text input is replaced whole.
func (p *Pass) inputStub(r *pipeline.Request, b *conversation.Block, first bool) (splice.Edit, error) {
	c := r.Conv
	key := p.memo.key(c.Bytes(b.Input), 'i', first, nil, p.blobs.Epoch())
	if m, ok := p.memo.get(key); ok {
		return splice.Edit{Span: b.Input, Repl: m.repl, Blob: m.blob}, nil
	}
	body, in := c.Input(b)
	if jsonscan.KindOf(body, in) == jsonscan.String {
		// Free-form text (a custom tool's input, such as a patch) becomes
		// one stub.
		kept, err := p.blobs.KeepFrom(r.Context(), in.Bytes(body), func(raw []byte) ([]byte, error) { return jsonscan.AppendUnquote(nil, raw) })
		if err != nil {
			return splice.Edit{}, err
		}
		m := stubEdit{repl: jsonscan.AppendQuote(nil, p.stub("", kept, first)), blob: kept.ID}
		p.memo.put(key, m)
		return splice.Edit{Span: b.Input, Repl: m.repl, Blob: m.blob}, nil
	}
	var out []byte
	var ids []string // of the blobs the stubs name
	out = append(out, '{')
	firstMember := true
	_, err := jsonscan.ObjectEach(body, in.Start, 0, func(k jsonscan.Span, v int) (int, error) {
		val, err := jsonscan.ValueAt(body, v, 1)
		if err != nil {
			return 0, err
		}
		if !firstMember {
			out = append(out, ',')
		}
		firstMember = false
		out = append(out, k.Bytes(body)...)
		out = append(out, ':')
		if val.Len() < inputFieldMin {
			out = append(out, val.Bytes(body)...)
			return val.End, nil
		}
		var decode func([]byte) ([]byte, error)
		if jsonscan.KindOf(body, val) == jsonscan.String {
			decode = func(raw []byte) ([]byte, error) { return jsonscan.AppendUnquote(nil, raw) }
		}
		kept, err := p.blobs.KeepFrom(r.Context(), val.Bytes(body), decode)
		if err != nil {
			return 0, err
		}
		out = jsonscan.AppendQuote(out, p.stub("", kept, first))
		ids = append(ids, kept.ID)
		first = false
		return val.End, nil
	})
	if err != nil {
		return splice.Edit{}, err
	}
	out = append(out, '}')
	if b.InputEncoded {
		out = jsonscan.AppendQuote(nil, string(out))
	}
	m := stubEdit{repl: out, blob: strings.Join(ids, " ")}
	p.memo.put(key, m)
	return splice.Edit{Span: b.Input, Repl: m.repl, Blob: m.blob}, nil
}

// removeThinking removes the thinking blocks of message mi, or rewrites
// the message to one short text block when they are all it holds (the
// same edit the thinking guard makes of such a message).
func removeThinking(r *pipeline.Request, mi int) []splice.Edit {
	m := &r.Conv.Messages[mi]
	if m.Role != conversation.RoleAssistant || m.ContentString {
		return nil
	}
	var think []int
	for bi, b := range m.Blocks {
		if b.Kind == conversation.Thinking || b.Kind == conversation.RedactedThinking {
			think = append(think, bi)
		}
	}
	return r.RemoveBlocks(mi, think, []byte(stub.RemovedReasoning))
}

// markerBoundary says where the spare cache_control marker goes: at the
// boundary of the latest event, whose prefix every later request shares,
// so the cache entry written there is read at the next event. In the
// request of an event itself the marker stays at the previous event's
// boundary: the API only finds an entry from a breakpoint at most 20
// blocks after it, so the breakpoint must sit where the entry was written.
// (Markers are not part of the cache key, so moving it afterwards costs
// nothing.)
func markerBoundary(pl plan, n int) int {
	ev := pl.events
	if k := len(ev); k > 0 && ev[k-1].at == n {
		ev = ev[:k-1]
	}
	if len(ev) == 0 {
		return 0
	}
	return ev[len(ev)-1].clearTo
}

// marker returns the edit that puts a cache marker (the Dialect's) on the
// last object block before message `to`. Protocols without markers (the
// API caches prefixes by itself) get none.
func marker(c *conversation.Conversation, to int, trimmed func(int) bool) (splice.Edit, bool) {
	mark := c.Dialect.CacheMarker(c)
	if mark == nil {
		return splice.Edit{}, false
	}
	for mi := to - 1; mi >= 0; mi-- {
		m := &c.Messages[mi]
		if trimmed(mi) {
			return splice.Edit{}, false // the message is rewritten whole
		}
		if m.ContentString || m.Role == conversation.RoleAssistant {
			continue // thinking there may be removed; strings cannot carry markers
		}
		for bi := len(m.Blocks) - 1; bi >= 0; bi-- {
			b := &m.Blocks[bi]
			if b.Kind == conversation.Opaque || c.Body[b.Span.Start] != '{' {
				continue
			}
			if !b.CacheControl.IsZero() {
				return splice.Edit{}, false // already marked
			}
			repl := append([]byte{','}, mark...)
			return splice.Edit{Span: splice.Span{Start: b.Span.End - 1, End: b.Span.End - 1}, Repl: repl}, true
		}
		return splice.Edit{}, false
	}
	return splice.Edit{}, false
}

// cacheMarker returns the cache marker the plan moves (markerBoundary),
// when the configuration moves one and the request has room for it: to
// is the message it goes before (0: none), ok whether mark is one.
func (p *Pass) cacheMarker(c *conversation.Conversation, pl plan, trimmed func(int) bool) (to int, mark splice.Edit, ok bool) {
	if !p.cfg.CacheMarker || c.CacheMarkers >= 4 {
		return 0, splice.Edit{}, false
	}
	to = markerBoundary(pl, len(c.Messages))
	if to > 0 {
		mark, ok = marker(c, to, trimmed)
	}
	return to, mark, ok
}

// itemStub returns the edit that replaces item with its stub (first: the
// stub that carries, once, how to get a blob back). ok is false when the
// item is over the store's blob limit: it stays whole.
func (p *Pass) itemStub(r *pipeline.Request, item item, first bool) (e splice.Edit, ok bool, err error) {
	b := &r.Conv.Messages[item.msg].Blocks[item.blk]
	switch item.kind {
	case kindResult:
		e, err = p.resultStub(r, b, first)
	case kindInput:
		e, err = p.inputStub(r, b, first)
	}
	if errors.Is(err, store.ErrTooLarge) {
		r.Note("clear: an item over the store's blob limit stays whole")
		return e, false, nil
	}
	return e, err == nil, err
}
