// Package anthropic is ctxguard's protocol adapter for the Anthropic
// Messages API: it finds the messages and content blocks of a request as
// byte spans (Parse), reads token usage from responses without buffering
// them (Usage, UsageTap), and renders errors the way the API does.
package anthropic

import (
	"fmt"
	"sync"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/convbuild"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/protocol"
)

type (
	span = jsonscan.Span
	conv = conversation.Conversation
)

// ErrShape is wrapped by Parse errors for bodies that are valid JSON but not
// a Messages request ctxguard understands (no messages array, a message
// that is not an object, ...). Such bodies are forwarded untouched. It is
// protocol.ErrShape.
var ErrShape = protocol.ErrShape

func shapeErr(off int, msg string) error {
	return fmt.Errorf("%w: Messages request: %s at offset %d", ErrShape, msg, off)
}

// Parse locates the parts of a Messages request body in one scan. It
// validates the whole body as encoding/json would (a *jsonscan.SyntaxError
// otherwise) and checks the shape it relies on (ErrShape otherwise). The
// result aliases body, which must not change while the result is in use.
//
// Call the result's Release when done with it to let the next Parse reuse
// its memory.
func Parse(body []byte) (*conv, error) {
	p := parsers.Get().(*parser)
	p.reset(body)
	c, err := p.parse()
	// The parser keeps no reference to the bodies once done: a pooled
	// parser (or a remembered parse, see ctxguard's memo) must not pin
	// a request's body.
	p.b, p.prev = nil, nil
	if err != nil {
		parsers.Put(p)
		return nil, err
	}
	c.OnRelease(func() { p.c.Body = nil; parsers.Put(p) })
	return c, nil
}

// ParseAfter is Parse for a body that repeats, byte for byte, the start
// of an earlier body whose parse is prev: the first `stable` messages of
// prev (which must end within the shared bytes, at the same offsets in
// body) are taken from prev instead of being scanned again, and the rest
// is parsed and validated as Parse does. The result is exactly what Parse
// would return. prev is not changed and may be released afterwards.
//
// It is how a session's next request, which repeats the last one and
// appends turns, costs a parse of the new turns only. The caller checks
// that the bytes are shared (see Stable).
func ParseAfter(body []byte, prev *conv, stable int) (*conv, error) {
	if prev == nil || stable <= 0 || stable > len(prev.Messages) {
		return Parse(body)
	}
	p := parsers.Get().(*parser)
	p.reset(body)
	p.prev, p.stable = prev, stable
	c, err := p.parse()
	// The parser keeps no reference to the bodies once done: a pooled
	// parser (or a remembered parse, see ctxguard's memo) must not pin
	// a request's body.
	p.b, p.prev = nil, nil
	if err != nil {
		parsers.Put(p)
		return nil, err
	}
	c.OnRelease(func() { p.c.Body = nil; parsers.Put(p) })
	return c, nil
}

// Stable returns how many leading messages of prev lie wholly within the
// bytes body shares with prev.Body, so ParseAfter may take them from prev.
// The last message of prev is never counted: clients re-encode it (Claude
// Code moves its cache marker off it), and a message is only stable when
// the message after it starts in the shared bytes too.
func Stable(prev *conv, body []byte) int { return convbuild.Stable(prev, body, nil) }

// parsers holds parsers with their arrays, so a request's Parse reuses the
// memory of an earlier, released one instead of allocating and clearing
// about as many bytes as the body holds.
var parsers = sync.Pool{New: func() any { return new(parser) }}

// reset readies p for body, keeping the capacity of its arrays.
func (p *parser) reset(body []byte) {
	*p = parser{b: body, bld: p.bld}
	p.bld.Reset(len(body))
}

type parser struct {
	b           []byte
	c           conv
	sawMessages bool
	// Cache markers per section (system, tools, messages): a repeated
	// top-level key replaces its section, as the last value wins.
	marks   [3]int
	section int
	bld     convbuild.Builder // messages, blocks and parts, reused across parses
	// prev and stable: messages to take from an earlier parse (ParseAfter).
	prev   *conv
	stable int
}

func (p *parser) key(k span, name string) bool { return jsonscan.KeyIs(p.b, k, name) }

// keyRaw returns the name of the key at k (jsonscan.Text): a switch on it
// costs no allocation.
func (p *parser) keyRaw(k span) []byte { return jsonscan.Text(p.b, k) }

