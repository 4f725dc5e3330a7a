package tokens

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/internal/imagetest"
)

// FuzzEstimate checks the fast path against the simple class count on any
// input, and that payload decoding never panics.
func FuzzEstimate(f *testing.F) {
	f.Add([]byte(`{"type":"text","text":"hello"}`))
	f.Add(thinkingBlock(400))
	f.Add([]byte(`"` + string(make([]byte, 0)) + `iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==` + `"`))
	f.Add([]byte(`{"data":"/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8UHRofHh0aHBwgJC4nICIsIxwcKDcpLDAxNDQ0Hyc5PTgyPC4zNDL/wAALCAABAAEBAREA/8QAFAABAAAAAAAAAAAAAAAAAAAACf/EABQQAQAAAAAAAAAAAAAAAAAAAAD/2gAIAQEAAD8AKp//2Q=="}`))
	// Damaged image data in each protocol's shape: the fuzzer mutates the
	// markers, the quotes and the members around them.
	jpeg := base64.StdEncoding.EncodeToString(jpegData(f, 64, 48, 0))
	for _, req := range imagetest.Requests {
		f.Add(req.Body(jpeg[:40] + "[REDACTED_PHONE]" + jpeg[40:]))
		f.Add(req.Body("[REDACTED]" + jpeg[12:]))
	}
	f.Add([]byte(`{"media_type" : "image/png" , "data" : "` + strings.Repeat("QUJD", 40) + `*` + strings.Repeat("QUJD", 40) + `"}`))
	f.Add([]byte(`<img src=\"data:image/jpeg;base64,` + jpeg + `\"> and ![x](data:image/png;base64,` + jpeg + `)`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, extra := counts(raw)
		if got, want := Estimate(raw), fromCounts(defaultTable, c, extra); got != want {
			t.Fatalf("Estimate = %d, class counts give %d", got, want)
		}
		if n := Estimate(raw); n < 0 {
			t.Fatalf("negative estimate %d", n)
		}
		if tok, ok := ImageDataTokens(raw); ok && (tok < 0 || tok > ImageMaxPixels/imagePixelsPer+1) {
			t.Fatalf("image tokens %d", tok)
		}
	})
}

// FuzzCalibrationJSON: any stored state either fails to load or loads
// into a Calibration that works (factors within the clamp, learning goes
// on) and writes itself back to state that loads to the same snapshot.
func FuzzCalibrationJSON(f *testing.F) {
	f.Add([]byte(`{"version":1,"half_life":50,"models":{"claude-sonnet-4-5":{"estimated":100000,"actual":106000,"n":12,"rejected":1}}}`))
	f.Add([]byte(`{"version":1,"half_life":0,"models":{"gpt-5.2-codex":{"estimated":0,"actual":0,"n":0,"rejected":0,"growth":[[1000,860],[2000,1700],[500,430]],"growth_n":3}}}`))
	f.Add([]byte(`{"version":1,"models":{"m":{"growth":[[1,1e308]]}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var c Calibration
		if err := c.UnmarshalJSON(raw); err != nil {
			return
		}
		for _, s := range c.Snapshot() {
			if !(s.Factor >= calibrationMinFactor && s.Factor <= calibrationMaxFactor) {
				t.Fatalf("factor %v of %q outside the clamp", s.Factor, s.Model)
			}
		}
		c.ObserveSession("s", "claude-sonnet-4-5", 10_000, 11_000)
		c.ObserveSession("s", "claude-sonnet-4-5", 11_000, 12_100)
		roundTrip(t, &c)
	})
}

// FuzzDamagedImage: whatever few bytes a transcript put into an image's
// data (anywhere, head included; no quote or backslash, which would end
// or escape the JSON string), every protocol's image block stays billed
// as one image: at least a token, at most the API's cap, never its base64
// as text.
func FuzzDamagedImage(f *testing.F) {
	b64 := base64.StdEncoding.EncodeToString(imagetest.JPEG(f, 640, 400, 60_000))
	f.Add(uint32(len(b64)/3), []byte("[REDACTED_PHONE]"))
	f.Add(uint32(8), []byte("[REDACTED]"))
	f.Add(uint32(0), []byte("%"))
	f.Add(uint32(len(b64)), []byte(" * "))
	f.Add(uint32(100), []byte("iVBORw0KGgoAAAANSUhEUgAAAAAAAAAA"))
	f.Fuzz(func(t *testing.T, at uint32, junk []byte) {
		if len(junk) > 64 || bytes.ContainsAny(junk, "\"\\") || bytes.ContainsFunc(junk, func(r rune) bool { return r < 0x20 }) {
			return
		}
		at %= uint32(len(b64)) + 1
		d := b64[:at] + string(junk) + b64[at:]
		for _, req := range imagetest.Requests {
			img := Estimate(req.Body(d)) - Estimate(req.Body(""))
			if img < 1 || img > ImageMaxPixels/imagePixelsPer {
				t.Fatalf("%s: the image is billed %d tokens", req.Name, img)
			}
		}
	})
}
