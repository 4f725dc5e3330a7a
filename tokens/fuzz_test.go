package tokens

import (
	"testing"
)

// FuzzEstimate checks the fast path against the simple class count on any
// input, and that payload decoding never panics.
func FuzzEstimate(f *testing.F) {
	f.Add([]byte(`{"type":"text","text":"hello"}`))
	f.Add(thinkingBlock(400))
	f.Add([]byte(`"` + string(make([]byte, 0)) + `iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==` + `"`))
	f.Add([]byte(`{"data":"/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8UHRofHh0aHBwgJC4nICIsIxwcKDcpLDAxNDQ0Hyc5PTgyPC4zNDL/wAALCAABAAEBAREA/8QAFAABAAAAAAAAAAAAAAAAAAAACf/EABQQAQAAAAAAAAAAAAAAAAAAAAD/2gAIAQEAAD8AKp//2Q=="}`))
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
