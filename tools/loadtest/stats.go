package loadtest

import (
	"math"
	"slices"
	"time"
)

// Summary describes a sample of durations, in milliseconds.
type Summary struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
}

// Percentile returns the p-th quantile (0 <= p <= 1) of sorted, which
// must be in ascending order, interpolating linearly between the two
// closest ranks (the "type 7" definition of R and NumPy's default): rank
// p*(n-1), so Percentile(s, 0) is the minimum and Percentile(s, 1) the
// maximum. It returns NaN for an empty sample; p outside [0, 1] is
// clamped.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	p = min(max(p, 0), 1)
	rank := p * float64(n-1)
	lo := int(math.Floor(rank))
	hi := min(lo+1, n-1)
	frac := rank - float64(lo)
	return sorted[lo] + (sorted[hi]-sorted[lo])*frac
}

// Summarize describes the durations in d (which it does not modify). An
// empty d gives a Summary with N 0 and every other field 0.
func Summarize(d []time.Duration) Summary {
	if len(d) == 0 {
		return Summary{}
	}
	ms := make([]float64, len(d))
	sum := 0.0
	for i, v := range d {
		ms[i] = float64(v) / float64(time.Millisecond)
		sum += ms[i]
	}
	slices.Sort(ms)
	return Summary{
		N:    len(ms),
		Mean: sum / float64(len(ms)),
		P50:  Percentile(ms, 0.50),
		P90:  Percentile(ms, 0.90),
		P99:  Percentile(ms, 0.99),
		Max:  ms[len(ms)-1],
	}
}

// Delta is what one target adds to another at the median and the 99th
// percentile, in milliseconds: the difference of the two percentiles
// (not the percentile of paired differences). Negative means faster.
type Delta struct {
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
}

// Sub returns what s adds over base, and false (with a zero Delta) when
// either sample is empty.
func Sub(s, base Summary) (Delta, bool) {
	if s.N == 0 || base.N == 0 {
		return Delta{}, false
	}
	return Delta{P50: s.P50 - base.P50, P99: s.P99 - base.P99}, true
}

// perRequest divides a CPU time over n requests; 0 when n is 0.
func perRequest(cpu time.Duration, n int) time.Duration {
	if n <= 0 {
		return 0
	}
	return cpu / time.Duration(n)
}

// FitLine fits y = intercept + slope*x by least squares. It returns false
// when there are fewer than two points or the x values span less than a
// tenth of their largest (cases of one body size in several protocols
// differ by a few bytes, which fixes no slope).
func FitLine(x, y []float64) (slope, intercept float64, ok bool) {
	n := len(x)
	if n < 2 || len(y) != n {
		return 0, 0, false
	}
	var sx, sy float64
	for i := range n {
		sx += x[i]
		sy += y[i]
	}
	mx, my := sx/float64(n), sy/float64(n)
	var sxx, sxy float64
	for i := range n {
		dx := x[i] - mx
		sxx += dx * dx
		sxy += dx * (y[i] - my)
	}
	lo, hi := slices.Min(x), slices.Max(x)
	if sxx == 0 || hi-lo < max(math.Abs(lo), math.Abs(hi))/10 {
		return 0, 0, false
	}
	slope = sxy / sxx
	return slope, my - slope*mx, true
}
