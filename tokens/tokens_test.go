package tokens

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// fromCounts is the estimate the class counts give at the fixed-point
// weights of t: Estimate must equal it exactly.
func fromCounts(t *table, c [nClasses]int, extra int) int {
	total := 0
	for cl, n := range c {
		// any byte of the class gives the class's weight
		for b := range 256 {
			if classOf(byte(b)) == class(cl) {
				total += n * int(t.one[b]&^b64Flag)
				break
			}
		}
	}
	return (total+fixOne/2)>>fixShift + extra
}

func TestEstimateEqualsClassCounts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	inputs := [][]byte{nil, []byte("a"), []byte(`{"type":"text","text":"hello, world"}`)}
	alphabets := []string{
		"abcdefghij KLMNOP 0123456789 {}[]\":,\\n",
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=",
		"日本語のテキスト、한국어 텍스트 and émojis 😀 → ✓",
	}
	for n := 0; n < 300; n++ {
		a := []rune(alphabets[n%len(alphabets)])
		var b strings.Builder
		for range rng.IntN(3000) {
			b.WriteRune(a[rng.IntN(len(a))])
		}
		inputs = append(inputs, []byte(b.String()))
	}
	// payload-shaped inputs
	inputs = append(inputs, thinkingBlock(600), imageBlock(t, "png", pngData(t, 640, 480)))
	for _, in := range inputs {
		c, extra := counts(in)
		if got, want := Estimate(in), fromCounts(defaultTable, c, extra); got != want {
			t.Fatalf("Estimate = %d, class counts give %d for %.80q", got, want, in)
		}
	}
}

func TestEstimateClasses(t *testing.T) {
	w := DefaultWeights
	r := func(x float64) int { return int(math.Floor(x + 0.5)) }
	for _, tc := range []struct {
		name string
		in   string
		want int
	}{
		{"empty", "", 0},
		{"letters", strings.Repeat("a", 400), r(400 * w.Alpha)},
		{"digits", strings.Repeat("7", 100), r(100 * w.Digit)},
		{"spaces", strings.Repeat(" ", 100), r(100 * w.Space)},
		{"escapes", strings.Repeat(`\n`, 50), r(50*w.Backslash + 50*w.Alpha)},
		{"raw newlines bill as escapes", strings.Repeat("\n", 50), r(50 * (w.Backslash + w.Alpha))},
		{"punctuation", strings.Repeat(`{"":[]},`, 25), r(200 * w.Punct)},
		{"accents", strings.Repeat("é", 100), r(100 * w.Lead)},
		{"arrows", strings.Repeat("→", 100), r(100 * w.Lead)},
		{"CJK", strings.Repeat("語", 100), r(100 * w.CJK)},
		{"Hangul", strings.Repeat("한", 100), r(100 * w.CJK)},
		{"emoji", strings.Repeat("😀", 10), r(10 * w.Lead)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// fixed-point rounding may move the result by one
			if got := Estimate([]byte(tc.in)); got < tc.want-1 || got > tc.want+1 {
				t.Errorf("Estimate = %d, want %d±1", got, tc.want)
			}
			if got, want := EstimateText(tc.in), Estimate([]byte(tc.in)); got != want {
				t.Errorf("EstimateText = %d, Estimate = %d", got, want)
			}
		})
	}
}

func TestEstimateDensity(t *testing.T) {
	prose := []byte(strings.Repeat("The quick brown fox jumps over the lazy dog and keeps running. ", 40))
	js := []byte(strings.Repeat(`{"id":1234,"ok":true,"tags":["a","b"],"n":[1,2,3]},`, 40))
	cjk := []byte(strings.Repeat("今日は良い天気ですね。", 40))
	per := func(b []byte) float64 { return float64(Estimate(b)) / float64(len(b)) }
	if per(js) < 2*per(prose) {
		t.Errorf("JSON %.3f tokens/byte is not much denser than prose %.3f", per(js), per(prose))
	}
	// Per character, CJK costs about a token; prose about a quarter.
	perChar := float64(Estimate(cjk)) / float64(len([]rune(string(cjk))))
	if perChar < 0.9 || perChar > 1.3 {
		t.Errorf("CJK %.2f tokens per character", perChar)
	}
	if p := per(prose); p < 0.18 || p > 0.3 {
		t.Errorf("prose %.3f tokens per byte", p)
	}
}

