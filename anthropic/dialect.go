package anthropic

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// BindingBeta is the anthropic-beta value that enables
// thinking.block_binding (see Dialect.Settings).
const BindingBeta = "thinking-binding-controls-2026-08-01"

// dialect is the Messages API's conversation.Dialect.
type dialect struct{}

// AppendText implements conversation.Dialect: a text block.
func (dialect) AppendText(dst []byte, _ conversation.Role, quoted, extra []byte) []byte {
	dst = append(dst, `{"type":"text","text":`...)
	dst = append(dst, quoted...)
	if len(extra) > 0 {
		dst = append(dst, ',')
		dst = append(dst, extra...)
	}
	return append(dst, '}')
}

// KeptBlock implements conversation.Dialect: a block as it is, except a
// string content (which becomes a text block), a text block carrying a
// cache_control marker (which loses it: a rewritten message must not move
// the client's breakpoints) and text of white space alone, which goes:
// the API refuses a message whose text is all white space (Claude Code
// sends "\n\n" before thinking and tool calls, and nothing else may be
// left to keep it company).
func (d dialect) KeptBlock(c *conversation.Conversation, m *conversation.Message, b *conversation.Block) []byte {
	if b.Kind == conversation.Text {
		switch {
		case jsonscan.Blank(c.Bytes(b.Text)):
			return nil
		case m.ContentString || !b.CacheControl.IsZero():
			return d.AppendText(nil, m.Role, c.Bytes(b.Text), nil)
		}
	}
	return c.Bytes(b.Span)
}

// ReplaceMessage implements conversation.Dialect: the message's content
// becomes an array of the blocks.
func (dialect) ReplaceMessage(c *conversation.Conversation, mi int, blocks [][]byte) (conversation.Span, []byte) {
	out := []byte{'['}
	for i, b := range blocks {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	return c.Messages[mi].Content, append(out, ']')
}

// CacheMarker implements conversation.Dialect: a copy of the marker the
// client put on the earliest marked message (so TTLs stay ordered as the
// client ordered them), else an ephemeral one.
func (dialect) CacheMarker(c *conversation.Conversation) []byte {
	mark := []byte(`"cache_control":{"type":"ephemeral"}`)
	for mi := len(c.Messages) - 1; mi >= 0; mi-- {
		for _, b := range c.Messages[mi].Blocks {
			if !b.CacheControl.IsZero() {
				mark = c.Bytes(b.CacheControl)
			}
		}
	}
	return mark
}

// Settings implements conversation.Dialect. DropInvalidThinking sets
// thinking.block_binding.prefix_mismatch_behavior to "drop_block" and
// adds BindingBeta to anthropic-beta, for requests with thinking enabled
// that do not say already what to do.
func (dialect) Settings(c *conversation.Conversation, s conversation.Settings) ([]conversation.SettingEdit, [][2]string) {
	if s&conversation.DropInvalidThinking == 0 {
		return nil, nil
	}
	v := c.Thinking.Value
	if jsonscan.KindOf(c.Body, v) != jsonscan.Object {
		return nil, nil
	}
	typ, err := jsonscan.Lookup(c.Body, v, "type")
	if err != nil || jsonscan.StringIs(c.Body, typ, "disabled") {
		return nil, nil
	}
	if _, err := jsonscan.Lookup(c.Body, v, "block_binding"); err == nil {
		return nil, nil
	}
	return []conversation.SettingEdit{{
			Span: conversation.Span{Start: v.End - 1, End: v.End - 1},
			Repl: []byte(`,"block_binding":{"prefix_mismatch_behavior":"drop_block"}`),
		}},
		[][2]string{{"Anthropic-Beta", BindingBeta}}
}

// SessionID implements conversation.Dialect: the session_id inside
// metadata.user_id, which Claude Code sends as a JSON string holding a
// JSON object, and older versions as "user_<hash>_account_<id>_session_<uuid>".
func (dialect) SessionID(c *conversation.Conversation) string {
	if c.Metadata.Value.IsZero() {
		return ""
	}
	v, err := jsonscan.Lookup(c.Body, c.Metadata.Value, "user_id")
	if err != nil {
		return ""
	}
	uid := c.String(v)
	if uid == "" {
		return ""
	}
	if strings.HasPrefix(uid, "{") {
		var m struct {
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal([]byte(uid), &m) == nil {
			return m.SessionID
		}
		return ""
	}
	if i := strings.LastIndex(uid, "_session_"); i >= 0 {
		return uid[i+len("_session_"):]
	}
	return ""
}

// Image implements conversation.Dialect for an image block:
// {"type":"image","source":{"type":"base64","media_type":...,"data":...}}
// or a source of type "url".
func (dialect) Image(c *conversation.Conversation, sp conversation.Span) (conversation.ImageInfo, bool) {
	body := c.Body
	var img conversation.ImageInfo
	var source conversation.Span
	it := jsonscan.Members(body, sp)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		switch {
		case jsonscan.KeyIs(body, k, "source"):
			source = v
		case jsonscan.KeyIs(body, k, "cache_control"):
			img.Keep = conversation.Span{Start: k.Start, End: v.End}
		}
	}
	if it.Err() != nil || jsonscan.KindOf(body, source) != jsonscan.Object {
		return img, false
	}
	var kind string
	hasData := false
	it = jsonscan.Members(body, source)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		switch {
		case jsonscan.KeyIs(body, k, "type"):
			kind = shortString(body, v)
		case jsonscan.KeyIs(body, k, "media_type"):
			img.Media = shortString(body, v)
		case jsonscan.KeyIs(body, k, "data"):
			if jsonscan.KindOf(body, v) == jsonscan.String {
				img.Base64, hasData = Base64Chars(v.Bytes(body)), true
			}
		case jsonscan.KeyIs(body, k, "url"):
			img.URL = shortString(body, v)
		}
	}
	if it.Err() != nil {
		return img, false
	}
	img.Inline = kind == "base64" && hasData
	if kind != "url" {
		img.URL = ""
	}
	return img, true
}

// shortString decodes the JSON string at v, or returns "" for anything
// else or a string over 512 bytes.
func shortString(body []byte, v conversation.Span) string {
	if jsonscan.KindOf(body, v) != jsonscan.String || v.Len() > 512 {
		return ""
	}
	s, _ := jsonscan.Unquote(v.Bytes(body))
	return s
}

// Base64Chars counts the base64 characters of a JSON string literal
// holding base64 data, padding excluded.
func Base64Chars(lit []byte) int {
	raw := lit[1 : len(lit)-1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		s, _ := jsonscan.Unquote(lit)
		raw = []byte(s)
	}
	n := len(raw)
	for n > 0 && raw[n-1] == '=' {
		n--
	}
	return n
}
