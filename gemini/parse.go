// Package gemini is ctxguard's protocol adapter for Google's Gemini API
// (generateContent and streamGenerateContent, on /v1beta/ and /v1/), the
// API the Gemini CLI and Google's SDKs speak. It finds the contents of a
// request as byte spans (Parse, ParseAfter, Stable), renders what passes
// ask for in the API's bytes (the Dialect), reads token usage from
// answers as they stream past (UsageTap: SSE with ?alt=sse, the JSON
// array stream without it, and plain JSON), renders errors in the API's
// shape, recognizes its context-overflow error, makes ctxguard's own
// summarizer calls (protocol.Caller), and checks requests and rewrites
// against the API's rules (Validate, ValidateRewrite).
//
// # The model and the stream come from the path
//
// A Gemini request names its model in the URL path
// (/v1beta/models/gemini-2.5-pro:streamGenerateContent), not in the body.
// Protocol implements protocol.PathBound: protocol.Pick hands the proxy
// Protocol.ForPath(path), whose Parse sets Conversation.Model and Stream
// from the path. A body's own "model" member ("models/gemini-2.5-pro", a
// member the API's request message has) is read when no path says.
//
// # The neutral view of a request
//
// "contents" is List; each entry is a Message whose Span is the content
// object and whose Content is its "parts" array. Role "model" is
// RoleAssistant; "user", a missing role and the legacy "function" role
// are RoleUser; any other role is RoleOther. "systemInstruction" is
// Conversation.System and "tools" is Tools; "toolConfig",
// "generationConfig", "safetySettings" and everything else are left
// alone. A "cachedContent" member sets Continued: the server holds a
// prefix the request does not carry, so only per-result rules apply.
//
// Each part is one Block whose Span is the part object:
//
//   - {"text": ...} is Text (Text: the string); with "thought": true it
//     is Thinking;
//   - a part with "thought": true and no text is RedactedThinking;
//   - "inlineData" and "fileData" are Image when their mimeType is an
//     image type, else Document;
//   - "functionCall" is ToolCall: ID its "id" string when there is one,
//     Name its "name", Input its "args" object (the input itself, not
//     encoded);
//   - "functionResponse" is ToolResult: ID and Name as for a call, and
//     Content the value of the single member of its "response" object
//     ({"output": ...} from the Gemini CLI, {"result": ...} or
//     {"error": ...} from the SDKs and the CLI, which sets IsError), where
//     any JSON value, a stub string included, keeps the request valid; Parts holds one part for it,
//     Text for a string, Opaque otherwise. A response of several members,
//     or one that is not an object, has no member a pass could replace
//     without breaking the API's Struct: the part is then Opaque;
//   - "executableCode", "codeExecutionResult" and every other part are
//     Opaque.
//
// A part's "thoughtSignature" is the opaque token the API minted for it;
// Signature locates it (on a thought, a text, a function call or any
// other part). It is never separated from its part: edits replace a
// call's args or a result's response value inside the part, and a part
// kept in a rewritten message is kept whole.
//
// A functionResponse answers the functionCall of the model message just
// before it that has the same id, or, when either has none, the first
// call of that message with the same name that no earlier response
// answered (the API pairs them by position).
package gemini