func thinkingBlock(sigLen int) []byte {
	sig := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0x5a, 0x13, 0xc7}, sigLen/4+1))[:sigLen]
	return []byte(`{"type":"thinking","thinking":"Let me look at the failing test first.","signature":"` + sig + `"}`)
}

func TestSignatureNotBilled(t *testing.T) {
	base := Estimate([]byte(`{"type":"thinking","thinking":"Let me look at the failing test first.","signature":""}`))
	for _, n := range []int{300, 1200, 5000} {
		got := Estimate(thinkingBlock(n))
		// The boundary words of the run stay counted: a few tokens.
		if got < base || got > base+8 {
			t.Errorf("signature of %d chars: estimate %d, without it %d", n, got, base)
		}
	}
	// Runs shorter than 128 bytes are not looked at: billed as text.
	if got := Estimate(thinkingBlock(100)); got < base+20 {
		t.Errorf("a 100-char signature estimated at %d, below the run threshold it is text", got)
	}
	// The same base64 as tool output is text.
	sig := thinkingBlock(1200)
	out := bytes.Replace(sig, []byte(`"signature"`), []byte(`"content"`), 1)
	if got := Estimate(out); got < base+200 {
		t.Errorf("base64 text in a tool result estimated at %d, should be billed", got)
	}
}

// TestEncryptedReasoningNotBilled: the Responses API's encrypted reasoning
// (URL-safe base64, '-' and '_' included) costs nothing, like a thinking
// signature; the same characters elsewhere are text.
func TestEncryptedReasoningNotBilled(t *testing.T) {
	item := func(key string, n int) []byte {
		enc := "gAAAAAB" + base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff, 0xbe, 0x13}, n/5+1))[:n]
		return []byte(`{"type":"reasoning","summary":[],"` + key + `":"` + enc + `"}`)
	}
	base := Estimate([]byte(`{"type":"reasoning","summary":[],"encrypted_content":""}`))
	for _, n := range []int{300, 4000, 20000} {
		enc := item("encrypted_content", n)
		if !bytes.ContainsAny(enc, "-_") {
			t.Fatal("the test data has no URL-safe characters")
		}
		if got := Estimate(enc); got < base || got > base+8 {
			t.Errorf("encrypted content of %d chars: estimate %d, without it %d", n, got, base)
		}
		if got := Estimate(item("content", n)); got < base+n/10 {
			t.Errorf("the same %d chars as text estimated at %d", n, got)
		}
	}
}

