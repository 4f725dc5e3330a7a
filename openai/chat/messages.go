package chat

import (
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Depths of nesting in a request: root 0, messages array 1, message 2,
// member values 3 (content, tool_calls), part or call 4, their members 5,
// a call's function members 6.
const (
	dMessage = 2
	dMember  = 3
	dPart    = 4
	dPartVal = 5
	dFuncVal = 6
)

// memberTypes are the assistant message members that are kept as Opaque
// blocks: what some providers add (reasoning) and what the API has
// besides content and tool calls.
var memberTypes = []string{"reasoning_content", "reasoning", "reasoning_details", "function_call", "refusal", "audio"}

func memberType(k []byte) string {
	for _, t := range memberTypes {
		if string(k) == t {
			return t
		}
	}
	return ""
}

// message parses one wire message. A tool message joins the run of tool
// messages just before it, if any, as one more ToolResult block.
func (p *parser) message(v int) (int, error) {
	i := jsonscan.SkipSpace(p.B, v)
	if i >= len(p.B) || p.B[i] != '{' {
		s, err := jsonscan.ValueAt(p.B, v, dMessage)
		if err != nil {
			return 0, err
		}
		return 0, p.ShapeErr(s.Start, "message is not an object")
	}
	first := len(p.Bld.Blocks)
	firstPart := len(p.Bld.Parts)
	var roleSp, content, callID span
	var str, sawContent, sawCalls bool
	s, err := jsonscan.ObjectEach(p.B, i, dMessage, func(k span, v int) (int, error) {
		key := p.Key(k)
		switch string(key) {
		case "role":
			r, err := jsonscan.ValueAt(p.B, v, dMember)
			roleSp = r
			return r.End, err
		case "content":
			if sawContent {
				return 0, p.ShapeErr(k.Start, "repeated content")
			}
			sawContent = true
			c, isStr, err := p.content(v)
			content, str = c, isStr
			return c.End, err
		case "tool_calls":
			if sawCalls {
				return 0, p.ShapeErr(k.Start, "repeated tool_calls")
			}
			sawCalls = true
			return p.toolCalls(v)
		case "tool_call_id":
			r, err := jsonscan.ValueAt(p.B, v, dMember)
			callID = r
			return r.End, err
		}
		if t := memberType(key); t != "" {
			r, err := jsonscan.ValueAt(p.B, v, dMember)
			if err != nil {
				return 0, err
			}
			p.addBlock(conversation.Block{Kind: conversation.Opaque, Type: t, Span: span{Start: k.Start, End: r.End}, Call: noCall})
			return r.End, nil
		}
		return jsonscan.Skip(p.B, v, dMember)
	})
	if err != nil {
		return 0, err
	}
	role := roleOf(p.B, roleSp)
	if role != conversation.RoleTool {
		p.Bld.Message(conversation.Message{Role: role, Span: s, Content: content, ContentString: str}, first)
		p.marks += p.Bld.Marks(first)
		return s.End, nil
	}
	// A tool message: its content's blocks become the parts of one
	// ToolResult block.
	blk := conversation.Block{Kind: conversation.ToolResult, Type: "tool", Span: s, ID: callID, Content: content, Call: noCall}
	kc := jsonscan.KindOf(p.B, content)
	if jsonscan.KindOf(p.B, callID) != jsonscan.String || (kc != jsonscan.String && kc != jsonscan.Array) {
		blk = conversation.Block{Kind: conversation.Opaque, Type: "tool", Span: s, Call: noCall}
	} else {
		for bi := first; bi < len(p.Bld.Blocks); bi++ {
			b := &p.Bld.Blocks[bi]
			if !content.Contains(b.Span) {
				continue // a member a tool message has no business carrying
			}
			p.Bld.Parts = append(p.Bld.Parts, conversation.Part{Kind: partKind(b.Kind), Span: b.Span, Text: b.Text, CacheControl: b.CacheControl})
		}
	}
	// Message content blocks have no parts, so the parts made above start
	// at firstPart; an Opaque tool message keeps none.
	if blk.Kind == conversation.Opaque {
		p.Bld.Parts = p.Bld.Parts[:firstPart]
	}
	p.Bld.TruncBlocks(first)
	p.Bld.Block(blk, firstPart)
	if n := len(p.Bld.Msgs); n > 0 && p.Bld.Msgs[n-1].Role == conversation.RoleTool {
		// The run of tool messages before it goes on.
		p.Bld.Extend(s.End)
	} else {
		p.Bld.Message(conversation.Message{Role: conversation.RoleTool, Span: s}, first)
	}
	p.marks += p.Bld.Marks(first)
	return s.End, nil
}

var noCall = [2]int{-1, -1}

func (p *parser) addBlock(b conversation.Block) { p.Bld.Block(b, len(p.Bld.Parts)) }

// partKind is the kind of a tool result part made of a content block.
func partKind(k conversation.Kind) conversation.Kind {
	switch k {
	case conversation.Text, conversation.Image, conversation.Document:
		return k
	}
	return conversation.Opaque
}

func roleOf(b []byte, r span) conversation.Role {
	if jsonscan.KindOf(b, r) != jsonscan.String {
		return conversation.RoleOther
	}
	switch string(jsonscan.Text(b, r)) {
	case "user":
		return conversation.RoleUser
	case "assistant":
		return conversation.RoleAssistant
	case "system":
		return conversation.RoleSystem
	case "developer":
		return conversation.RoleDeveloper
	case "tool":
		return conversation.RoleTool
	}
	return conversation.RoleOther
}

// content parses a message's content: a string (one Text block), an array
// of parts, or anything else (null), which gives no block.
func (p *parser) content(v int) (span, bool, error) {
	s, str, err := p.Content(v, dMember, p.part)
	if str {
		p.addBlock(conversation.Block{Kind: conversation.Text, Type: "text", Span: s, Text: s, Call: noCall})
	}
	return s, str, err
}

// part parses one content part.
func (p *parser) part(v int) (int, error) {
	i := jsonscan.SkipSpace(p.B, v)
	if i >= len(p.B) || p.B[i] != '{' {
		s, err := jsonscan.ValueAt(p.B, v, dPart)
		if err == nil {
			p.addBlock(conversation.Block{Kind: conversation.Opaque, Span: s, Call: noCall})
		}
		return s.End, err
	}
	var typ, text, cc span
	s, err := jsonscan.ObjectEach(p.B, i, dPart, func(k span, v int) (int, error) {
		var dst *span
		switch string(p.Key(k)) {
		case "type":
			dst = &typ
		case "text":
			dst = &text
		case "cache_control":
			x, err := jsonscan.ValueAt(p.B, v, dPartVal)
			if err == nil && jsonscan.KindOf(p.B, x) != jsonscan.Null {
				cc = span{Start: k.Start, End: x.End}
			}
			return x.End, err
		default:
			return jsonscan.Skip(p.B, v, dPartVal)
		}
		x, err := jsonscan.ValueAt(p.B, v, dPartVal)
		*dst = x
		return x.End, err
	})
	if err != nil {
		return 0, err
	}
	blk := conversation.Block{Kind: conversation.Opaque, Span: s, CacheControl: cc, Call: noCall}
	if jsonscan.KindOf(p.B, typ) == jsonscan.String {
		switch t := jsonscan.Text(p.B, typ); string(t) {
		case "text":
			blk.Type = "text"
			if jsonscan.KindOf(p.B, text) == jsonscan.String {
				blk.Kind, blk.Text = conversation.Text, text
			}
		case "image_url":
			blk.Kind, blk.Type = conversation.Image, "image_url"
		case "file":
			blk.Kind, blk.Type = conversation.Document, "file"
		case "input_audio":
			blk.Type = "input_audio"
		case "refusal":
			blk.Type = "refusal"
		default:
			blk.Type = string(t)
		}
	}
	p.addBlock(blk)
	return s.End, nil
}

// toolCalls parses an assistant's tool_calls: each element a ToolCall
// block, or Opaque when it is not a well-formed function call.
func (p *parser) toolCalls(v int) (int, error) {
	i := jsonscan.SkipSpace(p.B, v)
	if i >= len(p.B) || p.B[i] != '[' {
		return jsonscan.Skip(p.B, v, dMember)
	}
	s, err := jsonscan.ArrayEach(p.B, i, dMember, p.toolCall)
	return s.End, err
}

func (p *parser) toolCall(v int) (int, error) {
	i := jsonscan.SkipSpace(p.B, v)
	if i >= len(p.B) || p.B[i] != '{' {
		s, err := jsonscan.ValueAt(p.B, v, dPart)
		if err == nil {
			p.addBlock(conversation.Block{Kind: conversation.Opaque, Span: s, Call: noCall})
		}
		return s.End, err
	}
	var id, typ, fn, name, args span
	s, err := jsonscan.ObjectEach(p.B, i, dPart, func(k span, v int) (int, error) {
		switch string(p.Key(k)) {
		case "id":
			x, err := jsonscan.ValueAt(p.B, v, dPartVal)
			id = x
			return x.End, err
		case "type":
			x, err := jsonscan.ValueAt(p.B, v, dPartVal)
			typ = x
			return x.End, err
		case "function":
			j := jsonscan.SkipSpace(p.B, v)
			if j >= len(p.B) || p.B[j] != '{' {
				x, err := jsonscan.ValueAt(p.B, v, dPartVal)
				fn, name, args = x, span{}, span{}
				return x.End, err
			}
			name, args = span{}, span{}
			x, err := jsonscan.ObjectEach(p.B, j, dPartVal, func(k span, v int) (int, error) {
				var dst *span
				switch string(p.Key(k)) {
				case "name":
					dst = &name
				case "arguments":
					dst = &args
				default:
					return jsonscan.Skip(p.B, v, dFuncVal)
				}
				y, err := jsonscan.ValueAt(p.B, v, dFuncVal)
				*dst = y
				return y.End, err
			})
			fn = x
			return x.End, err
		}
		return jsonscan.Skip(p.B, v, dPartVal)
	})
	if err != nil {
		return 0, err
	}
	blk := conversation.Block{Kind: conversation.Opaque, Span: s, Call: noCall}
	str := func(x span) bool { return jsonscan.KindOf(p.B, x) == jsonscan.String }
	if typ.IsZero() || jsonscan.StringIs(p.B, typ, "function") {
		blk.Type = "function"
		if str(id) && jsonscan.KindOf(p.B, fn) == jsonscan.Object && str(name) && str(args) {
			blk.Kind, blk.ID, blk.Name, blk.Input, blk.InputEncoded = conversation.ToolCall, id, name, args, true
		}
	} else if t, err := jsonscan.Unquote(typ.Bytes(p.B)); err == nil && str(typ) {
		blk.Type = t
	}
	p.addBlock(blk)
	return s.End, nil
}
