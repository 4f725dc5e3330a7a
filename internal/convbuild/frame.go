package convbuild

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/protocol"
)

// Frame is what every adapter's request parser is built on: the body
// being parsed, the conversation it builds, the arrays it builds it in,
// the earlier parse it may take messages from (ParseAfter), the walk of
// the top-level object (Top), the scan of the message list (List) and the
// shape errors. An adapter's parser embeds a Frame and runs in a Pool.
type Frame struct {
	B   []byte                    // the body; nil once the parse is done
	C   conversation.Conversation // the result, handed out as &C
	Bld Builder                   // messages, blocks and parts, reused across parses
	// Prev and Stable: the first Stable messages of Prev are taken over
	// rather than scanned (ParseAfter); Prev is nil for a plain Parse,
	// and once taken over.
	Prev    *conversation.Conversation
	Stable  int
	SawList bool // the message list's key was seen (the last one wins)

	format *Format
	pool   *sync.Pool // where the parser goes back on Release
	self   any        // the parser that embeds the Frame
}

// release hands the parser back to its pool (Conversation.Release).
func (f *Frame) release() { f.C.Body = nil; f.pool.Put(f.self) }

// frame makes every type that embeds a Frame a parser a Pool can run.
func (f *Frame) frame() *Frame { return f }

// Format names an adapter's request shape in its shape errors.
type Format struct {
	Name   string // the request, as in "Messages request"
	NoList string // what a body without the message list lacks, as in "no messages array"
}

// ShapeErr returns an error wrapping protocol.ErrShape that says what is
// wrong (msg) at byte offset off of the body.
func (f *Frame) ShapeErr(off int, msg string) error {
	return fmt.Errorf("%w: %s: %s at offset %d", protocol.ErrShape, f.format.Name, msg, off)
}

// Key returns the name of the key at k as it is in the body (see
// jsonscan.Text): a switch on string(f.Key(k)) costs no allocation.
func (f *Frame) Key(k jsonscan.Span) []byte { return jsonscan.Text(f.B, k) }

// Value records the span of the top-level value at v in dst and returns
// where it ends.
func (f *Frame) Value(dst *jsonscan.Span, v int) (int, error) {
	s, err := jsonscan.ValueAt(f.B, v, 1)
	*dst = s
	return s.End, err
}

// Member records the top-level member whose key is at k and whose value
// is at v in dst (conversation.Member) and returns where it ends.
func (f *Frame) Member(dst *conversation.Member, k jsonscan.Span, v int) (int, error) {
	s, err := jsonscan.ValueAt(f.B, v, 1)
	*dst = conversation.Member{Whole: jsonscan.Span{Start: k.Start, End: s.End}, Value: s}
	return s.End, err
}

// Top walks the top level of the body, which must be an object with
// nothing but white space after it (a *jsonscan.SyntaxError otherwise, or
// a shape error for valid JSON that is not an object). It reads "model"
// (a string, else a shape error) into C.Model and "stream" into C.Stream,
// and hands every other member to member, which returns where the value
// ends (jsonscan.Skip for members it does not read). It fails with a
// shape error when no member called List or StartList. On success it
// sets C.Body and C.Root; the adapter sets the rest of C.
func (f *Frame) Top(member func(k jsonscan.Span, v int) (int, error)) error {
	b := f.B
	if i := jsonscan.SkipSpace(b, 0); i >= len(b) || b[i] != '{' {
		r, err := jsonscan.Root(b)
		if err != nil {
			return err
		}
		return f.ShapeErr(r.Start, "body is not an object")
	}
	root, err := jsonscan.ObjectEach(b, 0, 0, func(k jsonscan.Span, v int) (int, error) {
		switch string(f.Key(k)) {
		case "model":
			s, err := jsonscan.ValueAt(b, v, 1)
			if err == nil {
				if jsonscan.KindOf(b, s) != jsonscan.String {
					return 0, f.ShapeErr(s.Start, "model is not a string")
				}
				f.C.Model, err = jsonscan.Unquote(s.Bytes(b))
			}
			return s.End, err
		case "stream":
			s, err := jsonscan.ValueAt(b, v, 1)
			f.C.Stream = err == nil && string(s.Bytes(b)) == "true"
			return s.End, err
		}
		return member(k, v)
	})
	if err != nil {
		return err
	}
	if i := jsonscan.SkipSpace(b, root.End); i != len(b) {
		return &jsonscan.SyntaxError{Offset: i, Msg: "data after top-level value"}
	}
	if !f.SawList {
		return f.ShapeErr(root.Start, f.format.NoList)
	}
	f.C.Body, f.C.Root = b, root
	return nil
}

// StartList readies f for the message list: a repeated key replaces the
// list before it, as the last one wins in encoding/json.
func (f *Frame) StartList() {
	if f.SawList {
		f.Bld.Clear()
	}
	f.SawList = true
}

