// Package responses is ctxguard's protocol adapter for the OpenAI
// Responses API (POST /v1/responses), the API Codex CLI speaks: it finds
// the input items of a request as byte spans (Parse, ParseAfter, Stable),
// renders what passes ask for in the API's bytes (the Dialect), reads
// token usage from answers as they stream past (UsageTap), renders errors
// in the OpenAI shape, and checks requests and rewrites against the API's
// rules (Validate, ValidateRewrite).
//
// # The neutral view of a request
//
// The top-level "instructions" is Conversation.System, "tools" is Tools,
// "input" is List, "model" and "stream" are Model and Stream. A
// "previous_response_id" that is not null sets Continued: the history is
// kept by the server and the request holds only new items. "input" may be
// a string: it is then one user message whose Content is that string,
// with ContentString set and one Text block.
//
// Otherwise "input" is an array of items, and a Message is a run of
// consecutive items of one side (conversation's package documentation):
// its Span runs from the first item's start to the last item's end, and
// its Content is the same span. The sides are:
//
//   - a "message" item (or an item with a "role" and no "type", the API's
//     short form) is on the side of its role: user, assistant, developer
//     (RoleDeveloper) or system (RoleSystem); other roles are RoleOther;
//   - reasoning, function_call, custom_tool_call, local_shell_call, and
//     every other item type ending in "_call" (web_search_call,
//     computer_call, mcp_call, ...), mcp_list_tools and
//     mcp_approval_request are what the model produced: the assistant
//     side;
//   - function_call_output, custom_tool_call_output,
//     local_shell_call_output and every other type ending in "_output" are
//     the tool side (RoleTool);
//   - any other item (additional_tools, compaction, compaction_trigger,
//     item_reference, types this package does not know) is on the side of
//     its "role" member if it has one (Codex sends additional_tools with
//     role developer), else RoleOther. They are Opaque blocks, so no pass
//     edits them, and none of them is ever part of a tool round: a
//     compaction item stands for the whole history before it and must
//     never be dropped.
//
// A message item contributes one block per content part: input_text and
// output_text parts with a string "text" are Text blocks (Span the part,
// Text its text), input_image parts Image, input_file parts Document, and
// every other part Opaque. An item whose content is a string contributes
// one Text block whose Span and Text are that string; ContentString stays
// false, because the Message's Content is the item run, not a string (it
// is set only for a string "input").
//
// Every other item is one block whose Span is the item:
//
//   - function_call: ToolCall; ID the "call_id" string, Name the "name"
//     string, Input the "arguments" string with InputEncoded set (the
//     arguments are JSON encoded in a string);
//   - custom_tool_call: ToolCall; Input the free-form "input" string (an
//     apply_patch patch, a script; not JSON), InputEncoded false;
//   - local_shell_call: ToolCall with the "call_id" and no Name (the item
//     has none) and no Input: its "action" is an object the API checks
//     against a schema, so nothing in it may be replaced by a stub;
//   - function_call_output, custom_tool_call_output,
//     local_shell_call_output: ToolResult; ID the "call_id" (for
//     local_shell_call_output, whose id names the call, "id" when there is
//     no "call_id"), Content the "output" value, and Parts: one Text part
//     for a string output, or for an array one part per element (input_text
//     with a string text is Text, input_image Image, input_file Document,
//     the rest Opaque);
//   - reasoning, and every other item: Opaque, with Type the item's type.
//     Reasoning items carry encrypted_content the server checks (Signature
//     locates it when it is a string): they are never edited, only
//     dropped whole, and a rewrite that drops the call they preceded drops
//     them too (Dialect.KeptBlock).
//
// Items that miss what their kind needs (a function_call without a string
// call_id, say) are Opaque. A tool result is paired with the call it
// answers in the message just before it, as in the Anthropic adapter:
// Call locates the call and Name is the call's name.
//
// # Writing
//
// Passes change a tool output's "output" (a stub, a compressed text: a
// string is always valid there) and a call's "arguments" or custom
// "input" (both strings). When a pass rewrites a whole message (trimming
// drops old rounds) the Dialect keeps message items whole, keeps a
// reasoning item only together with the item after it, and wraps new text
// in a message item of the message's role (a user message on the tool
// side). The API caches prefixes by itself: there are no cache markers
// and no settings to ask for. SessionID is the prompt_cache_key, which
// Codex sets to its thread id.
//
// # Usage
//
// UsageTap reads the usage of the response.completed (or .incomplete,
// .failed) event, or of a JSON answer: input_tokens less
// input_tokens_details.cached_tokens is Input, cached_tokens CacheRead,
// output_tokens Output.
package responses

import (
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/convbuild"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

type (
	span = jsonscan.Span
	conv = conversation.Conversation
)

// Parse locates the parts of a Responses request body in one scan. It
// validates the whole body as encoding/json would (a *jsonscan.SyntaxError
// otherwise) and checks the shape it relies on (an error wrapping
// protocol.ErrShape otherwise: no input, an input that is neither a string
// nor an array, an item that is not an object). The result aliases body,
// which must not change while the result is in use.
//
// Call the result's Release when done with it to let the next Parse reuse
// its memory.
func Parse(body []byte) (*conv, error) { return parsers.Parse(body, nil, 0) }

// ParseAfter is Parse for a body that repeats, byte for byte, the start
// of an earlier body whose parse is prev: the first stable messages of
// prev (see Stable) are taken from prev instead of being scanned again,
// and the rest is parsed and validated as Parse does. The result is
// exactly what Parse would return. prev is not changed and may be
// released afterwards.
func ParseAfter(body []byte, prev *conv, stable int) (*conv, error) {
	return parsers.Parse(body, prev, stable)
}

// Stable returns how many leading messages of prev lie wholly within the
// bytes body shares with prev.Body, so ParseAfter may take them from prev.
// A message is a run of items that ends where an item of another side
// begins, so it counts only when the whole message after it is shared too
// (that item's side is then known to be the same in body); the last
// message of prev therefore never counts.
func Stable(prev *conv, body []byte) int {
	return convbuild.Stable(prev, body, func(k, shared int) bool {
		return prev.Messages[k+1].Span.End > shared
	})
}

var parsers = convbuild.NewPool(convbuild.Format{Name: "Responses request", NoList: "no input"}, (*parser).parse)

type parser struct {
	convbuild.Frame
	dia       dialect
	continued bool
}

func (p *parser) parse() (*conv, error) {
	if err := p.Top(p.member); err != nil {
		return nil, err
	}
	p.C.Continued = p.continued
	p.C.Dialect = &p.dia
	return p.Done(conversation.RoleTool), nil
}

// member reads the top-level members of a Responses request.
func (p *parser) member(k span, v int) (int, error) {
	b := p.B
	switch string(p.Key(k)) {
	case "input":
		return p.input(v)
	case "instructions":
		return p.Value(&p.C.System, v)
	case "tools":
		return p.Value(&p.C.Tools, v)
	case "previous_response_id":
		s, err := jsonscan.ValueAt(b, v, 1)
		p.continued = err == nil && jsonscan.KindOf(b, s) != jsonscan.Null
		return s.End, err
	case "prompt_cache_key":
		return p.Value(&p.dia.cacheKey, v)
	}
	return jsonscan.Skip(b, v, 1)
}
