package compress

import (
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/internal/stub"
	"github.com/ctxguard/ctxguard/splice"
)

// imageEdit replaces the image block at sp (a part of a tool result's
// content) with a text block naming the image's media type and size, as
// the conversation's Dialect reads and writes them. What the image block
// must keep (its cache marker) is copied byte for byte into the text
// block, so the request keeps its cache markers. It reports false when
// the replacement would not be shorter or the block is not a well-formed
// image.
func imageEdit(c *conversation.Conversation, sp conversation.Span) (splice.Edit, bool) {
	img, ok := c.Dialect.Image(c, sp)
	if !ok {
		return splice.Edit{}, false
	}
	var text string
	switch {
	case img.Inline:
		media := img.Media
		if media == "" {
			media = "image"
		}
		text = "[ctxguard removed an image: " + media + ", " + stub.Commas(decodedSize(img.Base64)) + " bytes]"
	case img.URL != "":
		text = "[ctxguard removed an image: " + img.URL + "]"
	default:
		text = "[ctxguard removed an image]"
	}
	repl := c.Dialect.AppendText(nil, conversation.RoleTool, jsonscan.AppendQuote(nil, text), c.Bytes(img.Keep))
	if len(repl) >= sp.Len() {
		return splice.Edit{}, false
	}
	return splice.Edit{Span: sp, Repl: repl}, true
}
