package chat

import (
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Depths of nesting in a request: root 0, messages array 1, message 2,
// member values 3 (content, tool_calls), part or call 4, their members 5,
// a call's function members 6.
const (
	dMessages = 1
	dMessage  = 2
	dMember   = 3
	dPart     = 4
	dPartVal  = 5
	dFuncVal  = 6
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
		p.marks, p.toolOpen = 0, false
	}
	p.sawMessages = true
	if n := len(p.b)/1000 + 8; cap(p.blocks) < n {
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
// into p, as message would have built them, and returns where the last of
// them ends.
func (p *parser) reuse(prev *conv, n int) int {
	for _, m := range prev.Messages[:n] {
		first := len(p.blocks)
		for _, b := range m.Blocks {
			fp := len(p.parts)
			p.parts = append(p.parts, b.Parts...)
			b.Parts = nil
			p.blocks = append(p.blocks, b)
			p.pranges = append(p.pranges, [2]int{fp, len(p.parts)})
		}
		m.Blocks = nil
		p.msgs = append(p.msgs, m)
		p.ranges = append(p.ranges, [2]int{first, len(p.blocks)})
		p.countMarks(first)
	}
	p.toolOpen = prev.Messages[n-1].Role == conversation.RoleTool
	return prev.Messages[n-1].Span.End
}

// countMarks counts the cache_control markers of the blocks from first on
// and of their parts.
func (p *parser) countMarks(first int) {
	for bi := first; bi < len(p.blocks); bi++ {
		if !p.blocks[bi].CacheControl.IsZero() {
			p.marks++
		}
		r := p.pranges[bi]
		for _, pt := range p.parts[r[0]:r[1]] {
			if !pt.CacheControl.IsZero() {
				p.marks++
			}
		}
	}
}

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
	i := jsonscan.SkipSpace(p.b, v)
	if i >= len(p.b) || p.b[i] != '{' {
		s, err := jsonscan.ValueAt(p.b, v, dMessage)
		if err != nil {
			return 0, err
		}
		return 0, shapeErr(s.Start, "message is not an object")
	}
	first := len(p.blocks)
	firstPart := len(p.parts)
	var roleSp, content, callID span
	var str, sawContent, sawCalls bool
	s, err := jsonscan.ObjectEach(p.b, i, dMessage, func(k span, v int) (int, error) {
		key := p.keyRaw(k)
		switch string(key) {
		case "role":
			r, err := jsonscan.ValueAt(p.b, v, dMember)
			roleSp = r
			return r.End, err
		case "content":
			if sawContent {
				return 0, shapeErr(k.Start, "repeated content")
			}
			sawContent = true
			c, isStr, err := p.content(v)
			content, str = c, isStr
			return c.End, err
		case "tool_calls":
			if sawCalls {
				return 0, shapeErr(k.Start, "repeated tool_calls")
			}
			sawCalls = true
			return p.toolCalls(v)
		case "tool_call_id":
			r, err := jsonscan.ValueAt(p.b, v, dMember)
			callID = r
			return r.End, err
		}
		if t := memberType(key); t != "" {
			r, err := jsonscan.ValueAt(p.b, v, dMember)
			if err != nil {
				return 0, err
			}
			p.addBlock(conversation.Block{Kind: conversation.Opaque, Type: t, Span: span{Start: k.Start, End: r.End}, Call: noCall})
			return r.End, nil
		}
		return jsonscan.Skip(p.b, v, dMember)
	})
	if err != nil {
		return 0, err
	}
	role := roleOf(p.b, roleSp)
	if role != conversation.RoleTool {
		p.msgs = append(p.msgs, conversation.Message{Role: role, Span: s, Content: content, ContentString: str})
		p.ranges = append(p.ranges, [2]int{first, len(p.blocks)})
		p.toolOpen = false
		p.countMarks(first)
		return s.End, nil
	}
	// A tool message: its content's blocks become the parts of one
	// ToolResult block.
	blk := conversation.Block{Kind: conversation.ToolResult, Type: "tool", Span: s, ID: callID, Content: content, Call: noCall}
	kc := jsonscan.KindOf(p.b, content)
	if jsonscan.KindOf(p.b, callID) != jsonscan.String || (kc != jsonscan.String && kc != jsonscan.Array) {
		blk = conversation.Block{Kind: conversation.Opaque, Type: "tool", Span: s, Call: noCall}
	} else {
		for bi := first; bi < len(p.blocks); bi++ {
			b := &p.blocks[bi]
			if !content.Contains(b.Span) {
				continue // a member a tool message has no business carrying
			}
			p.parts = append(p.parts, conversation.Part{Kind: partKind(b.Kind), Span: b.Span, Text: b.Text, CacheControl: b.CacheControl})
		}
	}
	// Message content blocks have no parts, so the parts made above start
	// at firstPart; an Opaque tool message keeps none.
	if blk.Kind == conversation.Opaque {
		p.parts = p.parts[:firstPart]
	}
	p.blocks, p.pranges = p.blocks[:first], p.pranges[:first]
	p.blocks = append(p.blocks, blk)
	p.pranges = append(p.pranges, [2]int{firstPart, len(p.parts)})
	if p.toolOpen {
		last := len(p.msgs) - 1
		p.msgs[last].Span.End = s.End
		p.ranges[last][1] = len(p.blocks)
	} else {
		p.msgs = append(p.msgs, conversation.Message{Role: conversation.RoleTool, Span: s})
		p.ranges = append(p.ranges, [2]int{first, len(p.blocks)})
	}
	p.toolOpen = true
	p.countMarks(first)
	return s.End, nil
}

var noCall = [2]int{-1, -1}

func (p *parser) addBlock(b conversation.Block) {
	p.blocks = append(p.blocks, b)
	p.pranges = append(p.pranges, [2]int{len(p.parts), len(p.parts)})
}

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
	i := jsonscan.SkipSpace(p.b, v)
	if i < len(p.b) && p.b[i] == '[' {
		s, err := jsonscan.ArrayEach(p.b, i, dMember, p.part)
		return s, false, err
	}
	s, err := jsonscan.ValueAt(p.b, v, dMember)
	if err != nil || jsonscan.KindOf(p.b, s) != jsonscan.String {
		return s, false, err
	}
	p.addBlock(conversation.Block{Kind: conversation.Text, Type: "text", Span: s, Text: s, Call: noCall})
	return s, true, nil
}

