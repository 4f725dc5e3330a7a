package anthropic

import (
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Depths of nesting in a request: root 0, messages array 1, message 2,
// content 3, block 4, tool result content 5, part 6.
const (
	dMessages = 1
	dMessage  = 2
	dContent  = 3
	dBlock    = 4
	dParts    = 5
	dPart     = 6
)

func (p *parser) messages(v int) (int, error) {
	i := jsonscan.SkipSpace(p.b, v)
	if i >= len(p.b) || p.b[i] != '[' {
		s, err := jsonscan.ValueAt(p.b, v, dMessages)
		if err != nil {
			return 0, err
		}
		return 0, shapeErr(s.Start, "messages is not an array")
	}
	if p.sawMessages {
		// A repeated key: the last one wins, as in encoding/json.
		p.bld.Clear()
	}
	p.sawMessages = true
	if pv := p.prev; pv != nil && pv.List.Start == i && len(p.bld.Msgs) == 0 {
		p.prev = nil // only the first messages key can be reused
		s, err := jsonscan.ArrayEachAfter(p.b, i, p.reuse(pv, p.stable), p.message)
		p.c.List = s
		return s.End, err
	}
	s, err := jsonscan.ArrayEach(p.b, i, dMessages, p.message)
	p.c.List = s
	return s.End, err
}

// reuse takes the first n messages of an earlier parse of the same bytes
// over and returns where the last of them ends.
func (p *parser) reuse(prev *conv, n int) int {
	end, marks := p.bld.Reuse(prev, n)
	p.marks[2] += marks
	return end
}

func (p *parser) message(v int) (int, error) {
	i := jsonscan.SkipSpace(p.b, v)
	if i >= len(p.b) || p.b[i] != '{' {
		s, err := jsonscan.ValueAt(p.b, v, dMessage)
		if err != nil {
			return 0, err
		}
		return 0, shapeErr(s.Start, "message is not an object")
	}
	var m conversation.Message
	first := len(p.bld.Blocks)
	var sawContent bool
	s, err := jsonscan.ObjectEach(p.b, i, dMessage, func(k span, v int) (int, error) {
		switch string(p.keyRaw(k)) {
		case "role":
			r, err := jsonscan.ValueAt(p.b, v, dContent)
			if err != nil {
				return 0, err
			}
			m.Role = role(p.b, r)
			return r.End, nil
		case "content":
			// Last one wins: drop blocks of an earlier content key.
			p.bld.TruncBlocks(first)
			sawContent = true
			c, str, err := p.content(v)
			m.Content, m.ContentString = c, str
			return c.End, err
		}
		return jsonscan.Skip(p.b, v, dContent)
	})
	if err != nil {
		return 0, err
	}
	if !sawContent {
		return 0, shapeErr(s.Start, "message without content")
	}
	m.Span = s
	p.bld.Message(m, first)
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
	i := jsonscan.SkipSpace(p.b, v)
	if i < len(p.b) && p.b[i] == '[' {
		s, err := jsonscan.ArrayEach(p.b, i, dContent, p.block)
		return s, false, err
	}
	s, err := jsonscan.ValueAt(p.b, v, dContent)
	if err != nil || jsonscan.KindOf(p.b, s) != jsonscan.String {
		return s, false, err
	}
	p.bld.Block(conversation.Block{Kind: conversation.Text, Type: "text", Span: s, Text: s}, len(p.bld.Parts))
	return s, true, nil
}

// block parses one content block. Blocks that are not objects, and object
// blocks of types ctxguard does not know, are Opaque.
func (p *parser) block(v int) (int, error) {
	i := jsonscan.SkipSpace(p.b, v)
	if i >= len(p.b) || p.b[i] != '{' {
		s, err := jsonscan.ValueAt(p.b, v, dBlock)
		if err != nil {
			return 0, err
		}
		p.bld.Block(conversation.Block{Kind: conversation.Opaque, Span: s}, len(p.bld.Parts))
		return s.End, nil
	}
	var blk conversation.Block
	var typ, isErr, text, thinking, signature, data span
	firstPart := len(p.bld.Parts)
	s, err := jsonscan.ObjectEach(p.b, i, dBlock, func(k span, v int) (int, error) {
		var dst *span
		switch string(p.keyRaw(k)) {
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
			p.bld.Parts = p.bld.Parts[:firstPart]
			c, err := p.resultContent(v)
			blk.Content = c
			return c.End, err
		default:
			return jsonscan.Skip(p.b, v, dBlock+1)
		}
		x, err := jsonscan.ValueAt(p.b, v, dBlock+1)
		*dst = x
		return x.End, err
	})
	if err != nil {
		return 0, err
	}
	blk.Span = s
	blk.Call = [2]int{-1, -1}
	blk.Kind = kindOf(p.b, typ)
	if blk.Type = typeNames[blk.Kind]; blk.Kind == conversation.Opaque && !typ.IsZero() {
		if t, err := jsonscan.Unquote(typ.Bytes(p.b)); err == nil {
			blk.Type = t
		}
	}
	blk.IsError = string(isErr.Bytes(p.b)) == "true"
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
	str := func(x span) bool { return jsonscan.KindOf(p.b, x) == jsonscan.String }
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
		p.bld.Parts = p.bld.Parts[:firstPart]
		blk.Content = span{}
	}
	if blk.Kind != conversation.ToolCall && blk.Kind != conversation.ToolResult {
		blk.ID, blk.Name, blk.Input = span{}, span{}, span{}
	}
	p.bld.Block(blk, firstPart)
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
	i := jsonscan.SkipSpace(p.b, v)
	if i < len(p.b) && p.b[i] == '[' {
		return jsonscan.ArrayEach(p.b, i, dParts, p.part)
	}
	s, err := jsonscan.ValueAt(p.b, v, dParts)
	if err == nil && jsonscan.KindOf(p.b, s) == jsonscan.String {
		p.bld.Parts = append(p.bld.Parts, conversation.Part{Kind: conversation.Text, Span: s, Text: s})
	}
	return s, err
}