// List scans the message list, the top-level value at v, which must be
// an array (a shape error saying notArray otherwise), calling elem with
// the offset of each element it scans; elem returns where the element
// ends. When the list starts where Prev's did, the first Stable messages
// of Prev are taken over (Builder.Reuse) and the scan starts after them;
// marks is how many cache markers those messages hold. List sets C.List.
func (f *Frame) List(v int, notArray string, elem func(v int) (int, error)) (end, marks int, err error) {
	b := f.B
	i := jsonscan.SkipSpace(b, v)
	if i >= len(b) || b[i] != '[' {
		s, err := jsonscan.ValueAt(b, v, 1)
		if err != nil {
			return 0, 0, err
		}
		return 0, 0, f.ShapeErr(s.Start, notArray)
	}
	f.StartList()
	var s jsonscan.Span
	if pv := f.Prev; pv != nil && pv.List.Start == i && len(f.Bld.Msgs) == 0 {
		f.Prev = nil // only the first list key can be reused
		var after int
		after, marks = f.Bld.Reuse(pv, f.Stable)
		s, err = jsonscan.ArrayEachAfter(b, i, after, elem)
	} else {
		s, err = jsonscan.ArrayEach(b, i, 1, elem)
	}
	f.C.List = s
	return s.End, marks, err
}

// Content scans the value at v, depth deep: an array, each of whose
// elements goes to elem, or any other value, which is only validated.
// It returns the value's span, and whether it is a string (a content or
// a tool result given as one text).
func (f *Frame) Content(v, depth int, elem func(v int) (int, error)) (s jsonscan.Span, str bool, err error) {
	if i := jsonscan.SkipSpace(f.B, v); i < len(f.B) && f.B[i] == '[' {
		s, err = jsonscan.ArrayEach(f.B, i, depth, elem)
		return s, false, err
	}
	s, err = jsonscan.ValueAt(f.B, v, depth)
	return s, err == nil && jsonscan.KindOf(f.B, s) == jsonscan.String, err
}

// Done hands the built messages out as C.Messages, pairs each tool result
// in a message of role results with the call of the same id in the
// assistant message just before it (Pair), and returns &C.
func (f *Frame) Done(results conversation.Role) *conversation.Conversation {
	f.C.Messages = f.Bld.Done()
	Pair(&f.C, results)
	return &f.C
}

// Pair links each ToolResult block of a message of role results (the
// user's for Anthropic, the tool side's for OpenAI) to the ToolCall block
// of the same id in the assistant message just before it: its Call
// locates the call and its Name is the call's name. A result whose call
// is not there keeps its Call and Name.
func Pair(c *conversation.Conversation, results conversation.Role) {
	msgs := c.Messages
	for mi := 1; mi < len(msgs); mi++ {
		m := &msgs[mi]
		if m.Role != results || msgs[mi-1].Role != conversation.RoleAssistant {
			continue
		}
		calls := msgs[mi-1].Blocks
		for bi := range m.Blocks {
			r := &m.Blocks[bi]
			if r.Kind != conversation.ToolResult {
				continue
			}
			for ci := range calls {
				if cl := &calls[ci]; cl.Kind == conversation.ToolCall && jsonscan.SameString(c.Body, cl.ID, r.ID) {
					r.Call, r.Name = [2]int{mi - 1, ci}, cl.Name
					break
				}
			}
		}
	}
}

// Pool runs an adapter's parsers, of type T (which embeds a Frame), and
// keeps them with their arrays between requests, so a request's parse
// reuses the memory of an earlier, released one instead of allocating
// and clearing about as many bytes as the body holds. Safe for concurrent
// use.
type Pool[T any, P interface {
	*T
	frame() *Frame
}] struct {
	format Format
	parse  func(P) (*conversation.Conversation, error)
	pool   sync.Pool
}

// NewPool returns a Pool whose parsers' shape errors name format and
// which parses with parse. parse sees a parser that is zero but for its
// Frame, which holds the body, and Prev and Stable for a ParseAfter; it
// returns Done's result or an error.
func NewPool[T any, P interface {
	*T
	frame() *Frame
}](format Format, parse func(P) (*conversation.Conversation, error)) *Pool[T, P] {
	return &Pool[T, P]{format: format, parse: parse}
}

// Parse parses body with a pooled parser, taking the first stable
// messages of prev over when prev is not nil and 0 < stable <=
// len(prev.Messages) (the adapter's ParseAfter; otherwise its Parse). The
// result aliases body; its Release hands the parser back to the pool.
// The parser keeps no reference to body or prev once Parse returns: a
// pooled parser, or a remembered parse, must not pin a request's body.
func (pl *Pool[T, P]) Parse(body []byte, prev *conversation.Conversation, stable int) (*conversation.Conversation, error) {
	if prev == nil || stable <= 0 || stable > len(prev.Messages) {
		prev, stable = nil, 0
	}
	p, _ := pl.pool.Get().(P)
	if p == nil {
		p = P(new(T))
	}
	bld := p.frame().Bld
	var zero T
	*p = zero
	f := p.frame()
	f.Bld, f.B, f.Prev, f.Stable = bld, body, prev, stable
	f.format, f.pool, f.self = &pl.format, &pl.pool, p
	f.Bld.Reset(len(body))
	c, err := pl.parse(p)
	f.B, f.Prev = nil, nil
	if err != nil {
		pl.pool.Put(p)
		if errors.Is(err, protocol.ErrShape) {
			// A shape error may come before the scan reached invalid
			// bytes: invalid JSON is a syntax error, whatever its shape.
			if _, serr := jsonscan.Root(body); serr != nil {
				err = serr
			}
		}
		return nil, err
	}
	c.OnRelease(f.release)
	return c, nil
}
