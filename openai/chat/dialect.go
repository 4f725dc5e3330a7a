package chat

import (
	"bytes"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// dialect is the Chat Completions API's conversation.Dialect. Each parse
// has its own (in the pooled parser), holding what the body told it.
type dialect struct {
	cacheKey span // the top-level prompt_cache_key value, if any
}

// textPart is how a text part of a message's content starts.
const textPart = `{"type":"text","text":`

// AppendText implements conversation.Dialect: a text content part,
// {"type":"text","text":...}, for every role (a tool message's array
// content has the same parts as any other message's). A tool result
// cleared whole becomes a string content, which passes write themselves.
func (*dialect) AppendText(dst []byte, _ conversation.Role, quoted, extra []byte) []byte {
	dst = append(dst, textPart...)
	dst = append(dst, quoted...)
	if len(extra) > 0 {
		dst = append(dst, ',')
		dst = append(dst, extra...)
	}
	return append(dst, '}')
}

// KeptBlock implements conversation.Dialect. Content parts stay as they
// are, except that a string content and a text part with a cache_control
// marker become a plain text part (a rewritten message must not move the
// client's breakpoints) and an empty text ("", as opencode sends beside
// tool calls) goes. What is not a content part cannot stay in a rewritten
// message: the members of an assistant message (reasoning fields,
// function_call, refusal, audio) and anything of a tool message, whose
// run becomes a user message.
func (d *dialect) KeptBlock(c *conversation.Conversation, m *conversation.Message, b *conversation.Block) []byte {
	if m.Role == conversation.RoleTool || !m.Content.Contains(b.Span) {
		return nil
	}
	if b.Kind == conversation.Text {
		if b.Text.Len() <= 2 {
			return nil
		}
		if m.ContentString || !b.CacheControl.IsZero() {
			return d.AppendText(nil, m.Role, c.Bytes(b.Text), nil)
		}
	}
	return c.Bytes(b.Span)
}

// ReplaceMessage implements conversation.Dialect. A run of tool messages
// becomes one user message holding the blocks (tool messages must answer
// calls, and the calls are gone); an assistant message becomes one with
// only a content (its tool calls and reasoning go with the round); any
// other message keeps its members and gets a new content. A content of a
// single plain text part is written as a string, which every
// OpenAI-compatible server accepts for every role.
func (*dialect) ReplaceMessage(c *conversation.Conversation, mi int, blocks [][]byte) (conversation.Span, []byte) {
	m := &c.Messages[mi]
	var out []byte
	sp := m.Span
	switch {
	case m.Role == conversation.RoleTool:
		out = append(out, `{"role":"user","content":`...)
	case m.Role == conversation.RoleAssistant:
		out = append(out, `{"role":"assistant","content":`...)
	case m.Content.IsZero():
		out = append(out, `{"role":`...)
		out = jsonscan.AppendQuote(out, m.Role.String())
		out = append(out, `,"content":`...)
	default:
		return m.Content, appendContent(nil, blocks)
	}
	out = appendContent(out, blocks)
	return sp, append(out, '}')
}

// appendContent appends a content value holding blocks: a string for a
// single plain text part, else an array.
func appendContent(dst []byte, blocks [][]byte) []byte {
	if len(blocks) == 1 {
		if s, ok := plainText(blocks[0]); ok {
			return append(dst, s...)
		}
	}
	if len(blocks) == 0 {
		return append(dst, `""`...)
	}
	dst = append(dst, '[')
	for i, b := range blocks {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, b...)
	}
	return append(dst, ']')
}

// plainText returns the string literal of a text part that has nothing
// but its type and text, as AppendText writes it.
func plainText(b []byte) ([]byte, bool) {
	if !bytes.HasPrefix(b, []byte(textPart)) || len(b) < len(textPart)+3 || b[len(b)-1] != '}' {
		return nil, false
	}
	lit := b[len(textPart) : len(b)-1]
	s, err := jsonscan.Root(lit)
	if err != nil || s.Start != 0 || s.End != len(lit) || jsonscan.KindOf(lit, s) != jsonscan.String {
		return nil, false
	}
	return lit, true
}

// CacheMarker implements conversation.Dialect: none. OpenAI caches
// prefixes by itself; markers some clients put on parts for
// OpenRouter's Anthropic models stay where the client put them.
func (*dialect) CacheMarker(*conversation.Conversation) []byte { return nil }

// Settings implements conversation.Dialect: the API has none of the
// settings a rewrite may need.
func (*dialect) Settings(*conversation.Conversation, conversation.Settings) ([]conversation.SettingEdit, [][2]string) {
	return nil, nil
}

// SessionID implements conversation.Dialect: the top-level
// prompt_cache_key, which clients set to their session to route their
// requests to one cache. opencode's Chat Completions requests carry none
// (its session is in the x-session-id header); "user" names an end user
// across sessions, not a session, so it is not used.
func (d *dialect) SessionID(c *conversation.Conversation) string {
	if jsonscan.KindOf(c.Body, d.cacheKey) != jsonscan.String {
		return ""
	}
	return c.String(d.cacheKey)
}

// Image implements conversation.Dialect for an image_url part:
// {"type":"image_url","image_url":{"url":"data:image/png;base64,...","detail":"auto"}},
// or with the URL as a string (some servers accept "image_url":"...").
func (*dialect) Image(c *conversation.Conversation, sp conversation.Span) (conversation.ImageInfo, bool) {
	body := c.Body
	var img conversation.ImageInfo
	if jsonscan.KindOf(body, sp) != jsonscan.Object {
		return img, false
	}
	var iu, typ span
	it := jsonscan.Members(body, sp)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		switch {
		case jsonscan.KeyIs(body, k, "image_url"):
			iu = v
		case jsonscan.KeyIs(body, k, "type"):
			typ = v
		case jsonscan.KeyIs(body, k, "cache_control"):
			img.Keep = conversation.Span{Start: k.Start, End: v.End}
		}
	}
	if it.Err() != nil || !jsonscan.StringIs(body, typ, "image_url") {
		return img, false
	}
	url := iu
	if jsonscan.KindOf(body, iu) == jsonscan.Object {
		u, err := jsonscan.Lookup(body, iu, "url")
		if err != nil {
			return img, false
		}
		url = u
	}
	if jsonscan.KindOf(body, url) != jsonscan.String {
		return img, false
	}
	raw := url.Bytes(body)
	raw = raw[1 : len(raw)-1]
	if bytes.IndexByte(raw, '\\') >= 0 && bytes.HasPrefix(raw, []byte("data:")) {
		s, err := jsonscan.Unquote(url.Bytes(body))
		if err != nil {
			return img, false
		}
		raw = []byte(s)
	}
	if rest, ok := bytes.CutPrefix(raw, []byte("data:")); ok {
		header, data, found := bytes.Cut(rest, []byte{','})
		if !found {
			return img, false
		}
		media, params, _ := bytes.Cut(header, []byte{';'})
		if len(media) <= 128 {
			img.Media = string(media)
		}
		if bytes.HasSuffix(params, []byte("base64")) {
			img.Inline = true
			img.Base64 = len(bytes.TrimRight(data, "="))
		}
		return img, true
	}
	if url.Len() <= 512 {
		img.URL = c.String(url)
	}
	return img, true
}
