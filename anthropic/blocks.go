package anthropic

import (
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Depths of nesting in a request: root 0, messages array 1, message 2,
// content 3, block 4, tool result content 5, part 6.
const (
	dMessage = 2
	dContent = 3
	dBlock   = 4
	dParts   = 5
	dPart    = 6
)

func (p *parser) message(v int) (int, error) {
	i := jsonscan.SkipSpace(p.B, v)
	if i >= len(p.B) || p.B[i] != '{' {
		s, err := jsonscan.ValueAt(p.B, v, dMessage)
		if err != nil {
			return 0, err
		}
		return 0, p.ShapeErr(s.Start, "message is not an object")
	}
	var m conversation.Message
	first := len(p.Bld.Blocks)
	var sawContent bool
	s, err := jsonscan.ObjectEach(p.B, i, dMessage, func(k span, v int) (int, error) {
		switch string(p.Key(k)) {
		case "role":
			r, err := jsonscan.ValueAt(p.B, v, dContent)
			if err != nil {
				return 0, err
			}
			m.Role = role(p.B, r)
			return r.End, nil
		case "content":
			// Last one wins: drop blocks of an earlier content key.
			p.Bld.TruncBlocks(first)
			sawContent = true
			c, str, err := p.content(v)
			m.Content, m.ContentString = c, str
			return c.End, err
		}
		return jsonscan.Skip(p.B, v, dContent)
	})
	if err != nil {
		return 0, err
	}
	if !sawContent {
		return 0, p.ShapeErr(s.Start, "message without content")
	}
	m.Span = s
	p.Bld.Message(m, first)
	return s.End, nil
}

func role(b []byte, r span) conversation.Role {
	switch {
	case jsonscan.StringIs(b, r, "user"):
		return conversation.RoleUser
	case jsonscan.StringIs(b, r, "assistant"):
		return conversation.RoleAssistant
	case jsonscan.StringIs(b, r, "system"):
		return conversation.RoleSystem
	}
	return conversation.RoleOther
}

// content parses a message's content: a string (one text block) or an
// array of blocks. Anything else is kept as the message's content with no
// blocks, so nothing in it is ever edited.
func (p *parser) content(v int) (span, bool, error) {
	s, str, err := p.Content(v, dContent, p.block)
	if str {
		p.Bld.Block(conversation.Block{Kind: conversation.Text, Type: "text", Span: s, Text: s}, len(p.Bld.Parts))
	}
	return s, str, err
}

// block parses one content block. Blocks that are not objects, and object
// blocks of types ctxguard does not know, are Opaque.
func (p *parser) block(v int) (int, error) {
	i := jsonscan.SkipSpace(p.B, v)
	if i >= len(p.B) || p.B[i] != '{' {
		s, err := jsonscan.ValueAt(p.B, v, dBlock)
		if err != nil {
			return 0, err
		}
		p.Bld.Block(conversation.Block{Kind: conversation.Opaque, Span: s}, len(p.Bld.Parts))
		return s.End, nil
	}
	var blk conversation.Block
	var typ, isErr, text, thinking, signature, data span
	firstPart := len(p.Bld.Parts)
	s, err := jsonscan.ObjectEach(p.B, i, dBlock, func(k span, v int) (int, error) {
		var dst *span
		switch string(p.Key(k)) {
		case "type":
			dst = &typ
		case "text":
			dst = &text
		case "thinking":
			dst = &thinking
		case "signature":
			dst = &signature
		case "data":
			dst = &data
		case "id", "tool_use_id":
			dst = &blk.ID
		case "name":
			dst = &blk.Name
		case "input":
			dst = &blk.Input
		case "is_error":
			dst = &isErr
		case "cache_control":
			return p.cacheControl(v, dBlock+1, &blk.CacheControl, k)
		case "content":
			p.Bld.Parts = p.Bld.Parts[:firstPart]
			c, err := p.resultContent(v)
			blk.Content = c
			return c.End, err
		default:
			return jsonscan.Skip(p.B, v, dBlock+1)
		}
		x, err := jsonscan.ValueAt(p.B, v, dBlock+1)
		*dst = x
		return x.End, err
	})
	if err != nil {
		return 0, err
	}
	blk.Span = s
	blk.Call = [2]int{-1, -1}
	blk.Kind = kindOf(p.B, typ)
	if blk.Type = typeNames[blk.Kind]; blk.Kind == conversation.Opaque && !typ.IsZero() {
		if t, err := jsonscan.Unquote(typ.Bytes(p.B)); err == nil {
			blk.Type = t
		}
	}
	blk.IsError = string(isErr.Bytes(p.B)) == "true"
	switch blk.Kind {
	case conversation.Text:
		blk.Text = text
	case conversation.Thinking:
		blk.Text, blk.Signature = thinking, signature
	case conversation.RedactedThinking:
		blk.Signature = data
	}
	// Keep only the spans that mean what this package says they mean for
	// the block's kind, and demote blocks whose fields are not the types
	// the API requires, so passes never edit what they misread.
	str := func(x span) bool { return jsonscan.KindOf(p.B, x) == jsonscan.String }
	switch blk.Kind {
	case conversation.Text:
		if !str(blk.Text) {
			blk.Kind = conversation.Opaque
		}
	case conversation.Thinking:
		if !str(blk.Text) || !str(blk.Signature) {
			blk.Kind = conversation.Opaque
		}
	case conversation.RedactedThinking:
		if !str(blk.Signature) {
			blk.Kind = conversation.Opaque
		}
	case conversation.ToolCall:
		if !str(blk.ID) || !str(blk.Name) || blk.Input.IsZero() {
			blk.Kind = conversation.Opaque
		}
	case conversation.ToolResult:
		if !str(blk.ID) {
			blk.Kind = conversation.Opaque
		}
	}
	if blk.Kind == conversation.Opaque {
		blk.Signature = span{} // a signature only where it is one (Block.Signature)
	}
	if blk.Kind != conversation.ToolResult {
		p.Bld.Parts = p.Bld.Parts[:firstPart]
		blk.Content = span{}
	}
	if blk.Kind != conversation.ToolCall && blk.Kind != conversation.ToolResult {
		blk.ID, blk.Name, blk.Input = span{}, span{}, span{}
	}
	p.Bld.Block(blk, firstPart)
	return s.End, nil
}

// typeNames are the wire types of the kinds ctxguard knows, so parsing a
// known block allocates no string.
var typeNames = [...]string{
	conversation.Text: "text", conversation.ToolCall: "tool_use", conversation.ToolResult: "tool_result",
	conversation.Thinking: "thinking", conversation.RedactedThinking: "redacted_thinking",
	conversation.Image: "image", conversation.Document: "document",
}

func kindOf(b []byte, typ span) conversation.Kind {
	if jsonscan.KindOf(b, typ) != jsonscan.String {
		return conversation.Opaque
	}
	switch string(jsonscan.Text(b, typ)) {
	case "text":
		return conversation.Text
	case "tool_use":
		return conversation.ToolCall
	case "tool_result":
		return conversation.ToolResult
	case "thinking":
		return conversation.Thinking
	case "redacted_thinking":
		return conversation.RedactedThinking
	case "image":
		return conversation.Image
	case "document":
		return conversation.Document
	}
	return conversation.Opaque
}

// resultContent parses a tool_result's content: a string or an array of
// blocks (text, image, ...). Parts of other shapes are Opaque.
func (p *parser) resultContent(v int) (span, error) {
	s, str, err := p.Content(v, dParts, p.part)
	if str {
		p.Bld.Parts = append(p.Bld.Parts, conversation.Part{Kind: conversation.Text, Span: s, Text: s})
	}
	return s, err
}

func (p *parser) part(v int) (int, error) {
	i := jsonscan.SkipSpace(p.B, v)
	if i >= len(p.B) || p.B[i] != '{' {
		s, err := jsonscan.ValueAt(p.B, v, dPart)
		if err == nil {
			p.Bld.Parts = append(p.Bld.Parts, conversation.Part{Kind: conversation.Opaque, Span: s})
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
			return p.cacheControl(v, dPart+1, &cc, k)
		default:
			return jsonscan.Skip(p.B, v, dPart+1)
		}
		x, err := jsonscan.ValueAt(p.B, v, dPart+1)
		*dst = x
		return x.End, err
	})
	if err != nil {
		return 0, err
	}
	pt := conversation.Part{Kind: kindOf(p.B, typ), Span: s, CacheControl: cc}
	switch pt.Kind {
	case conversation.Text:
		if jsonscan.KindOf(p.B, text) == jsonscan.String {
			pt.Text = text
		} else {
			pt.Kind = conversation.Opaque
		}
	case conversation.Image, conversation.Document:
	default:
		pt.Kind = conversation.Opaque
	}
	p.Bld.Parts = append(p.Bld.Parts, pt)
	return s.End, nil
}
