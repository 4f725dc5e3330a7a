package tokens

import (
	"testing"

	"github.com/ctxguard/ctxguard/internal/imagetest"
)

func BenchmarkEstimate1MB(b *testing.B) {
	body := sampleBody(b, 1<<20)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		Estimate(body)
	}
}

func BenchmarkEstimateBlock(b *testing.B) {
	blk := []byte(`{"type":"tool_result","tool_use_id":"toolu_01S5d5TWMGHx427XJto9t5FF","content":"ok: 12 tests passed in 0.41s\n"}`)
	b.SetBytes(int64(len(blk)))
	b.ReportAllocs()
	for b.Loop() {
		Estimate(blk)
	}
}

// BenchmarkCalibrationObserve is one answer's usage observed and the
// next request's factor: a full window refit.
func BenchmarkCalibrationObserve(b *testing.B) {
	c := NewCalibration()
	for i := range CalibrationWindow {
		c.ObserveGrowth("claude-sonnet-4-5", 300+i%700, 320+(i*7)%800)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		c.ObserveSession("s", "claude-sonnet-4-5", 10_000+500*i, 11_000+540*i)
		_ = c.Adjust("claude-sonnet-4-5", 100_000)
	}
}

// BenchmarkEstimateDamagedImage is a request with a 211 KB screenshot whose
// frame header a marker destroyed: the slowest way an image is billed (its
// first 96 KB searched for dimensions at 4 alignments, then its size).
func BenchmarkEstimateDamagedImage(b *testing.B) {
	s := imagetest.Screenshot(b)
	body := imagetest.Requests[0].Body(s[:8] + "[REDACTED]" + s[800:])
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		Estimate(body)
	}
}

// BenchmarkEstimateMarkedImage is the same screenshot with markers past
// its header, as transcripts keep it: dimensions read in place.
func BenchmarkEstimateMarkedImage(b *testing.B) {
	body := imagetest.Requests[0].Body(imagetest.Damages[0].Apply(imagetest.Screenshot(b)))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		Estimate(body)
	}
}
