package tokens

import (
	"testing"
	"time"
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

// TestEstimateSpeed holds Estimate to its budget: a 1 MB body in well
// under 0.3 ms. The best of several runs is taken, since the machine may
// be shared.
func TestEstimateSpeed(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("timing test")
	}
	body := sampleBody(t, 1<<20)
	best := time.Hour
	for range 5 {
		start := time.Now()
		for range 40 {
			Estimate(body)
		}
		best = min(best, time.Since(start)/40)
	}
	t.Logf("Estimate of 1 MB: %v", best)
	if best > 300*time.Microsecond {
		t.Errorf("Estimate of 1 MB took %v, budget 0.3 ms", best)
	}
}