import (
	"strings"

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
// not a Gemini request ctxguard understands (no contents array, a content
// that is not an object, parts that are not an array). It is
// protocol.ErrShape.
var ErrShape = protocol.ErrShape

// Depths of nesting in a request: root 0, contents 1, content 2, its
// members 3 (role, parts), part 4, part members 5 (functionCall, ...),
// their members 6 (name, args, response), the response's members 7.
const (
	dContent  = 2
	dMember   = 3
	dPart     = 4
	dPartVal  = 5
	dInner    = 6
	dResponse = 7
)

// Parse locates the parts of a Gemini request body in one scan. It
// validates the whole body as encoding/json would (a *jsonscan.SyntaxError
// otherwise) and checks the shape it relies on (an error wrapping ErrShape
// otherwise). The model is the body's "model" member, without its
// "models/" prefix, if any (a request's path names it: Protocol.ForPath).
// The result aliases body, which must not change while the result is in
// use. Call its Release when done with it to let the next Parse reuse its
// memory.
func Parse(body []byte) (*conv, error) { return parsers.Parse(body, nil, 0) }

// ParseAfter is Parse for a body that repeats, byte for byte, the start of
// an earlier body whose parse is prev: the first stable messages of prev
// (see Stable) are taken from prev instead of being scanned again. The
// result is exactly what Parse would return. prev is not changed.
func ParseAfter(body []byte, prev *conv, stable int) (*conv, error) {
	return parsers.Parse(body, prev, stable)
}

// Stable returns how many leading messages of prev lie wholly within the
// bytes body shares with prev.Body, so ParseAfter may take them from prev
// (convbuild.Stable: the last message of prev never counts). A content is
// one JSON object, so it is known whole once the next one starts.
func Stable(prev *conv, body []byte) int { return convbuild.Stable(prev, body, nil) }

var parsers = convbuild.NewPool(convbuild.Format{Name: "Gemini request", NoList: "no contents array"}, (*parser).parse)

type parser struct {
	convbuild.Frame
	d         dialect
	continued bool
}

func (p *parser) parse() (*conv, error) {
	if err := p.Top(p.member); err != nil {
		return nil, err
	}
	p.C.Model = strings.TrimPrefix(p.C.Model, "models/")
	p.C.Continued = p.continued
	p.C.Dialect = &p.d
	// Not Frame.Done: its pairing is by id alone, and a Gemini call may
	// have none.
	p.C.Messages = p.Bld.Done()
	pair(&p.C)
	return &p.C, nil
}

// member reads the top-level members of a Gemini request.
func (p *parser) member(k span, v int) (int, error) {
	switch string(p.Key(k)) {
	case "contents":
		end, _, err := p.List(v, "contents is not an array", p.content)
		return end, err
	case "systemInstruction", "system_instruction":
		return p.Value(&p.C.System, v)
	case "tools":
		return p.Value(&p.C.Tools, v)
	case "cachedContent", "cached_content":
		s, err := jsonscan.ValueAt(p.B, v, 1)
		p.continued = err == nil && jsonscan.KindOf(p.B, s) != jsonscan.Null
		return s.End, err
	}
	return jsonscan.Skip(p.B, v, 1)
}

var noCall = [2]int{-1, -1}

// content parses one entry of contents: {"role": ..., "parts": [...]}.
func (p *parser) content(v int) (int, error) {
	i := jsonscan.SkipSpace(p.B, v)
	if i >= len(p.B) || p.B[i] != '{' {
		s, err := jsonscan.ValueAt(p.B, v, dContent)
		if err != nil {
			return 0, err
		}
		return 0, p.ShapeErr(s.Start, "content is not an object")
	}
	first, firstPart := len(p.Bld.Blocks), len(p.Bld.Parts)
	var role, parts span
	s, err := jsonscan.ObjectEach(p.B, i, dContent, func(k span, v int) (int, error) {
		switch string(p.Key(k)) {
		case "role":
			r, err := jsonscan.ValueAt(p.B, v, dMember)
			role = r
			return r.End, err
		case "parts":
			j := jsonscan.SkipSpace(p.B, v)
			if j >= len(p.B) || p.B[j] != '[' {
				r, err := jsonscan.ValueAt(p.B, v, dMember)
				if err != nil {
					return 0, err
				}
				return 0, p.ShapeErr(r.Start, "parts is not an array")
			}
			// A repeated key: the last one wins.
			p.Bld.Parts = p.Bld.Parts[:firstPart]
			p.Bld.TruncBlocks(first)
			r, err := jsonscan.ArrayEach(p.B, j, dMember, p.part)
			parts = r
			return r.End, err
		}
		return jsonscan.Skip(p.B, v, dMember)
	})
	if err != nil {
		return 0, err
	}
	p.Bld.Message(conversation.Message{Role: roleOf(p.B, role), Span: s, Content: parts}, first)
	return s.End, nil
}

func roleOf(b []byte, r span) conversation.Role {
	if r.IsZero() {
		return conversation.RoleUser // the API's default
	}
	if jsonscan.KindOf(b, r) != jsonscan.String {
		return conversation.RoleOther
	}
	switch string(jsonscan.Text(b, r)) {
	case "user", "function":
		return conversation.RoleUser
	case "model":
		return conversation.RoleAssistant
	}
	return conversation.RoleOther
}

// partFields are the members of a part the parser reads.
type partFields struct {
	text, thought, sig, inline, file span
	call, resp                       span // the functionCall or functionResponse value
	name, id, args                   span // of the call or response
	// respValue is the value of the last member of the response's
	// "response" object, and respCount how many members it has (-1: not
	// an object).
	respValue                   span
	respCount                   int
	respError                   bool // the last member is "error": the call failed
	executable, executionResult bool
}

// part parses one part.
func (p *parser) part(v int) (int, error) {
	b := p.B
	i := jsonscan.SkipSpace(b, v)
	firstPart := len(p.Bld.Parts)
	if i >= len(b) || b[i] != '{' {
		s, err := jsonscan.ValueAt(b, v, dPart)
		if err == nil {
			p.Bld.Block(conversation.Block{Kind: conversation.Opaque, Span: s, Call: noCall}, firstPart)
		}
		return s.End, err
	}
	var f partFields
	s, err := jsonscan.ObjectEach(b, i, dPart, func(k span, v int) (int, error) {
		var dst *span
		switch string(p.Key(k)) {
		case "text":
			dst = &f.text
		case "thought":
			dst = &f.thought
		case "thoughtSignature", "thought_signature":
			dst = &f.sig
		case "inlineData", "inline_data":
			dst = &f.inline
		case "fileData", "file_data":
			dst = &f.file
		case "functionCall", "function_call":
			return p.inner(v, &f, &f.call, false)
		case "functionResponse", "function_response":
			return p.inner(v, &f, &f.resp, true)
		case "executableCode", "executable_code":
			f.executable = true
			return jsonscan.Skip(b, v, dPartVal)
		case "codeExecutionResult", "code_execution_result":
			f.executionResult = true
			return jsonscan.Skip(b, v, dPartVal)
		default:
			return jsonscan.Skip(b, v, dPartVal)
		}
		x, err := jsonscan.ValueAt(b, v, dPartVal)
		*dst = x
		return x.End, err
	})
	if err != nil {
		return 0, err
	}
	p.Bld.Block(p.block(s, &f), firstPart)
	return s.End, nil
}

// inner parses the value of a functionCall or functionResponse member.
func (p *parser) inner(v int, f *partFields, dst *span, resp bool) (int, error) {
	b := p.B
	i := jsonscan.SkipSpace(b, v)
	if i >= len(b) || b[i] != '{' {
		x, err := jsonscan.ValueAt(b, v, dPartVal)
		*dst = x
		return x.End, err
	}
	f.name, f.id, f.args, f.respValue, f.respCount, f.respError = span{}, span{}, span{}, span{}, 0, false
	x, err := jsonscan.ObjectEach(b, i, dPartVal, func(k span, v int) (int, error) {
		switch string(p.Key(k)) {
		case "name":
			y, err := jsonscan.ValueAt(b, v, dInner)
			f.name = y
			return y.End, err
		case "id":
			y, err := jsonscan.ValueAt(b, v, dInner)
			f.id = y
			return y.End, err
		case "args":
			if resp {
				break
			}
			y, err := jsonscan.ValueAt(b, v, dInner)
			f.args = y
			return y.End, err
		case "response":
			if !resp {
				break
			}
			j := jsonscan.SkipSpace(b, v)
			f.respValue, f.respCount = span{}, 0
			if j >= len(b) || b[j] != '{' {
				y, err := jsonscan.ValueAt(b, v, dInner)
				f.respCount = -1
				return y.End, err
			}
			y, err := jsonscan.ObjectEach(b, j, dInner, func(k span, v int) (int, error) {
				z, err := jsonscan.ValueAt(b, v, dResponse)
				f.respCount++
				f.respValue = z
				f.respError = string(p.Key(k)) == "error"
				return z.End, err
			})
			return y.End, err
		}
		return jsonscan.Skip(b, v, dInner)
	})
	*dst = x
	return x.End, err
}

// block makes the Block of the part at s from its fields.
func (p *parser) block(s span, f *partFields) conversation.Block {
	b := p.B
	blk := conversation.Block{Kind: conversation.Opaque, Span: s, Call: noCall}
	if jsonscan.KindOf(b, f.sig) == jsonscan.String {
		blk.Signature = f.sig
	}
	thought := string(f.thought.Bytes(b)) == "true"
	str := func(x span) bool { return jsonscan.KindOf(b, x) == jsonscan.String }
	obj := func(x span) bool { return jsonscan.KindOf(b, x) == jsonscan.Object }
	switch {
	case !f.call.IsZero():
		blk.Type = "functionCall"
		if obj(f.call) && str(f.name) && (f.id.IsZero() || str(f.id)) && (f.args.IsZero() || obj(f.args)) {
			blk.Kind, blk.ID, blk.Name, blk.Input = conversation.ToolCall, f.id, f.name, f.args
		}
	case !f.resp.IsZero():
		blk.Type = "functionResponse"
		if obj(f.resp) && str(f.name) && (f.id.IsZero() || str(f.id)) && f.respCount == 1 {
			blk.Kind, blk.ID, blk.Name, blk.Content = conversation.ToolResult, f.id, f.name, f.respValue
			blk.IsError = f.respError
			pt := conversation.Part{Kind: conversation.Opaque, Span: f.respValue}
			if str(f.respValue) {
				pt.Kind, pt.Text = conversation.Text, f.respValue
			}
			p.Bld.Parts = append(p.Bld.Parts, pt)
		}
	case !f.inline.IsZero() || !f.file.IsZero():
		blk.Type, blk.Kind = "inlineData", conversation.Document
		data := f.inline
		if data.IsZero() {
			blk.Type, data = "fileData", f.file
		}
		if obj(data) {
			if mt, err := jsonscan.Lookup(b, data, "mimeType"); err == nil && str(mt) && strings.HasPrefix(string(jsonscan.Text(b, mt)), "image/") {
				blk.Kind = conversation.Image
			}
		}
	case f.executable:
		blk.Type = "executableCode"
	case f.executionResult:
		blk.Type = "codeExecutionResult"
	case str(f.text) && thought:
		blk.Type, blk.Kind, blk.Text = "thought", conversation.Thinking, f.text
	case str(f.text):
		blk.Type, blk.Kind, blk.Text = "text", conversation.Text, f.text
	case thought:
		blk.Type, blk.Kind = "thought", conversation.RedactedThinking
	}
	return blk
}

// pair links each functionResponse of a user message to the
// functionCall of the model message just before it that it answers:
// the call of the same id when both have one (even one another response
// answered), else the first call of the
// same name that no other response of the message answered, when the
// response or the call has no id.
func pair(c *conv) {
	msgs := c.Messages
	var used []bool
	for mi := 1; mi < len(msgs); mi++ {
		m := &msgs[mi]
		if m.Role != conversation.RoleUser || msgs[mi-1].Role != conversation.RoleAssistant {
			continue
		}
		calls := msgs[mi-1].Blocks
		used = append(used[:0], make([]bool, len(calls))...)
		for byID := range 2 {
			for bi := range m.Blocks {
				r := &m.Blocks[bi]
				if r.Kind != conversation.ToolResult || r.Call[0] >= 0 || (byID == 0 && r.ID.IsZero()) {
					continue
				}
				for ci := range calls {
					cl := &calls[ci]
					if cl.Kind != conversation.ToolCall || (used[ci] && byID == 1) {
						continue
					}
					var match bool
					if byID == 0 {
						// A call already answered may be answered again: the
						// Gemini CLI repeats the responses of a resumed
						// session's history.
						match = !cl.ID.IsZero() && jsonscan.SameString(c.Body, cl.ID, r.ID)
					} else {
						match = (r.ID.IsZero() || cl.ID.IsZero()) && jsonscan.SameString(c.Body, cl.Name, r.Name)
					}
					if match {
						used[ci], r.Call = true, [2]int{mi - 1, ci}
						break
					}
				}
			}
		}
	}
}
