// Package prompt sees a Messages request the way the API's prompt cache
// does: tools, system, then every block of every message, in that order,
// with what the cache key ignores normalized away (cache_control members;
// a message sent as a plain string equals one text block). On that form it
// says whether one request extends another and prices a request under two
// cache models: the longest shared prefix, and hits only at cache_control
// breakpoints with a 20-block lookback. The replay report and the
// stickiness tests of the history pass both measure with it.
package prompt

import (
	"bytes"
	"crypto/sha256"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/tokens"
)

// Prices of the cache-aware cost model, as multiples of the base input
// price: a cache read costs 0.1x, a cache write 1.25x.
const (
	CacheRead  = 0.1
	CacheWrite = 1.25
)

// Lookback is how many block boundaries before a cache_control breakpoint
// the API checks for an earlier cache entry.
const Lookback = 20

// Prompt is a request linearized in the order the API reads it (tools,
// system, then each message's blocks), with what the cache key ignores
// normalized away: cache_control members are dropped, and a message sent
// as a plain string is the same as one text block. Both cost models work on
// this form, so the client's moving marker and its string re-encoding of
// the previous message do not count as changes.
type Prompt struct {
	segs   []segment
	tokens int
}

type segment struct {
	data   []byte // normalized bytes
	tokens int
	marker bool // a cache_control breakpoint ends here
	hash   [32]byte
}

// Parse builds the prompt form of a request body.
func Parse(body []byte) (*Prompt, error) {
	c, err := anthropic.Parse(body)
	if err != nil {
		return nil, err
	}
	return FromConversation(c), nil
}

// FromConversation is Parse for a request already parsed.
func FromConversation(c *conversation.Conversation) *Prompt {
	body := c.Body
	p := &Prompt{}
	add := func(data []byte, tok int, marker bool) {
		p.segs = append(p.segs, segment{data: data, tokens: tok, marker: marker})
		p.tokens += tok
	}
	eachObject := func(sp conversation.Span, prefix string) {
		switch jsonscan.KindOf(body, sp) {
		case jsonscan.Array:
			it := jsonscan.Elements(body, sp)
			for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
				data, marked := dropMarker(body, v)
				add(append([]byte(prefix), data...), tokens.Estimate(data), marked)
			}
		case jsonscan.String:
			add(append([]byte(prefix), c.Bytes(sp)...), tokens.Estimate(c.Bytes(sp)), false)
		}
	}
	eachObject(c.Tools, "tool:")
	eachObject(c.System, "system:")
	for _, m := range c.Messages {
		role := []byte("\x00" + m.Role.String() + ":")
		for bi, b := range m.Blocks {
			var data []byte
			marked := false
			var tok int
			switch {
			case b.Kind == conversation.Text && (m.ContentString || onlyTextAndMarker(body, b)):
				// A text block and a plain string are the same prompt.
				data = append([]byte(`{"type":"text","text":`), c.Bytes(b.Text)...)
				marked = !b.CacheControl.IsZero()
				tok = tokens.Estimate(c.Bytes(b.Text))
			default:
				data, marked = dropMarker(body, b.Span)
				tok = blockTokens(c, &b)
			}
			if bi == 0 {
				data = append(append([]byte{}, role...), data...)
			}
			add(data, tok, marked)
		}
	}
	var h [32]byte
	for i := range p.segs {
		s := sha256.New()
		s.Write(h[:])
		s.Write(p.segs[i].data)
		s.Sum(h[:0])
		p.segs[i].hash = h
	}
	return p
}

// blockTokens estimates a block's tokens (the estimator prices thinking
// signatures and images itself).
func blockTokens(c *conversation.Conversation, b *conversation.Block) int {
	return tokens.Estimate(c.Bytes(b.Span))
}

// onlyTextAndMarker reports whether a text block has no members besides
// type, text and cache_control, so it folds into a plain string.
func onlyTextAndMarker(body []byte, b conversation.Block) bool {
	only := true
	it := jsonscan.Members(body, b.Span)
	for k, _, ok := it.NextMember(); ok; k, _, ok = it.NextMember() {
		if !jsonscan.KeyIs(body, k, "type") && !jsonscan.KeyIs(body, k, "text") && !jsonscan.KeyIs(body, k, "cache_control") {
			only = false
		}
	}
	return only
}

