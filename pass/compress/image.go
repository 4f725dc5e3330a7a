package compress

import (
	"github.com/ctxguard/ctxguard/internal/stub"

	"bytes"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/splice"
)

// imageEdit replaces the image block at sp (an object inside a tool_result
// content array) with a text block naming the image's media type and
// size. A cache_control member of the image block is copied byte for byte
// into the text block, so the request keeps its cache markers. It reports
// false when the replacement would not be shorter or the block is not a
// well-formed image.
func imageEdit(body []byte, sp jsonscan.Span) (splice.Edit, bool) {
	var source, cc jsonscan.Span
	it := jsonscan.Members(body, sp)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		switch {
		case jsonscan.KeyIs(body, k, "source"):
			source = v
		case jsonscan.KeyIs(body, k, "cache_control"):
			cc = jsonscan.Span{Start: k.Start, End: v.End}
		}
	}
	if it.Err() != nil || jsonscan.KindOf(body, source) != jsonscan.Object {
		return splice.Edit{}, false
	}
	var kind, media, data, url string
	var dataLen int
	it = jsonscan.Members(body, source)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		str := func() string {
			if jsonscan.KindOf(body, v) != jsonscan.String || v.Len() > 512 {
				return ""
			}
			s, _ := jsonscan.Unquote(v.Bytes(body))
			return s
		}
		switch {
		case jsonscan.KeyIs(body, k, "type"):
			kind = str()
		case jsonscan.KeyIs(body, k, "media_type"):
			media = str()
		case jsonscan.KeyIs(body, k, "data"):
			if jsonscan.KindOf(body, v) == jsonscan.String {
				raw := v.Bytes(body)
				d := string(raw[1 : len(raw)-1])
				if bytes.IndexByte(raw, '\\') >= 0 {
					d, _ = jsonscan.Unquote(raw)
				}
				dataLen = countB64(d)
				data = "yes"
			}
		case jsonscan.KeyIs(body, k, "url"):
			url = str()
		}
	}
	if it.Err() != nil {
		return splice.Edit{}, false
	}
	var text string
	switch {
	case kind == "base64" && data != "":
		if media == "" {
			media = "image"
		}
		text = "[ctxguard removed an image: " + media + ", " + stub.Commas(decodedSize(dataLen)) + " bytes]"
	case kind == "url" && url != "":
		text = "[ctxguard removed an image: " + url + "]"
	default:
		text = "[ctxguard removed an image]"
	}
	repl := append([]byte(`{"type":"text","text":`), jsonscan.AppendQuote(nil, text)...)
	if !cc.IsZero() {
		repl = append(repl, ',')
		repl = append(repl, cc.Bytes(body)...)
	}
	repl = append(repl, '}')
	if len(repl) >= sp.Len() {
		return splice.Edit{}, false
	}
	return splice.Edit{Span: sp, Repl: repl}, true
}