func (p *parser) part(v int) (int, error) {
	i := jsonscan.SkipSpace(p.b, v)
	if i >= len(p.b) || p.b[i] != '{' {
		s, err := jsonscan.ValueAt(p.b, v, dPart)
		if err == nil {
			p.bld.Parts = append(p.bld.Parts, conversation.Part{Kind: conversation.Opaque, Span: s})
		}
		return s.End, err
	}
	var typ, text, cc span
	s, err := jsonscan.ObjectEach(p.b, i, dPart, func(k span, v int) (int, error) {
		var dst *span
		switch string(p.keyRaw(k)) {
		case "type":
			dst = &typ
		case "text":
			dst = &text
		case "cache_control":
			return p.cacheControl(v, dPart+1, &cc, k)
		default:
			return jsonscan.Skip(p.b, v, dPart+1)
		}
		x, err := jsonscan.ValueAt(p.b, v, dPart+1)
		*dst = x
		return x.End, err
	})
	if err != nil {
		return 0, err
	}
	pt := conversation.Part{Kind: kindOf(p.b, typ), Span: s, CacheControl: cc}
	switch pt.Kind {
	case conversation.Text:
		if jsonscan.KindOf(p.b, text) == jsonscan.String {
			pt.Text = text
		} else {
			pt.Kind = conversation.Opaque
		}
	case conversation.Image, conversation.Document:
	default:
		pt.Kind = conversation.Opaque
	}
	p.bld.Parts = append(p.bld.Parts, pt)
	return s.End, nil
}

// pair links each tool result to the call it answers, which the API
// requires to be in the message just before, and copies the call's name
// onto the result.
func (p *parser) pair() {
	msgs := p.c.Messages
	for mi := 1; mi < len(msgs); mi++ {
		m := &msgs[mi]
		prevAsst := mi - 1
		if m.Role != conversation.RoleUser || msgs[prevAsst].Role != conversation.RoleAssistant {
			continue
		}
		for bi := range m.Blocks {
			r := &m.Blocks[bi]
			if r.Kind != conversation.ToolResult {
				continue
			}
			for ci, c := range msgs[prevAsst].Blocks {
				if c.Kind == conversation.ToolCall && jsonscan.SameString(p.b, c.ID, r.ID) {
					r.Call = [2]int{prevAsst, ci}
					r.Name = c.Name
					break
				}
			}
		}
	}
}
