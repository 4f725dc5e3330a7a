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

// Parse locates the parts of a Chat Completions request body in one scan.
// It validates the whole body as encoding/json would (a
// *jsonscan.SyntaxError otherwise) and checks the shape it relies on
// (ErrShape otherwise). The result aliases body, which must not change
// while the result is in use. Call its Release when done with it to let
// the next Parse reuse its memory.
func Parse(body []byte) (*conv, error) { return parsers.Parse(body, nil, 0) }

// ParseAfter is Parse for a body that repeats, byte for byte, the start of
// an earlier body whose parse is prev: the first `stable` messages of prev
// (see Stable) are taken from prev instead of being scanned again. The
// result is exactly what Parse would return. prev is not changed.
func ParseAfter(body []byte, prev *conv, stable int) (*conv, error) {
	return parsers.Parse(body, prev, stable)
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

var parsers = convbuild.NewPool(convbuild.Format{Name: "Chat Completions request", NoList: "no messages array"}, (*parser).parse)

type parser struct {
	convbuild.Frame
	d     dialect
	marks int // cache_control markers in messages
}

func (p *parser) parse() (*conv, error) {
	if err := p.Top(p.member); err != nil {
		return nil, err
	}
	p.C.Dialect = &p.d
	p.C.CacheMarkers = p.marks
	return p.Done(conversation.RoleTool), nil
}

// member reads the top-level members of a Chat Completions request.
func (p *parser) member(k span, v int) (int, error) {
	switch string(p.Key(k)) {
	case "messages":
		p.marks = 0 // a repeated key: the last one wins
		end, marks, err := p.List(v, "messages is not an array", p.message)
		p.marks += marks
		return end, err
	case "tools":
		return p.Value(&p.C.Tools, v)
	case "metadata":
		return p.Member(&p.C.Metadata, k, v)
	case "prompt_cache_key":
		return p.Value(&p.d.cacheKey, v)
	}
	return jsonscan.Skip(p.B, v, 1)
}
