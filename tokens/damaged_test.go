package tokens

import (
	"bytes"
	"encoding/base64"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/internal/imagetest"
)

// TestDamagedImages: a transcript's copy of an image may not be clean
// base64 (a secret scrubber's marker inside it, a bad length, stray
// characters), and every protocol's image block is still billed as the
// image its header describes, never as its base64 read as text (the
// marker alone made a real 211 KB screenshot read as 68.7K tokens).
func TestDamagedImages(t *testing.T) {
	b64 := imagetest.Screenshot(t)
	if len(b64) != 216_064 {
		t.Fatalf("the test image is %d base64 characters", len(b64))
	}
	image := ImageTokens(imagetest.ScreenshotWidth, imagetest.ScreenshotHeight)
	for _, req := range imagetest.Requests {
		text := Estimate(req.Body(""))
		for _, dmg := range append([]imagetest.Damage{{Name: "clean", Apply: func(s string) string { return s }}}, imagetest.Damages...) {
			t.Run(req.Name+"/"+dmg.Name, func(t *testing.T) {
				got := Estimate(req.Body(dmg.Apply(b64)))
				if got != text+image {
					t.Errorf("estimate %d, want %d (text) + %d (image)", got, text, image)
				}
				// The target, with the API's cap for the image.
				if want := float64(text + 1600); math.Abs(float64(got)-want) > 0.1*want {
					t.Errorf("estimate %d, not within 10%% of %.0f", got, want)
				}
			})
		}
	}
}

// TestDamagedImageHead: damage in the header: the block's media type
// still says it is an image, its dimensions are found past the damage
// when they survived it, and it is billed from its size when they did
// not.
func TestDamagedImageHead(t *testing.T) {
	jpeg := imagetest.Screenshot(t)
	png := base64.StdEncoding.EncodeToString(pngData(t, 900, 700))
	// A camera's file: an EXIF segment holding a 160 x 120 thumbnail
	// (its own frame header) before the image's frame.
	raw, _ := base64.StdEncoding.DecodeString(jpeg)
	exif := append([]byte("Exif\x00\x00"), jpegData(t, 160, 120, 0)...)
	app1 := append([]byte{0xFF, 0xE1, byte((len(exif) + 2) >> 8), byte(len(exif) + 2)}, exif...)
	camera := base64.StdEncoding.EncodeToString(append(append(append([]byte{}, raw[:2]...), app1...), raw[2:]...))
	fromSize := func(b64 string) int {
		return min(max(len(b64)/4*3/imageBytesPerToken, imageMinTokens), ImageMaxPixels/imagePixelsPer)
	}
	for _, tc := range []struct {
		name, b64 string
		want      int
	}{
		{"JPEG, marker in its first bytes", imagetest.HeadMarker(jpeg), ImageTokens(imagetest.ScreenshotWidth, imagetest.ScreenshotHeight)},
		{"JPEG with a thumbnail, marker in its first bytes", imagetest.HeadMarker(camera), ImageTokens(imagetest.ScreenshotWidth, imagetest.ScreenshotHeight)},
		{"JPEG, frame header lost", jpeg[:8] + "[REDACTED]" + jpeg[800:], fromSize(jpeg[:8] + "[REDACTED]" + jpeg[800:])},
		{"JPEG, stray characters in its first bytes", jpeg[:5] + " " + jpeg[5:9] + "*" + jpeg[9:], ImageTokens(imagetest.ScreenshotWidth, imagetest.ScreenshotHeight)},
		{"PNG, marker in its signature", png[:4] + "[REDACTED]" + png[8:], ImageTokens(900, 700)},
		{"PNG, IHDR lost", imagetest.HeadMarker(png), fromSize(imagetest.HeadMarker(png))},
	} {
		for _, req := range imagetest.Requests {
			t.Run(tc.name+"/"+req.Name, func(t *testing.T) {
				if got, want := Estimate(req.Body(tc.b64)), Estimate(req.Body(""))+tc.want; got != want {
					t.Errorf("estimate %d, want %d (%d for the image)", got, want, tc.want)
				}
			})
		}
	}
}

// TestDamagedDocument: a PDF document whose data holds a marker is billed
// as a PDF from its whole size.
func TestDamagedDocument(t *testing.T) {
	pdf := append([]byte("%PDF-1.7\n"), bytes.Repeat([]byte("stream data "), 40_000)...)
	b64 := imagetest.Damages[0].Apply(base64.StdEncoding.EncodeToString(pdf))
	doc := func(d string) []byte {
		return []byte(`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + d + `"}}`)
	}
	if got, want := Estimate(doc(b64)), Estimate(doc(""))+len(b64)/4*3/pdfBytesPerToken; got != want {
		t.Errorf("estimate %d, want %d", got, want)
	}
}

// textOnly is the estimate of raw with every byte billed as text.
func textOnly(raw []byte) int {
	var c [nClasses]int
	for _, x := range raw {
		c[classOf(x)]++
	}
	return fromCounts(defaultTable, c, 0)
}

// TestDamagedNotImages: what only looks like damaged image data stays
// text.
func TestDamagedNotImages(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	noise := make([]byte, 30_000)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	junk := imagetest.Damages[0].Apply(base64.StdEncoding.EncodeToString(noise))
	png := base64.StdEncoding.EncodeToString(pngData(t, 64, 64))
	prose := strings.Repeat(`The handler returns early when the body is empty, so the retry never runs.\n`, 200)
	for _, tc := range []struct {
		name string
		raw  string
		text string // the part that must be billed as text
	}{
		{"redacted thinking", `{"type":"redacted_thinking","data":"` + junk + `"}`, junk},
		{"plain text document", `{"type":"document","source":{"type":"text","media_type":"text/plain","data":"` + junk + `"}}`, junk},
		{"media type of another object", `[{"source":{"media_type":"image/png"}},{"type":"blob","data":"` + junk + `"}]`, junk},
		{"data URL of text", `{"url":"data:text/plain;base64,` + junk + `"}`, junk},
		{"image head, then prose", `{"type":"text","text":"` + png + `\n` + prose + `"}`, prose},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, min := Estimate([]byte(tc.raw)), textOnly([]byte(tc.text)); got < min {
				t.Errorf("estimate %d, below the %d of its text", got, min)
			}
		})
	}
}