// part parses one content part.
func (p *parser) part(v int) (int, error) {
	i := jsonscan.SkipSpace(p.b, v)
	if i >= len(p.b) || p.b[i] != '{' {
		s, err := jsonscan.ValueAt(p.b, v, dPart)
		if err == nil {
			p.addBlock(conversation.Block{Kind: conversation.Opaque, Span: s, Call: noCall})
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
			x, err := jsonscan.ValueAt(p.b, v, dPartVal)
			if err == nil && jsonscan.KindOf(p.b, x) != jsonscan.Null {
				cc = span{Start: k.Start, End: x.End}
			}
			return x.End, err
		default:
			return jsonscan.Skip(p.b, v, dPartVal)
		}
		x, err := jsonscan.ValueAt(p.b, v, dPartVal)
		*dst = x
		return x.End, err
	})
	if err != nil {
		return 0, err
	}
	blk := conversation.Block{Kind: conversation.Opaque, Span: s, CacheControl: cc, Call: noCall}
	if jsonscan.KindOf(p.b, typ) == jsonscan.String {
		switch t := jsonscan.Text(p.b, typ); string(t) {
		case "text":
			blk.Type = "text"
			if jsonscan.KindOf(p.b, text) == jsonscan.String {
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
	i := jsonscan.SkipSpace(p.b, v)
	if i >= len(p.b) || p.b[i] != '[' {
		return jsonscan.Skip(p.b, v, dMember)
	}
	s, err := jsonscan.ArrayEach(p.b, i, dMember, p.toolCall)
	return s.End, err
}

func (p *parser) toolCall(v int) (int, error) {
	i := jsonscan.SkipSpace(p.b, v)
	if i >= len(p.b) || p.b[i] != '{' {
		s, err := jsonscan.ValueAt(p.b, v, dPart)
		if err == nil {
			p.addBlock(conversation.Block{Kind: conversation.Opaque, Span: s, Call: noCall})
		}
		return s.End, err
	}
	var id, typ, fn, name, args span
	s, err := jsonscan.ObjectEach(p.b, i, dPart, func(k span, v int) (int, error) {
		switch string(p.keyRaw(k)) {
		case "id":
			x, err := jsonscan.ValueAt(p.b, v, dPartVal)
			id = x
			return x.End, err
		case "type":
			x, err := jsonscan.ValueAt(p.b, v, dPartVal)
			typ = x
			return x.End, err
		case "function":
			j := jsonscan.SkipSpace(p.b, v)
			if j >= len(p.b) || p.b[j] != '{' {
				x, err := jsonscan.ValueAt(p.b, v, dPartVal)
				fn, name, args = x, span{}, span{}
				return x.End, err
			}
			name, args = span{}, span{}
			x, err := jsonscan.ObjectEach(p.b, j, dPartVal, func(k span, v int) (int, error) {
				var dst *span
				switch string(p.keyRaw(k)) {
				case "name":
					dst = &name
				case "arguments":
					dst = &args
				default:
					return jsonscan.Skip(p.b, v, dFuncVal)
				}
				y, err := jsonscan.ValueAt(p.b, v, dFuncVal)
				*dst = y
				return y.End, err
			})
			fn = x
			return x.End, err
		}
		return jsonscan.Skip(p.b, v, dPartVal)
	})
	if err != nil {
		return 0, err
	}
	blk := conversation.Block{Kind: conversation.Opaque, Span: s, Call: noCall}
	str := func(x span) bool { return jsonscan.KindOf(p.b, x) == jsonscan.String }
	if typ.IsZero() || jsonscan.StringIs(p.b, typ, "function") {
		blk.Type = "function"
		if str(id) && jsonscan.KindOf(p.b, fn) == jsonscan.Object && str(name) && str(args) {
			blk.Kind, blk.ID, blk.Name, blk.Input, blk.InputEncoded = conversation.ToolCall, id, name, args, true
		}
	} else if t, err := jsonscan.Unquote(typ.Bytes(p.b)); err == nil && str(typ) {
		blk.Type = t
	}
	p.addBlock(blk)
	return s.End, nil
}
