package gemini

import (
	"bytes"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// dialect is the Gemini API's conversation.Dialect. The API has no cache
// markers (it caches prefixes by itself), no settings a rewrite needs,
// and no session id in the body.
type dialect struct{}

// AppendText implements conversation.Dialect: a text part, {"text":...},
// for every role. extra (an image's thoughtSignature, say) joins it.
func (dialect) AppendText(dst []byte, _ conversation.Role, quoted, extra []byte) []byte {
	dst = append(dst, `{"text":`...)
	dst = append(dst, quoted...)
	if len(extra) > 0 {
		dst = append(dst, ',')
		dst = append(dst, extra...)
	}
	return append(dst, '}')
}

// KeptBlock implements conversation.Dialect: a part as it is, its
// thoughtSignature included, except an empty text part, which goes, and
// a functionCall or functionResponse part, even an Opaque one: the API
// rejects a response without its call and a call without its response.
func (dialect) KeptBlock(c *conversation.Conversation, m *conversation.Message, b *conversation.Block) []byte {
	switch {
	case b.Kind == conversation.Text && b.Text.Len() <= 2:
		return nil
	case b.Type == "functionCall" || b.Type == "functionResponse":
		return nil
	}
	return c.Bytes(b.Span)
}

// ReplaceMessage implements conversation.Dialect: the content's parts
// become the blocks (one empty text part when there are none, since the
// API refuses a content without parts); its role and other members stay.
// A content without a parts array is written whole, in its role.
func (d dialect) ReplaceMessage(c *conversation.Conversation, mi int, blocks [][]byte) (conversation.Span, []byte) {
	m := &c.Messages[mi]
	out := appendParts(nil, blocks)
	if m.Content.IsZero() || jsonscan.KindOf(c.Body, m.Content) != jsonscan.Array {
		head := []byte(`{"role":"user","parts":`)
		if m.Role == conversation.RoleAssistant {
			head = []byte(`{"role":"model","parts":`)
		}
		return m.Span, append(append(head, out...), '}')
	}
	return m.Content, out
}

// appendParts appends a parts array holding blocks.
func appendParts(dst []byte, blocks [][]byte) []byte {
	dst = append(dst, '[')
	n := 0
	for _, b := range blocks {
		if len(b) == 0 {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, b...)
		n++
	}
	if n == 0 {
		dst = append(dst, `{"text":""}`...)
	}
	return append(dst, ']')
}

// CacheMarker implements conversation.Dialect: none; the API caches
// prefixes by itself (implicit caching).
func (dialect) CacheMarker(*conversation.Conversation) []byte { return nil }

// Settings implements conversation.Dialect: the API has none of the
// settings a rewrite may ask for.
func (dialect) Settings(*conversation.Conversation, conversation.Settings) ([]conversation.SettingEdit, [][2]string) {
	return nil, nil
}

// SessionID implements conversation.Dialect: none; Gemini requests carry
// no session id (the engine keys the session on its first contents).
func (dialect) SessionID(*conversation.Conversation) string { return "" }

// Image implements conversation.Dialect for an image part:
// {"inlineData":{"mimeType":"image/png","data":"<base64>"}} (inline) or
// {"fileData":{"mimeType":"image/png","fileUri":"..."}}. A replacement
// keeps the part's thoughtSignature (Keep).
func (dialect) Image(c *conversation.Conversation, sp conversation.Span) (conversation.ImageInfo, bool) {
	body := c.Body
	var img conversation.ImageInfo
	if jsonscan.KindOf(body, sp) != jsonscan.Object {
		return img, false
	}
	var inline, file span
	it := jsonscan.Members(body, sp)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		switch {
		case jsonscan.KeyIs(body, k, "inlineData") || jsonscan.KeyIs(body, k, "inline_data"):
			inline = v
		case jsonscan.KeyIs(body, k, "fileData") || jsonscan.KeyIs(body, k, "file_data"):
			file = v
		case jsonscan.KeyIs(body, k, "thoughtSignature") || jsonscan.KeyIs(body, k, "thought_signature"):
			img.Keep = conversation.Span{Start: k.Start, End: v.End}
		}
	}
	if it.Err() != nil {
		return img, false
	}
	data := inline
	if data.IsZero() {
		data = file
	}
	if jsonscan.KindOf(body, data) != jsonscan.Object {
		return img, false
	}
	var mime, payload, uri span
	it = jsonscan.Members(body, data)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		switch {
		case jsonscan.KeyIs(body, k, "mimeType") || jsonscan.KeyIs(body, k, "mime_type"):
			mime = v
		case jsonscan.KeyIs(body, k, "data"):
			payload = v
		case jsonscan.KeyIs(body, k, "fileUri") || jsonscan.KeyIs(body, k, "file_uri"):
			uri = v
		}
	}
	if it.Err() != nil || jsonscan.KindOf(body, mime) != jsonscan.String || mime.Len() > 130 {
		return img, false
	}
	media := jsonscan.Text(body, mime)
	if !bytes.HasPrefix(media, []byte("image/")) {
		return img, false
	}
	img.Media = string(media)
	if !inline.IsZero() {
		if jsonscan.KindOf(body, payload) != jsonscan.String {
			return img, false
		}
		img.Inline, img.Base64 = true, anthropic.Base64Chars(payload.Bytes(body))
		return img, true
	}
	if jsonscan.KindOf(body, uri) == jsonscan.String && uri.Len() <= 514 {
		img.URL = c.String(uri)
	}
	return img, true
}

// SkipSignature is the thoughtSignature the Gemini API documents for a
// part whose own signature is missing or not the model's (history from
// another model, or written by the client): the model's check of the
// current turn accepts it. The Gemini CLI sends it on a resumed
// session's calls.
const SkipSignature = `"skip_thought_signature_validator"`

// Unsign implements conversation.Unsigner. A thought goes whole (ok
// false). Any other part keeps its place: for a Gemini model (target
// "google") its thoughtSignature becomes SkipSignature, which Gemini 3
// models accept on the calls of the current turn; for a model of another
// family served through the Gemini API the member goes.
func (dialect) Unsign(c *conversation.Conversation, b *conversation.Block, target string) (conversation.Span, []byte, bool) {
	if b.Signature.IsZero() || b.Kind == conversation.Thinking || b.Kind == conversation.RedactedThinking {
		return conversation.Span{}, nil, false
	}
	if target == "google" {
		return b.Signature, []byte(SkipSignature), true
	}
	it := jsonscan.Members(c.Body, b.Span)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		if v == b.Signature {
			return conversation.Span{Start: k.Start, End: v.End}, nil, true
		}
	}
	return conversation.Span{}, nil, false
}
