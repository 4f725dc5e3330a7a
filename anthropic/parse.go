// Package anthropic is ctxguard's protocol adapter for the Anthropic
// Messages API: it finds the messages and content blocks of a request as
// byte spans (Parse), reads token usage from responses without buffering
// them (Usage, UsageTap), and renders errors the way the API does.
package anthropic

import (
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

// Parse locates the parts of a Messages request body in one scan. It
// validates the whole body as encoding/json would (a *jsonscan.SyntaxError
// otherwise) and checks the shape it relies on (ErrShape otherwise). The
// result aliases body, which must not change while the result is in use.
//
// Call the result's Release when done with it to let the next Parse reuse
// its memory.
func Parse(body []byte) (*conv, error) { return parsers.Parse(body, nil, 0) }

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
	return parsers.Parse(body, prev, stable)
}

// Stable returns how many leading messages of prev lie wholly within the
// bytes body shares with prev.Body, so ParseAfter may take them from prev.
// The last message of prev is never counted: clients re-encode it (Claude
// Code moves its cache marker off it), and a message is only stable when
// the message after it starts in the shared bytes too.
func Stable(prev *conv, body []byte) int { return convbuild.Stable(prev, body, nil) }

var parsers = convbuild.NewPool(convbuild.Format{Name: "Messages request", NoList: "no messages array"}, (*parser).parse)

type parser struct {
	convbuild.Frame
	// Cache markers per section (system, tools, messages): a repeated
	// top-level key replaces its section, as the last value wins.
	marks   [3]int
	section int
}

func (p *parser) key(k span, name string) bool { return jsonscan.KeyIs(p.B, k, name) }

func (p *parser) parse() (*conv, error) {
	if err := p.Top(p.member); err != nil {
		return nil, err
	}
	p.C.Dialect = dialect{}
	p.C.CacheMarkers = p.marks[0] + p.marks[1] + p.marks[2]
	return p.Done(conversation.RoleUser), nil
}

// member reads the top-level members of a Messages request.
func (p *parser) member(k span, v int) (int, error) {
	switch string(p.Key(k)) {
	case "messages":
		p.section, p.marks[2] = 2, 0
		end, marks, err := p.List(v, "messages is not an array", p.message)
		p.marks[2] += marks
		return end, err
	case "system":
		p.section, p.marks[0] = 0, 0
		s, err := p.system(v)
		p.C.System = s
		return s.End, err
	case "tools":
		p.section, p.marks[1] = 1, 0
		s, err := p.tools(v)
		p.C.Tools = s
		return s.End, err
	case "thinking":
		return p.Member(&p.C.Thinking, k, v)
	case "context_management":
		return p.Member(&p.C.ContextManagement, k, v)
	case "metadata":
		return p.Member(&p.C.Metadata, k, v)
	}
	return jsonscan.Skip(p.B, v, 1)
}

// hasCacheControl reports whether the cache_control member at v is a
// marker (anything but null).
func (p *parser) cacheControl(v int, depth int, dst *span, k span) (int, error) {
	s, err := jsonscan.ValueAt(p.B, v, depth)
	if err != nil {
		return 0, err
	}
	if jsonscan.KindOf(p.B, s) != jsonscan.Null {
		if dst.IsZero() { // a repeated key in one object is one marker
			p.marks[p.section]++
		}
		*dst = span{Start: k.Start, End: s.End}
	}
	return s.End, nil
}

// system accepts a string or an array of blocks, counting cache markers.
func (p *parser) system(v int) (span, error) {
	i := jsonscan.SkipSpace(p.B, v)
	if i < len(p.B) && p.B[i] == '[' {
		return jsonscan.ArrayEach(p.B, i, 1, func(e int) (int, error) {
			return p.anyBlock(e, 2)
		})
	}
	return jsonscan.ValueAt(p.B, v, 1)
}

func (p *parser) tools(v int) (span, error) {
	i := jsonscan.SkipSpace(p.B, v)
	if i < len(p.B) && p.B[i] == '[' {
		return jsonscan.ArrayEach(p.B, i, 1, func(e int) (int, error) {
			return p.anyBlock(e, 2)
		})
	}
	return jsonscan.ValueAt(p.B, v, 1)
}

// anyBlock skips a value, counting a top-level cache_control if it is an
// object.
func (p *parser) anyBlock(e, depth int) (int, error) {
	i := jsonscan.SkipSpace(p.B, e)
	if i >= len(p.B) || p.B[i] != '{' {
		return jsonscan.Skip(p.B, e, depth)
	}
	var cc span
	s, err := jsonscan.ObjectEach(p.B, i, depth, func(k span, v int) (int, error) {
		if p.key(k, "cache_control") {
			return p.cacheControl(v, depth+1, &cc, k)
		}
		return jsonscan.Skip(p.B, v, depth+1)
	})
	return s.End, err
}