// dropMarker returns the bytes of the value at sp without a top-level
// cache_control member, and whether it had one.
func dropMarker(body []byte, sp conversation.Span) ([]byte, bool) {
	if jsonscan.KindOf(body, sp) != jsonscan.Object {
		return sp.Bytes(body), false
	}
	cc, err := jsonscan.Lookup(body, sp, "cache_control")
	if err != nil || jsonscan.KindOf(body, cc) == jsonscan.Null {
		return sp.Bytes(body), false
	}
	var out []byte
	out = append(out, '{')
	first := true
	it := jsonscan.Members(body, sp)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		if jsonscan.KeyIs(body, k, "cache_control") {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, body[k.Start:v.End]...)
	}
	return append(out, '}'), true
}

// Shared returns the tokens of the longest byte prefix a and b share
// (a partly shared segment counts in proportion to its shared bytes), and
// whether b starts with all of a.
func Shared(a, b *Prompt) (int, bool) {
	tok := 0
	for i := range a.segs {
		if i >= len(b.segs) {
			return tok, false
		}
		x, y := a.segs[i], b.segs[i]
		if x.hash == y.hash {
			tok += y.tokens
			continue
		}
		n := commonPrefix(x.data, y.data)
		if len(y.data) > 0 {
			tok += y.tokens * n / len(y.data)
		}
		return tok, false
	}
	return tok, true
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n && bytes.Equal(a[i:i+8], b[i:i+8]) {
		i += 8
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// Cost is the cache-aware cost of sending cur after prev (nil for the
// first request): the shared prefix at CacheRead, the rest at CacheWrite.
func Cost(prev, cur *Prompt) float64 {
	return Priced(cur, PrefixRead(prev, cur))
}

// PrefixRead returns the tokens of cur the prefix model bills as a cache
// read: those of the longest byte prefix cur shares with prev (none when
// prev is nil).
func PrefixRead(prev, cur *Prompt) int {
	if prev == nil {
		return 0
	}
	shared, _ := Shared(prev, cur)
	return shared
}

// Priced is the cost of cur in base-input-token units when read of its
// tokens are cache reads and the rest cache writes.
func Priced(cur *Prompt, read int) float64 {
	return PricedAt(cur, read, CacheRead, CacheWrite)
}

// PricedAt is Priced with other multiples of the base input price: for
// OpenAI, which has no cache-write premium, write is 1 and read the
// model's cached-input price over its input price.
func PricedAt(cur *Prompt, read int, readMul, writeMul float64) float64 {
	return readMul*float64(read) + writeMul*float64(cur.tokens-read)
}

// BreakpointCache models the API's cache more strictly: an entry exists
// only for a prefix that ended at a cache_control breakpoint of an earlier
// request, and a request hits it only from one of its own breakpoints, at
// most Lookback block boundaries back.
type BreakpointCache struct {
	entries map[[32]byte]bool
}

// Read returns the tokens of cur billed as cache reads (the longest cached
// prefix reachable from one of its breakpoints) and records cur's
// breakpoints as cache entries.
func (bc *BreakpointCache) Read(cur *Prompt) int {
	if bc.entries == nil {
		bc.entries = map[[32]byte]bool{}
	}
	hit := -1 // index of the last segment of the longest cached prefix
	for i, s := range cur.segs {
		if !s.marker {
			continue
		}
		for k := i; k >= 0 && k >= i-Lookback; k-- {
			if k <= hit {
				break
			}
			if bc.entries[cur.segs[k].hash] {
				hit = k
				break
			}
		}
	}
	read := 0
	for k := 0; k <= hit; k++ {
		read += cur.segs[k].tokens
	}
	for _, s := range cur.segs {
		if s.marker {
			bc.entries[s.hash] = true
		}
	}
	return read
}

// Tokens returns the prompt's estimated tokens.
func (p *Prompt) Tokens() int { return p.tokens }

// Extends reports whether request body b extends request body a as the
// prompt cache sees them: b's prompt, read in the API's order (tools,
// system, then every block of every message), starts with all of a's,
// after the same normalization the cost model uses (cache_control members
// are ignored, and a message sent as a plain string equals one text block
// holding the same string bytes). So the client's moving cache marker and
// its string re-encoding of its previous last message do not count as
// changes; any other byte that differs in a's blocks does.
//
// A rewritten request that does not extend the previous rewritten request
// of its session is an edit event (see replay.Session). Top-level members other
// than tools, system and messages (model, thinking, metadata, ...) are not
// compared. The error is a parse error of a or b.
func Extends(a, b []byte) (bool, error) {
	pa, err := Parse(a)
	if err != nil {
		return false, err
	}
	pb, err := Parse(b)
	if err != nil {
		return false, err
	}
	_, ok := Shared(pa, pb)
	return ok, nil
}
