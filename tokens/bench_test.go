package tokens

import (
	"testing"
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
