package conversation

import "github.com/ctxguard/ctxguard/internal/jsonscan"

// ResultText returns the text of tool result b: the decoded text of a
// string result; for an array, each text part's decoded text and the raw
// JSON of any other part, one per line. It allocates.
func (c *Conversation) ResultText(b *Block) ([]byte, error) {
	if jsonscan.KindOf(c.Body, b.Content) == jsonscan.String {
		return jsonscan.AppendUnquote(nil, c.Bytes(b.Content))
	}
	var out []byte
	for i, pt := range b.Parts {
		if i > 0 {
			out = append(out, '\n')
		}
		if pt.Kind == Text {
			var err error
			if out, err = jsonscan.AppendUnquote(out, c.Bytes(pt.Text)); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, c.Bytes(pt.Span)...)
	}
	return out, nil
}

// Input returns the JSON of tool call b's input and the input's span in
// it: the body itself, or for an input sent encoded in a string (OpenAI's
// "arguments"), the decoded string (with a zero span when it does not
// decode to JSON).
func (c *Conversation) Input(b *Block) ([]byte, Span) {
	if !b.InputEncoded {
		return c.Body, b.Input
	}
	// The decoded text is about as long as its literal.
	inner, err := jsonscan.AppendUnquote(make([]byte, 0, b.Input.Len()), c.Bytes(b.Input))
	if err != nil {
		return nil, Span{}
	}
	root, err := jsonscan.Root(inner)
	if err != nil {
		return nil, Span{}
	}
	return inner, root
}

// AppendTranscript appends messages [a, b] as text a reader (the agent,
// with its file tools) can search: each message under a role line, text
// as it was, each tool call with its input and each tool result with its
// decoded text.
func (c *Conversation) AppendTranscript(out []byte, a, b int) ([]byte, error) {
	for i := a; i <= b; i++ {
		m := &c.Messages[i]
		out = append(out, "=== "+m.Role.String()+" ===\n"...)
		for j := range m.Blocks {
			blk := &m.Blocks[j]
			var err error
			switch blk.Kind {
			case Text, Thinking:
				out, err = jsonscan.AppendUnquote(out, c.Bytes(blk.Text))
			case ToolCall:
				out = append(out, "[tool call "+c.ToolName(blk)+" "+c.String(blk.ID)+"] "...)
				if body, in := c.Input(blk); in.Len() > 0 {
					out = append(out, in.Bytes(body)...)
				} else {
					out = append(out, c.Bytes(blk.Input)...)
				}
			case ToolResult:
				out = append(out, "[tool result "+c.String(blk.ID)+"]\n"...)
				var text []byte
				if text, err = c.ResultText(blk); err == nil {
					out = append(out, text...)
				}
			default:
				out = append(out, c.Bytes(blk.Span)...)
			}
			if err != nil {
				return nil, err
			}
			out = append(out, '\n')
		}
	}
	return out, nil
}

// CompactionNote starts the text of the message that holds a compaction's
// summary (package pass/compact writes it; validators recognize it).
const CompactionNote = "[ctxguard compacted the first "
