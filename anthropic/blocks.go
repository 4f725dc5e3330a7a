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
		p.msgs, p.ranges, p.blocks, p.parts, p.pranges = p.msgs[:0], p.ranges[:0], p.blocks[:0], p.parts[:0], p.pranges[:0]
	}
	p.sawMessages = true
	if n := len(p.b)/1000 + 8; cap(p.blocks) < n {
		// About one block per 700 bytes in Claude Code sessions: size the
		// arrays once instead of growing them a dozen times.
		p.blocks = make([]conversation.Block, 0, n)
		p.pranges = make([][2]int, 0, n)
		p.parts = make([]conversation.Part, 0, n/2)
		p.msgs = make([]conversation.Message, 0, n/2)
		p.ranges = make([][2]int, 0, n/2)
	}
	if pv := p.prev; pv != nil && pv.List.Start == i && len(p.msgs) == 0 {
		p.prev = nil // only the first messages key can be reused
		s, err := jsonscan.ArrayEachAfter(p.b, i, p.reuse(pv, p.stable), p.message)
		p.c.List = s
		return s.End, err
	}
	s, err := jsonscan.ArrayEach(p.b, i, dMessages, p.message)
	p.c.List = s
	return s.End, err
}

// reuse copies the first n messages of an earlier parse of the same bytes
// into p, as message would have built them, and returns where the last
// of them ends.
func (p *parser) reuse(prev *conv, n int) int {
	for _, m := range prev.Messages[:n] {
		first := len(p.blocks)
		for _, b := range m.Blocks {
			if !b.CacheControl.IsZero() {
				p.marks[2]++
			}
			fp := len(p.parts)
			for _, pt := range b.Parts {
				if !pt.CacheControl.IsZero() {
					p.marks[2]++
				}
				p.parts = append(p.parts, pt)
			}
			b.Parts = nil
			p.blocks = append(p.blocks, b)
			p.pranges = append(p.pranges, [2]int{fp, len(p.parts)})
		}
		m.Blocks = nil
		p.msgs = append(p.msgs, m)
		p.ranges = append(p.ranges, [2]int{first, len(p.blocks)})
	}
	return prev.Messages[n-1].Span.End
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
	first := len(p.blocks)
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
			p.blocks, p.pranges = p.blocks[:first], p.pranges[:first]
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
	p.msgs = append(p.msgs, m)
	p.ranges = append(p.ranges, [2]int{first, len(p.blocks)})
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
	p.blocks = append(p.blocks, conversation.Block{Kind: conversation.Text, Type: "text", Span: s, Text: s})
	p.pranges = append(p.pranges, [2]int{len(p.parts), len(p.parts)})
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
		p.blocks = append(p.blocks, conversation.Block{Kind: conversation.Opaque, Span: s})
		p.pranges = append(p.pranges, [2]int{len(p.parts), len(p.parts)})
		return s.End, nil
	}
	var blk conversation.Block
	var typ, isErr, text, thinking, signature, data span
	firstPart := len(p.parts)
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
			p.parts = p.parts[:firstPart]
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
	if blk.Kind != conversation.ToolResult {
		p.parts = p.parts[:firstPart]
		blk.Content = span{}
	}
	if blk.Kind != conversation.ToolCall && blk.Kind != conversation.ToolResult {
		blk.ID, blk.Name, blk.Input = span{}, span{}, span{}
	}
	p.blocks = append(p.blocks, blk)
	p.pranges = append(p.pranges, [2]int{firstPart, len(p.parts)})
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
		p.parts = append(p.parts, conversation.Part{Kind: conversation.Text, Span: s, Text: s})
	}
	return s, err
}

func (p *parser) part(v int) (int, error) {
	i := jsonscan.SkipSpace(p.b, v)
	if i >= len(p.b) || p.b[i] != '{' {
		s, err := jsonscan.ValueAt(p.b, v, dPart)
		if err == nil {
			p.parts = append(p.parts, conversation.Part{Kind: conversation.Opaque, Span: s})
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
	p.parts = append(p.parts, pt)
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
