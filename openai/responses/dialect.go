package responses

import (
	"bytes"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// dialect is the Responses API's conversation.Dialect. It carries the
// span of the request's prompt_cache_key (SessionID); everything else is
// read from the Conversation.
type dialect struct {
	cacheKey span
}

// AppendText implements conversation.Dialect: an output_text part for
// the assistant, an input_text part for every other role (user,
// developer, system, and RoleTool: a part of a tool output array, or the
// text of a tool-side message ReplaceMessage makes a user message of).
func (*dialect) AppendText(dst []byte, r conversation.Role, quoted, extra []byte) []byte {
	if r == conversation.RoleAssistant {
		dst = append(dst, `{"type":"output_text","text":`...)
	} else {
		dst = append(dst, `{"type":"input_text","text":`...)
	}
	dst = append(dst, quoted...)
	if len(extra) > 0 {
		dst = append(dst, ',')
		dst = append(dst, extra...)
	}
	return append(dst, '}')
}

// KeptBlock implements conversation.Dialect. The text of a string input
// is kept as an input_text part (ReplaceMessage makes the input an
// array). A message item's parts are
// kept as the whole item, which the first of them stands for (the others
// give an empty, non-nil slice that ReplaceMessage skips): rewriting a
// message never touches the parts' item, its id or status. Every other
// block is its own item, kept as it is, except a reasoning item whose
// successor is not kept: the API rejects a reasoning item that is not
// followed by the item it preceded.
func (d *dialect) KeptBlock(c *conversation.Conversation, m *conversation.Message, b *conversation.Block) []byte {
	bi := blockIndex(m, b)
	if bi < 0 {
		return nil
	}
	if m.ContentString {
		return d.AppendText(nil, m.Role, c.Bytes(b.Text), nil)
	}
	if b.Type == "reasoning" {
		if bi+1 >= len(m.Blocks) {
			return nil
		}
		next := &m.Blocks[bi+1]
		switch next.Kind {
		case conversation.ToolCall, conversation.ToolResult, conversation.Thinking, conversation.RedactedThinking:
			return nil
		}
		if d.KeptBlock(c, m, next) == nil {
			return nil
		}
		return c.Bytes(b.Span)
	}
	it := itemOf(c, m, b.Span)
	if it.IsZero() {
		return nil
	}
	if it == b.Span {
		return c.Bytes(it)
	}
	if bi > 0 && it.Contains(m.Blocks[bi-1].Span) {
		return []byte{} // the item is kept by its first part
	}
	return c.Bytes(it)
}

// blockIndex returns b's index in m.Blocks, or -1.
func blockIndex(m *conversation.Message, b *conversation.Block) int {
	for i := range m.Blocks {
		if &m.Blocks[i] == b || m.Blocks[i].Span == b.Span {
			return i
		}
	}
	return -1
}

// itemOf returns the span of the item of message m that holds sp, or a
// zero span.
func itemOf(c *conversation.Conversation, m *conversation.Message, sp span) span {
	b := c.Body
	i := m.Span.Start
	for i < m.Span.End {
		s, err := jsonscan.ValueAt(b, i, dItem)
		if err != nil {
			return span{}
		}
		if s.Contains(sp) {
			return s
		}
		i = jsonscan.SkipSpace(b, s.End)
		if i < len(b) && b[i] == ',' {
			i = jsonscan.SkipSpace(b, i+1)
		}
	}
	return span{}
}

// ReplaceMessage implements conversation.Dialect: the message's run of
// items becomes the given blocks, items as they are, and each run of
// content parts (from AppendText) one message item of the message's role
// (a user message for the tool side, which has no text of its own).
// Empty blocks are skipped.
func (d *dialect) ReplaceMessage(c *conversation.Conversation, mi int, blocks [][]byte) (conversation.Span, []byte) {
	m := &c.Messages[mi]
	var out []byte
	inParts := false
	for _, blk := range blocks {
		if len(blk) == 0 {
			continue
		}
		part := isPart(blk)
		switch {
		case part && inParts:
			out = append(out, ',')
		case part:
			if len(out) > 0 {
				out = append(out, ',')
			}
			out = append(out, `{"type":"message","role":`...)
			out = append(out, roleName(m.Role)...)
			out = append(out, `,"content":[`...)
			inParts = true
		default:
			if inParts {
				out = append(out, "]}"...)
				inParts = false
			}
			if len(out) > 0 {
				out = append(out, ',')
			}
		}
		if blk[0] == '"' {
			out = d.AppendText(out, m.Role, blk, nil)
			continue
		}
		out = append(out, blk...)
	}
	if inParts {
		out = append(out, "]}"...)
	}
	if m.ContentString {
		// A string input is one user message: the input becomes an array.
		return m.Span, append(append([]byte{'['}, out...), ']')
	}
	return m.Span, out
}

// isPart reports whether blk is a content part (input_text, output_text,
// input_image, input_file, refusal), not an item.
func isPart(blk []byte) bool {
	if len(blk) == 0 || blk[0] != '{' {
		return true // a bare string: text
	}
	t, err := jsonscan.Lookup(blk, span{Start: 0, End: len(blk)}, "type")
	if err != nil {
		return false
	}
	switch string(jsonscan.Text(blk, t)) {
	case typeInputText, typeOutputText, "input_image", "input_file", "refusal":
		return true
	}
	return false
}

// roleName is the quoted role of a message item written for role r.
func roleName(r conversation.Role) string {
	switch r {
	case conversation.RoleAssistant:
		return `"assistant"`
	case conversation.RoleDeveloper:
		return `"developer"`
	case conversation.RoleSystem:
		return `"system"`
	}
	return `"user"`
}

// CacheMarker implements conversation.Dialect: none, the API caches
// prefixes by itself.
func (*dialect) CacheMarker(*conversation.Conversation) []byte { return nil }

// Settings implements conversation.Dialect: the API has none of the
// settings a rewrite may ask for.
func (*dialect) Settings(*conversation.Conversation, conversation.Settings) ([]conversation.SettingEdit, [][2]string) {
	return nil, nil
}

// SessionID implements conversation.Dialect: the request's
// prompt_cache_key (Codex sends its thread id there).
func (d *dialect) SessionID(c *conversation.Conversation) string {
	if jsonscan.KindOf(c.Body, d.cacheKey) != jsonscan.String || d.cacheKey.Len() > 512 {
		return ""
	}
	return c.String(d.cacheKey)
}

// Image implements conversation.Dialect for an input_image part:
// {"type":"input_image","image_url":"data:image/png;base64,..."} (inline)
// or an image_url naming a URL, or a file_id.
func (*dialect) Image(c *conversation.Conversation, sp conversation.Span) (conversation.ImageInfo, bool) {
	body := c.Body
	var img conversation.ImageInfo
	if jsonscan.KindOf(body, sp) != jsonscan.Object {
		return img, false
	}
	var typ, url, file span
	it := jsonscan.Members(body, sp)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		switch {
		case jsonscan.KeyIs(body, k, "type"):
			typ = v
		case jsonscan.KeyIs(body, k, "image_url"):
			url = v
		case jsonscan.KeyIs(body, k, "file_id"):
			file = v
		}
	}
	if it.Err() != nil || !jsonscan.StringIs(body, typ, "input_image") {
		return img, false
	}
	if jsonscan.KindOf(body, url) != jsonscan.String {
		if jsonscan.KindOf(body, file) == jsonscan.String {
			if id := c.String(file); len(id) <= 512 {
				img.URL = "file " + id
			}
			return img, true
		}
		return img, false
	}
	raw := jsonscan.Text(body, url)
	if raw == nil {
		return img, false
	}
	if bytes.HasPrefix(raw, []byte("data:")) {
		comma := bytes.IndexByte(raw[:min(len(raw), 256)], ',')
		if comma < 0 {
			return img, false
		}
		media, enc, _ := strings.Cut(string(raw[len("data:"):comma]), ";")
		if enc != "base64" {
			return img, false
		}
		data := raw[comma+1:]
		n := len(data)
		for n > 0 && data[n-1] == '=' {
			n--
		}
		img.Inline, img.Media, img.Base64 = true, media, n
		return img, true
	}
	if len(raw) <= 512 {
		img.URL = string(raw)
	}
	return img, true
}
