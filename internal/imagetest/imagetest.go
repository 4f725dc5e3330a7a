// Package imagetest makes the image data that tests of token estimation
// need: a real JPEG file, encoded by the standard library, and the ways a
// transcript's copy of its base64 differs from what the client sent (a
// secret scrubber's markers, a bad length, stray characters).
package imagetest

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/jpeg"
	"strings"
	"testing"
)

// JPEG returns a baseline JPEG of w x h pixels that is exactly size bytes
// long: a drawn picture encoded by image/jpeg, with comment segments
// inserted before the scan, so that the frame header (the dimensions) is
// near the start as in a camera's or a screenshot tool's file and the
// bulk of the file is what follows it. It fails tb when the picture
// alone is larger than size.
func JPEG(tb testing.TB, w, h, size int) []byte {
	tb.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			// window-like panels with text-like stripes
			c := color.RGBA{uint8(40 + x*160/w), uint8(60 + y*120/h), 200, 255}
			if (x/120+y/90)%3 == 0 && y%14 < 3 && x%9 < 6 {
				c = color.RGBA{20, 20, 20, 255}
			}
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 80}); err != nil {
		tb.Fatal(err)
	}
	b := buf.Bytes()
	sos := bytes.Index(b, []byte{0xFF, 0xDA})
	if sos < 0 {
		tb.Fatal("imagetest: no start of scan in the encoded JPEG")
	}
	pad := size - len(b)
	if pad < 0 || pad > 0 && pad < 4 {
		tb.Fatalf("imagetest: a %dx%d JPEG is %d bytes, cannot make it %d", w, h, len(b), size)
	}
	var com []byte
	for pad > 0 {
		n := min(pad, 0xFFFF+2) // a segment's length counts its own two bytes
		if rest := pad - n; rest > 0 && rest < 4 {
			n -= 4 - rest // leave room for one more whole segment
		}
		com = append(com, 0xFF, 0xFE, byte((n-2)>>8), byte(n-2))
		com = append(com, bytes.Repeat([]byte{'.'}, n-4)...)
		pad -= n
	}
	return append(append(append([]byte{}, b[:sos]...), com...), b[sos:]...)
}

// ScreenshotWidth and ScreenshotHeight are the dimensions of Screenshot.
const ScreenshotWidth, ScreenshotHeight = 1456, 816

// Screenshot returns the base64 of the image that tests of damaged data
// use: a 1456 x 816 JPEG (the API bills such an image 1,585 tokens, as it
// billed the real screenshot these tests stand for) of 162,048 bytes,
// whose base64 is 216,064 characters: a 211 KB block.
func Screenshot(tb testing.TB) string {
	tb.Helper()
	return base64.StdEncoding.EncodeToString(JPEG(tb, ScreenshotWidth, ScreenshotHeight, 162_048))
}

// requestText is the text around the image in Requests.
const requestText = `The dashboard renders the chart twice after a resize; the second copy is offset by the sidebar width. Screenshot attached.`

// Request is a request holding one JPEG image, as one API's clients write
// it.
type Request struct {
	Name     string
	Protocol string // "anthropic", "responses" or "chat"
	// Body returns the request with b64 as the image's base64 data.
	Body func(b64 string) []byte
}

// Requests are an image in each protocol's shapes: Anthropic image blocks
// (in a user message, in a tool result with the data before its media
// type, spaced as the Python SDK writes JSON), a Responses input_image
// part and a Chat Completions image_url part, with text around it.
var Requests = []Request{
	{"anthropic image block", "anthropic", func(d string) []byte {
		return []byte(`{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"` + requestText +
			`"},{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"` + d + `"}}]}]}`)
	}},
	{"anthropic tool_result image", "anthropic", func(d string) []byte {
		return []byte(`{"model":"claude-sonnet-4-5","max_tokens":8192,"stream":true,"messages":[{"role":"user","content":"` + requestText + `"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01Xa","name":"Read","input":{"file_path":"/tmp/shot.jpg"}}]},` +
			`{"role":"user","content":[{"tool_use_id":"toolu_01Xa","type":"tool_result","content":[{"type":"image","source":{"type":"base64","data":"` + d +
			`","media_type":"image/jpeg"}}]}]}]}`)
	}},
	{"anthropic, SDK spacing", "anthropic", func(d string) []byte {
		return []byte(`{"model": "claude-sonnet-4-5", "max_tokens": 8192, "messages": [{"role": "user", "content": [{"type": "text", "text": "` + requestText +
			`"}, {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "` + d + `"}}]}]}`)
	}},
	{"responses input_image", "responses", func(d string) []byte {
		return []byte(`{"model":"gpt-5.2-codex","stream":true,"store":false,"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"` + requestText +
			`"},{"type":"input_image","image_url":"data:image/jpeg;base64,` + d + `","detail":"auto"}]}]}`)
	}},
	{"chat image_url", "chat", func(d string) []byte {
		return []byte(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":[{"type":"text","text":"` + requestText +
			`"},{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,` + d + `","detail":"auto"}}]}]}`)
	}},
}

// Damage is one way the base64 data of an image, as a transcript keeps
// it, differs from what was sent. Apply returns the damaged data as it
// appears inside a JSON string.
type Damage struct {
	Name  string
	Apply func(b64 string) string
}

// Damages are the damages that leave the image's header readable: they
// are past its first 2,000 characters.
var Damages = []Damage{
	{"marker", func(s string) string {
		// a scrubber took digit-and-letter runs for a phone number and a
		// key: 10 characters at a fifth of the data, 20 at three fifths
		a, b := len(s)/5, 3*len(s)/5
		return s[:a] + "[REDACTED_PHONE]" + s[a+10:b] + "[REDACTED_AWS_KEY]" + s[b+20:]
	}},
	{"bad length", func(s string) string {
		// 3 characters lost in the middle: a length no base64 has
		m := len(s) / 2
		return s[:m] + s[m+3:]
	}},
	{"stray characters", func(s string) string {
		var b strings.Builder
		stray := []string{`\n`, " ", "*", ".", `\r\n`, "%"}
		step := len(s) / (len(stray) + 1)
		for i, x := range stray {
			b.WriteString(s[i*step : (i+1)*step])
			b.WriteString(x)
		}
		b.WriteString(s[len(stray)*step:])
		return b.String()
	}},
}

// HeadMarker is the damage that breaks the header: a marker in place of
// characters 8 to 19 of the data, where a JPEG's or PNG's first bytes are
// (the frame header or IHDR chunk follows it).
func HeadMarker(s string) string { return s[:8] + "[REDACTED]" + s[20:] }