func pngData(t testing.TB, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y += 7 {
		for x := 0; x < w; x += 5 {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func jpegData(t testing.TB, w, h int, app int) []byte {
	img := image.NewGray(image.Rect(0, 0, w, h))
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, nil); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if app > 0 {
		// Insert an APP1 segment of app bytes after SOI, as cameras do.
		seg := append([]byte{0xFF, 0xE1, byte((app + 2) >> 8), byte(app + 2)}, bytes.Repeat([]byte{0xAB}, app)...)
		b = append(append(append([]byte{}, b[:2]...), seg...), b[2:]...)
	}
	return b
}

func gifData(t testing.TB, w, h int) []byte {
	img := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.Black, color.White})
	var buf bytes.Buffer
	if err := gif.Encode(&buf, img, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// webpHeader builds the first bytes of a WebP file of each flavour; the
// rest is filler (the estimator reads the header only).
func webpHeader(flavour string, w, h int) []byte {
	b := []byte("RIFF\x00\x10\x00\x00WEBP" + flavour)
	b = append(b, make([]byte, 18)...)
	switch flavour {
	case "VP8X":
		b[24], b[25], b[26] = byte(w-1), byte((w-1)>>8), byte((w-1)>>16)
		b[27], b[28], b[29] = byte(h-1), byte((h-1)>>8), byte((h-1)>>16)
	case "VP8L":
		v := uint32(w-1) | uint32(h-1)<<14
		b[20] = 0x2f
		b[21], b[22], b[23], b[24] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	case "VP8 ":
		b[26], b[27] = byte(w), byte(w>>8)
		b[28], b[29] = byte(h), byte(h>>8)
	}
	return append(b, bytes.Repeat([]byte{0x42}, 4000)...)
}

func imageBlock(t testing.TB, format string, data []byte) []byte {
	return []byte(`{"type":"image","source":{"type":"base64","media_type":"image/` + format + `","data":"` +
		base64.StdEncoding.EncodeToString(data) + `"}}`)
}

func TestImageTokens(t *testing.T) {
	for _, tc := range []struct{ w, h, want int }{
		{0, 100, 0},
		{100, 100, 14},       // 10,000 / 750 = 13.3
		{800, 600, 640},      // no scaling
		{1000, 1000, 1334},   // 1,000,000 px: under the pixel cap
		{1568, 1568, 1599},   // pixel cap: 1095 x 1095
		{3000, 1500, 1599},   // edge cap to 1568 x 784, then pixel cap to 1549 x 774
		{4000, 200, 164},     // edge cap: 1568 x 78
		{491, 1924, 837},     // edge cap: 400 x 1568 (the WebP in the real data)
		{20000, 20000, 1599}, // huge
		{40000, 1, 1},        // edge cap to 1568 x 0.04: still a token
	} {
		t.Run(fmt.Sprint(tc.w, "x", tc.h), func(t *testing.T) {
			if got := ImageTokens(tc.w, tc.h); got != tc.want {
				t.Errorf("ImageTokens = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestImagesInBlocks(t *testing.T) {
	frame := Estimate(imageBlock(t, "png", nil))
	for _, tc := range []struct {
		name string
		data []byte
		w, h int
	}{
		{"png", pngData(t, 640, 480), 640, 480},
		{"png large", pngData(t, 2400, 1800), 2400, 1800},
		{"jpeg", jpegData(t, 1024, 768, 0), 1024, 768},
		{"jpeg with app segment", jpegData(t, 300, 200, 9000), 300, 200},
		{"gif", gifData(t, 320, 240), 320, 240},
		{"webp VP8X", webpHeader("VP8X", 491, 1924), 491, 1924},
		{"webp VP8L", webpHeader("VP8L", 1200, 900), 1200, 900},
		{"webp VP8", webpHeader("VP8 ", 700, 500), 700, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := ImageTokens(tc.w, tc.h)
			b64 := []byte(base64.StdEncoding.EncodeToString(tc.data))
			if got, ok := ImageDataTokens(b64); !ok || got != want {
				t.Errorf("ImageDataTokens = %d, %v; want %d", got, ok, want)
			}
			got := Estimate(imageBlock(t, "png", tc.data))
			if got < frame+want-4 || got > frame+want+8 {
				t.Errorf("block estimate %d, want about %d (frame) + %d (image); bytes/4 would say %d", got, frame, want, len(b64)/4)
			}
			// In an OpenAI data URL too.
			url := []byte(`{"type":"image_url","image_url":{"url":"data:image/png;base64,` + string(b64) + `"}}`)
			if got := Estimate(url); got > want+60 || got < want {
				t.Errorf("data URL estimate %d, want about %d", got, want)
			}
		})
	}
}

func TestImageFallbacks(t *testing.T) {
	// A PNG whose IHDR is damaged: estimated from size, within bounds.
	d := pngData(t, 400, 400)
	copy(d[12:16], "XXXX")
	b64 := []byte(base64.StdEncoding.EncodeToString(d))
	got, ok := ImageDataTokens(b64)
	if !ok || got < imageMinTokens || got > 1600 {
		t.Errorf("damaged PNG: %d %v", got, ok)
	}
	// Not an image.
	if _, ok := ImageDataTokens([]byte(base64.StdEncoding.EncodeToString([]byte("just some text, no magic here")))); ok {
		t.Error("text accepted as an image")
	}
	// A PDF document block: billed from its size, at least 1,500.
	pdf := append([]byte("%PDF-1.7\n"), bytes.Repeat([]byte("stream data "), 4000)...)
	doc := []byte(`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + base64.StdEncoding.EncodeToString(pdf) + `"}}`)
	if got := Estimate(doc); got < pdfMinTokens || got > len(pdf)/pdfBytesPerToken+100 {
		t.Errorf("PDF estimate %d", got)
	}
}

func TestDecodeAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, 300)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, n := range []int{0, 1, 2, 3, 100, 299, 300} {
		b64 := []byte(base64.StdEncoding.EncodeToString(data[:n]))
		for off := 0; off <= n; off += 1 + off/3 {
			dst := make([]byte, 17)
			got := decodeAt(b64, off, dst)
			want := data[off:min(off+17, n)]
			if !bytes.Equal(dst[:got], want) {
				t.Fatalf("n=%d off=%d: got %x want %x", n, off, dst[:got], want)
			}
		}
	}
	if n := decodeAt([]byte("ab!d"), 0, make([]byte, 3)); n != 0 {
		t.Errorf("invalid base64 decoded %d bytes", n)
	}
}

func TestEstimateAllocs(t *testing.T) {
	body := sampleBody(t, 1<<20)
	if a := testing.AllocsPerRun(10, func() { Estimate(body) }); a != 0 {
		t.Errorf("Estimate allocates %.0f times", a)
	}
}

// sampleBody is about n bytes of request-like JSON: text, code, tool
// output, a thinking signature and an image, repeated.
func sampleBody(t testing.TB, n int) []byte {
	var unit bytes.Buffer
	unit.WriteString(`{"role":"user","content":[{"tool_use_id":"toolu_01S5d5TWMGHx427XJto9t5FF","type":"tool_result","content":"     1→package main\n     2→\n     3→import (\n     4→\t\"fmt\"\n     5→\t\"os\"\n     6→)\n     7→\n     8→func main() {\n     9→\tif len(os.Args) < 2 {\n    10→\t\tfmt.Fprintln(os.Stderr, \"usage: tool <file>\")\n    11→\t\tos.Exit(2)\n    12→\t}\n    13→}\n","is_error":false}]},`)
	unit.WriteString(`{"role":"assistant","content":[`)
	unit.Write(thinkingBlock(700))
	unit.WriteString(`,{"type":"text","text":"The handler returns early when the request has no body, so the retry logic never runs. I will move the check after the retry setup and add a test for the empty body case."},{"type":"tool_use","id":"toolu_01Y7DdnJqYnz8aBH42JSBxJQ","name":"Bash","input":{"command":"go test ./internal/... -run TestRetry -count=1 2>&1 | tail -20","description":"Run the retry tests"}}]},`)
	unit.Write(imageBlock(t, "png", pngData(t, 300, 200)))
	out := bytes.Repeat(unit.Bytes(), n/unit.Len()+1)
	return out[:n]
}

// TestBase64Alphabet: the table the payload detector reads holds exactly
// the standard and URL-safe base64 alphabets.
func TestBase64Alphabet(t *testing.T) {
	const alphabets = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_"
	for c := range 256 {
		if got, want := isBase64(byte(c)), strings.IndexByte(alphabets, byte(c)) >= 0; got != want {
			t.Errorf("isBase64(%q) = %v, want %v", byte(c), got, want)
		}
	}
}
