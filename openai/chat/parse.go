// Package chat is ctxguard's protocol adapter for OpenAI Chat Completions
// (POST /v1/chat/completions), the API opencode (@ai-sdk/openai-compatible)
// and most OpenAI-compatible apps and providers (OpenRouter, vLLM,
// DeepSeek, ...) speak. It finds the messages of a request as byte spans
// (Parse), reads token usage from answers without buffering them
// (UsageTap), renders what passes ask for in the API's bytes (the
// Dialect) and checks the API's rules on a request and a rewrite
// (Validate, ValidateRewrite).
//
// How a request maps onto a conversation:
//
//   - Every entry of "messages" is a message of its role (system,
//     developer, user, assistant; other roles are RoleOther), except that
//     a run of consecutive "tool" messages is ONE message of RoleTool:
//     the turn that answers the assistant message before it. Its blocks
//     are ToolResult blocks, one per tool message (Span: the tool message
//     object, ID: its tool_call_id, Content: its content, Parts: one Text
//     part for a string, one part per element of an array), paired with
//     the assistant's call of the same id (Call, Name). Its Span runs from
//     the first tool message to the last; Content is zero.
//   - Conversation.System stays zero: system and developer messages are
//     messages of the list (RoleSystem, RoleDeveloper), where the API has
//     them, so passes see and keep them in place.
//   - Content is a string (ContentString, one Text block) or an array of
//     parts: text is a Text block, image_url an Image, file a Document,
//     anything else (input_audio, refusal, unknown) Opaque. Null or absent
//     content gives no block.
//   - An assistant's "tool_calls" are ToolCall blocks (Span: the call
//     object, ID, Name: function.name, Input: function.arguments, the JSON
//     string holding the encoded arguments, so InputEncoded is set). The
//     reasoning fields some providers add (reasoning_content, reasoning,
//     reasoning_details), the legacy function_call, refusal and audio are
//     Opaque blocks whose Span is the member (key through value): passes
//     never edit them. Blocks are in body order.
package chat

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

// ErrShape is wrapped by Parse errors for bodies that are valid JSON but
// not a Chat Completions request ctxguard understands (no messages array,
// a message that is not an object, ...). It is protocol.ErrShape.
var ErrShape = protocol.ErrShape

func shapeErr(off int, msg string) error {
	return fmt.Errorf("%w: Chat Completions request: %s at offset %d", ErrShape, msg, off)
}

// Parse locates the parts of a Chat Completions request body in one scan.
// It validates the whole body as encoding/json would (a
// *jsonscan.SyntaxError otherwise) and checks the shape it relies on
// (ErrShape otherwise). The result aliases body, which must not change
// while the result is in use. Call its Release when done with it to let
// the next Parse reuse its memory.
func Parse(body []byte) (*conv, error) {
	return parseWith(body, nil, 0)
}

// ParseAfter is Parse for a body that repeats, byte for byte, the start of
// an earlier body whose parse is prev: the first `stable` messages of prev
// (see Stable) are taken from prev instead of being scanned again. The
// result is exactly what Parse would return. prev is not changed.
func ParseAfter(body []byte, prev *conv, stable int) (*conv, error) {
	if prev == nil || stable <= 0 || stable > len(prev.Messages) {
		return Parse(body)
	}
	return parseWith(body, prev, stable)
}

func parseWith(body []byte, prev *conv, stable int) (*conv, error) {
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
// opencode's requests repeat the previous messages array byte for byte
// (WIRE.md §2.4); the last message of prev is still never counted, a
// message only when the message after it starts in the shared bytes too,
// and a run of tool messages only when the message after it is shared
// whole (else the run might go on in body).
func Stable(prev *conv, body []byte) int {
	return convbuild.Stable(prev, body, func(k, shared int) bool {
		// The next body may carry a tool message where prev had the
		// message after the run: the run would grow, so it is only stable
		// when that message is shared whole.
		return prev.Messages[k].Role == conversation.RoleTool && prev.Messages[k+1].Span.End > shared
	})
}

var parsers = sync.Pool{New: func() any { return new(parser) }}

type parser struct {
	b           []byte
	c           conv
	d           dialect
	sawMessages bool
	marks       int // cache_control markers in messages
	bld         convbuild.Builder
	// toolOpen is set when the last message is a run of tool messages
	// that the next wire message extends if it is a tool message too.
	toolOpen bool
	prev     *conv
	stable   int
}

func (p *parser) reset(body []byte) {
	*p = parser{b: body, bld: p.bld}
	p.bld.Reset(len(body))
}

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
		case "tools":
			s, err := jsonscan.ValueAt(b, v, 1)
			p.c.Tools = s
			return s.End, err
		case "stream":
			s, err := jsonscan.ValueAt(b, v, 1)
			p.c.Stream = err == nil && string(s.Bytes(b)) == "true"
			return s.End, err
		case "metadata":
			s, err := jsonscan.ValueAt(b, v, 1)
			p.c.Metadata = conversation.Member{Whole: span{Start: k.Start, End: s.End}, Value: s}
			return s.End, err
		case "prompt_cache_key":
			s, err := jsonscan.ValueAt(b, v, 1)
			p.d.cacheKey = s
			return s.End, err
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
	p.c.Dialect = &p.d
	p.c.CacheMarkers = p.marks
	p.c.Messages = p.bld.Done()
	p.pair()
	return &p.c, nil
}

// pair links each tool result to the call of the same id in the assistant
// message just before its run of tool messages, and copies the call's
// name onto the result.
func (p *parser) pair() {
	msgs := p.c.Messages
	for mi := 1; mi < len(msgs); mi++ {
		m := &msgs[mi]
		if m.Role != conversation.RoleTool || msgs[mi-1].Role != conversation.RoleAssistant {
			continue
		}
		calls := msgs[mi-1].Blocks
		for bi := range m.Blocks {
			r := &m.Blocks[bi]
			if r.Kind != conversation.ToolResult {
				continue
			}
			r.Call, r.Name = [2]int{-1, -1}, span{}
			for ci := range calls {
				if c := &calls[ci]; c.Kind == conversation.ToolCall && jsonscan.SameString(p.b, c.ID, r.ID) {
					r.Call, r.Name = [2]int{mi - 1, ci}, c.Name
					break
				}
			}
		}
	}
}
