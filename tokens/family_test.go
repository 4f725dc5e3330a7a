package tokens

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestFamilyFactorDeterministic: a model with too few observations of its
// own takes the factor of its family's pooled observations, and that
// factor is the same float, to the last bit, however the Calibration
// holds its models (a map, whose iteration order differs from one
// instance to the next), so reports that print it are reproducible.
func TestFamilyFactorDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type obs struct {
		model     string
		est, real int
	}
	var all []obs
	for m := range 12 {
		for range 40 {
			est := 300 + rng.IntN(20_000)
			ratio := 0.6 + rng.Float64()
			if rng.IntN(5) == 0 {
				ratio *= 1.8 // a heavy tail, which the fit weighs down
			}
			all = append(all, obs{fmt.Sprintf("gpt-5.%d-codex", m), est, int(float64(est) * ratio)})
		}
	}
	var want float64
	for i := range 50 {
		c := NewCalibrationHalfLife(0)
		for _, o := range all {
			c.ObserveGrowth(o.model, o.est, o.real)
		}
		f, basis := c.FactorBasis("gpt-5-mini")
		if basis != "family" {
			t.Fatalf("basis %q, want family", basis)
		}
		if i == 0 {
			want = f
		} else if f != want {
			t.Fatalf("instance %d: family factor %v, instance 0: %v", i, f, want)
		}
	}
}