func (p *parser) parse() (*conv, error) {
	b := p.b
	if i := jsonscan.SkipSpace(b, 0); i >= len(b) || b[i] != '{' {
		r, err := jsonscan.Root(b)
		if err != nil {
			return nil, err
		}
		return nil, shapeErr(r.Start, "body is not an object")
	}
	root, err := jsonscan.ObjectEach(b, 0, 0, func(k span, v int) (int, error) {
		switch string(p.keyRaw(k)) {
		case "messages":
			p.section, p.marks[2] = 2, 0
			return p.messages(v)
		case "model":
			s, err := jsonscan.ValueAt(b, v, 1)
			if err == nil {
				if jsonscan.KindOf(b, s) != jsonscan.String {
					return 0, shapeErr(s.Start, "model is not a string")
				}
				p.c.Model, err = jsonscan.Unquote(s.Bytes(b))
			}
			return s.End, err
		case "system":
			p.section, p.marks[0] = 0, 0
			s, err := p.system(v)
			p.c.System = s
			return s.End, err
		case "tools":
			p.section, p.marks[1] = 1, 0
			s, err := p.tools(v)
			p.c.Tools = s
			return s.End, err
		case "stream":
			s, err := jsonscan.ValueAt(b, v, 1)
			p.c.Stream = err == nil && string(s.Bytes(b)) == "true"
			return s.End, err
		case "thinking":
			return p.member(&p.c.Thinking, k, v)
		case "context_management":
			return p.member(&p.c.ContextManagement, k, v)
		case "metadata":
			return p.member(&p.c.Metadata, k, v)
		}
		return jsonscan.Skip(b, v, 1)
	})
	if err != nil {
		return nil, err
	}
	if i := jsonscan.SkipSpace(b, root.End); i != len(b) {
		return nil, &jsonscan.SyntaxError{Offset: i, Msg: "data after top-level value"}
	}
	if !p.sawMessages {
		return nil, shapeErr(root.Start, "no messages array")
	}
	p.c.Body = b
	p.c.Root = root
	p.c.Dialect = dialect{}
	p.c.CacheMarkers = p.marks[0] + p.marks[1] + p.marks[2]
	p.c.Messages = p.bld.Done()
	p.pair()
	return &p.c, nil
}

func (p *parser) member(m *conversation.Member, k span, v int) (int, error) {
	s, err := jsonscan.ValueAt(p.b, v, 1)
	*m = conversation.Member{Whole: span{Start: k.Start, End: s.End}, Value: s}
	return s.End, err
}

// hasCacheControl reports whether the cache_control member at v is a
// marker (anything but null).
func (p *parser) cacheControl(v int, depth int, dst *span, k span) (int, error) {
	s, err := jsonscan.ValueAt(p.b, v, depth)
	if err != nil {
		return 0, err
	}
	if jsonscan.KindOf(p.b, s) != jsonscan.Null {
		if dst.IsZero() { // a repeated key in one object is one marker
			p.marks[p.section]++
		}
		*dst = span{Start: k.Start, End: s.End}
	}
	return s.End, nil
}

// system accepts a string or an array of blocks, counting cache markers.
func (p *parser) system(v int) (span, error) {
	i := jsonscan.SkipSpace(p.b, v)
	if i < len(p.b) && p.b[i] == '[' {
		return jsonscan.ArrayEach(p.b, i, 1, func(e int) (int, error) {
			return p.anyBlock(e, 2)
		})
	}
	return jsonscan.ValueAt(p.b, v, 1)
}

func (p *parser) tools(v int) (span, error) {
	i := jsonscan.SkipSpace(p.b, v)
	if i < len(p.b) && p.b[i] == '[' {
		return jsonscan.ArrayEach(p.b, i, 1, func(e int) (int, error) {
			return p.anyBlock(e, 2)
		})
	}
	return jsonscan.ValueAt(p.b, v, 1)
}

// anyBlock skips a value, counting a top-level cache_control if it is an
// object.
func (p *parser) anyBlock(e, depth int) (int, error) {
	i := jsonscan.SkipSpace(p.b, e)
	if i >= len(p.b) || p.b[i] != '{' {
		return jsonscan.Skip(p.b, e, depth)
	}
	var cc span
	s, err := jsonscan.ObjectEach(p.b, i, depth, func(k span, v int) (int, error) {
		if p.key(k, "cache_control") {
			return p.cacheControl(v, depth+1, &cc, k)
		}
		return jsonscan.Skip(p.b, v, depth+1)
	})
	return s.End, err
}
