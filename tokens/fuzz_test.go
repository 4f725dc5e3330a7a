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
