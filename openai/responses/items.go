package responses

import (
	"bytes"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Depths of nesting in a request: root 0, input array 1, item 2, an
// item's content or output array 3, part 4.
const (
	dInput  = 1
	dItem   = 2
	dMember = 3
	dPart   = 4
)

// itemKind is what the parser makes of an item's type.
type itemKind uint8

const (
	itemOther        itemKind = iota // not known: opaque, on the side of its role
	itemMessage                      // a message: its parts are blocks
	itemReasoning                    // opaque, assistant side
	itemFunctionCall                 // ToolCall
	itemCustomCall                   // ToolCall, free-form input
	itemShellCall                    // ToolCall without input
	itemCallOther                    // another model-made item: opaque, assistant side
	itemFunctionOut                  // ToolResult
	itemCustomOut                    // ToolResult
	itemShellOut                     // ToolResult
	itemOutputOther                  // another output: opaque, tool side
)

// itemTypes are the wire types of the kinds with one name, so parsing a
// known item allocates no string.
var itemTypes = [itemOutputOther + 1]string{
	itemMessage: "message", itemReasoning: "reasoning",
	itemFunctionCall: "function_call", itemCustomCall: "custom_tool_call", itemShellCall: "local_shell_call",
	itemFunctionOut: "function_call_output", itemCustomOut: "custom_tool_call_output", itemShellOut: "local_shell_call_output",
}

func classify(t []byte) itemKind {
	switch string(t) {
	case "message":
		return itemMessage
	case "reasoning":
		return itemReasoning
	case "function_call":
		return itemFunctionCall
	case "custom_tool_call":
		return itemCustomCall
	case "local_shell_call":
		return itemShellCall
	case "function_call_output":
		return itemFunctionOut
	case "custom_tool_call_output":
		return itemCustomOut
	case "local_shell_call_output":
		return itemShellOut
	case "mcp_list_tools", "mcp_approval_request":
		return itemCallOther
	}
	switch {
	case bytes.HasSuffix(t, []byte("_call")):
		return itemCallOther
	case bytes.HasSuffix(t, []byte("_output")):
		return itemOutputOther
	}
	return itemOther
}

// side returns the role of the message an item of kind k belongs to.
func (p *parser) side(k itemKind, role span) conversation.Role {
	switch k {
	case itemReasoning, itemFunctionCall, itemCustomCall, itemShellCall, itemCallOther:
		return conversation.RoleAssistant
	case itemFunctionOut, itemCustomOut, itemShellOut, itemOutputOther:
		return conversation.RoleTool
	}
	return roleOf(p.B, role)
}

func roleOf(b []byte, r span) conversation.Role {
	switch string(jsonscan.Text(b, r)) {
	case "user":
		return conversation.RoleUser
	case "assistant":
		return conversation.RoleAssistant
	case "developer":
		return conversation.RoleDeveloper
	case "system":
		return conversation.RoleSystem
	}
	return conversation.RoleOther
}

// Part types with one name, so a known part allocates no string.
const (
	typeInputText  = "input_text"
	typeOutputText = "output_text"
)

// partKind returns the kind and wire type of a content or output part.
func partKind(b []byte, typ span) (conversation.Kind, string) {
	t := jsonscan.Text(b, typ)
	switch string(t) {
	case typeInputText:
		return conversation.Text, typeInputText
	case typeOutputText:
		return conversation.Text, typeOutputText
	case "input_image":
		return conversation.Image, "input_image"
	case "input_file":
		return conversation.Document, "input_file"
	case "refusal":
		return conversation.Opaque, "refusal"
	case "summary_text":
		return conversation.Opaque, "summary_text"
	case "reasoning_text":
		return conversation.Opaque, "reasoning_text"
	}
	return conversation.Opaque, string(t)
}

func (p *parser) input(v int) (int, error) {
	b := p.B
	if i := jsonscan.SkipSpace(b, v); i < len(b) && b[i] == '"' {
		s, err := jsonscan.ValueAt(b, v, dInput)
		if err != nil {
			return 0, err
		}
		p.StartList()
		p.C.List = s
		p.Bld.Block(conversation.Block{Kind: conversation.Text, Type: typeInputText, Span: s, Text: s, Call: noCall}, 0)
		p.Bld.Message(conversation.Message{Role: conversation.RoleUser, Span: s, Content: s, ContentString: true}, 0)
		return s.End, nil
	}
	end, _, err := p.List(v, "input is neither a string nor an array", p.item)
	return end, err
}

var noCall = [2]int{-1, -1}

// fields are the members of an item the parser reads.
type fields struct {
	typ, role, callID, id, name, args, input span
	content, output                          span
	encrypted                                span // a reasoning item's encrypted_content
}

// item parses one input item into its blocks and adds it to the message
// of its side: the last one when the side is the same, else a new one.
func (p *parser) item(v int) (int, error) {
	b := p.B
	i := jsonscan.SkipSpace(b, v)
	if i >= len(b) || b[i] != '{' {
		s, err := jsonscan.ValueAt(b, v, dItem)
		if err != nil {
			return 0, err
		}
		return 0, p.ShapeErr(s.Start, "input item is not an object")
	}
	firstBlock, firstPart := len(p.Bld.Blocks), len(p.Bld.Parts)
	var f fields
	s, err := jsonscan.ObjectEach(b, i, dItem, func(k span, v int) (int, error) {
		var dst *span
		switch string(p.Key(k)) {
		case "type":
			dst = &f.typ
		case "role":
			dst = &f.role
		case "call_id":
			dst = &f.callID
		case "id":
			dst = &f.id
		case "name":
			dst = &f.name
		case "arguments":
			dst = &f.args
		case "input":
			dst = &f.input
		case "encrypted_content":
			dst = &f.encrypted
		case "content":
			// Last one wins: drop the blocks of an earlier content key.
			p.Bld.TruncBlocks(firstBlock)
			c, err := p.content(v)
			f.content = c
			return c.End, err
		case "output":
			p.Bld.Parts = p.Bld.Parts[:firstPart]
			o, err := p.output(v)
			f.output = o
			return o.End, err
		default:
			return jsonscan.Skip(b, v, dItem+1)
		}
		x, err := jsonscan.ValueAt(b, v, dItem+1)
		*dst = x
		return x.End, err
	})
	if err != nil {
		return 0, err
	}
	kind := itemOther
	if !f.typ.IsZero() {
		kind = classify(jsonscan.Text(b, f.typ))
	} else if !f.role.IsZero() {
		kind = itemMessage // the short form: {"role": ..., "content": ...}
	}
	role := p.side(kind, f.role)
	str := func(x span) bool { return jsonscan.KindOf(b, x) == jsonscan.String }
	switch kind {
	case itemMessage:
		p.Bld.DropParts(firstBlock, firstPart) // an "output" member's
		if len(p.Bld.Blocks) == firstBlock+1 && p.Bld.Blocks[firstBlock].Span == f.content {
			// String content: one text part of the role's type.
			if role == conversation.RoleAssistant {
				p.Bld.Blocks[firstBlock].Type = typeOutputText
			}
		}
	case itemFunctionOut, itemCustomOut, itemShellOut:
		p.Bld.TruncBlocks(firstBlock)
		blk := conversation.Block{Kind: conversation.ToolResult, Type: itemTypes[kind], Span: s, ID: f.callID, Content: f.output, Call: [2]int{-1, -1}}
		if kind == itemShellOut && blk.ID.IsZero() {
			blk.ID = f.id
		}
		if k := jsonscan.KindOf(b, f.output); !str(blk.ID) || (k != jsonscan.String && k != jsonscan.Array) {
			blk = conversation.Block{Kind: conversation.Opaque, Type: blk.Type, Span: s, Call: [2]int{-1, -1}}
			p.Bld.Parts = p.Bld.Parts[:firstPart]
		}
		p.Bld.Block(blk, firstPart)
	default:
		p.Bld.TruncBlocks(firstBlock)
		p.Bld.Parts = p.Bld.Parts[:firstPart]
		blk := conversation.Block{Kind: conversation.Opaque, Type: itemTypes[kind], Span: s, Call: [2]int{-1, -1}}
		if blk.Type == "" && !f.typ.IsZero() {
			blk.Type = string(jsonscan.Text(b, f.typ))
		}
		switch {
		case kind == itemFunctionCall && str(f.callID) && str(f.name) && str(f.args):
			blk.Kind, blk.ID, blk.Name, blk.Input, blk.InputEncoded = conversation.ToolCall, f.callID, f.name, f.args, true
		case kind == itemCustomCall && str(f.callID) && str(f.name) && str(f.input):
			blk.Kind, blk.ID, blk.Name, blk.Input = conversation.ToolCall, f.callID, f.name, f.input
		case kind == itemShellCall && str(f.callID):
			blk.Kind, blk.ID = conversation.ToolCall, f.callID
		case kind == itemReasoning && str(f.encrypted):
			blk.Signature = f.encrypted
		}
		p.Bld.Block(blk, firstPart)
	}
	if n := len(p.Bld.Msgs); n > 0 && p.Bld.Msgs[n-1].Role == role {
		p.Bld.Msgs[n-1].Content.End = s.End
		p.Bld.Extend(s.End)
	} else {
		p.Bld.Message(conversation.Message{Role: role, Span: s, Content: s}, firstBlock)
	}
	return s.End, nil
}

// content parses a message item's content: a string (one text block) or
// an array of parts, one block each. Anything else gives no block.
func (p *parser) content(v int) (span, error) {
	s, str, err := p.Content(v, dMember, func(v int) (int, error) {
		s, kind, typ, text, err := p.part(v)
		if err == nil {
			p.Bld.Block(conversation.Block{Kind: kind, Type: typ, Span: s, Text: text, Call: noCall}, len(p.Bld.Parts))
		}
		return s.End, err
	})
	if str {
		p.Bld.Block(conversation.Block{Kind: conversation.Text, Type: typeInputText, Span: s, Text: s, Call: noCall}, len(p.Bld.Parts))
	}
	return s, err
}

// output parses a tool output's "output": a string (one text part) or an
// array of parts.
func (p *parser) output(v int) (span, error) {
	s, str, err := p.Content(v, dMember, func(v int) (int, error) {
		s, kind, _, text, err := p.part(v)
		if err == nil {
			p.Bld.Parts = append(p.Bld.Parts, conversation.Part{Kind: kind, Span: s, Text: text})
		}
		return s.End, err
	})
	if str {
		p.Bld.Parts = append(p.Bld.Parts, conversation.Part{Kind: conversation.Text, Span: s, Text: s})
	}
	return s, err
}

// part parses one element of a content or output array: its span, kind,
// wire type and, for a Text part, its text. Elements that are not objects,
// and text parts without a string text, are Opaque.
func (p *parser) part(v int) (s span, kind conversation.Kind, typ string, text span, err error) {
	b := p.B
	i := jsonscan.SkipSpace(b, v)
	if i >= len(b) || b[i] != '{' {
		s, err = jsonscan.ValueAt(b, v, dPart)
		return s, conversation.Opaque, "", span{}, err
	}
	var t span
	s, err = jsonscan.ObjectEach(b, i, dPart, func(k span, v int) (int, error) {
		var dst *span
		switch string(p.Key(k)) {
		case "type":
			dst = &t
		case "text":
			dst = &text
		default:
			return jsonscan.Skip(b, v, dPart+1)
		}
		x, err := jsonscan.ValueAt(b, v, dPart+1)
		*dst = x
		return x.End, err
	})
	if err != nil {
		return s, 0, "", span{}, err
	}
	kind, typ = partKind(b, t)
	if kind != conversation.Text {
		return s, kind, typ, span{}, nil
	}
	if jsonscan.KindOf(b, text) != jsonscan.String {
		return s, conversation.Opaque, typ, span{}, nil
	}
	return s, kind, typ, text, nil
}
