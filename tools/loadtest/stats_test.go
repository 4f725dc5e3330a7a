package loadtest

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var approx = cmpopts.EquateApprox(0, 1e-9)

func TestPercentile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{"one value", []float64{7}, 0.5, 7},
		{"one value p99", []float64{7}, 0.99, 7},
		{"min", []float64{1, 2, 3, 4}, 0, 1},
		{"max", []float64{1, 2, 3, 4}, 1, 4},
		{"median odd", []float64{1, 2, 3}, 0.5, 2},
		{"median even interpolates", []float64{1, 2, 3, 4}, 0.5, 2.5},
		{"p90 of 1..11", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 0.9, 10},
		{"p99 of 0..100", seq(0, 100), 0.99, 99},
		{"p99 of 1..10 interpolates", seq(1, 10), 0.99, 9.91},
		{"p25 between ranks", []float64{0, 10}, 0.25, 2.5},
		{"below 0 clamps", []float64{1, 2}, -1, 1},
		{"above 1 clamps", []float64{1, 2}, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Percentile(tc.sorted, tc.p), approx); diff != "" {
				t.Errorf("Percentile(%v, %v) (-want +got):\n%s", tc.sorted, tc.p, diff)
			}
		})
	}
	if got := Percentile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("Percentile(nil) = %v, want NaN", got)
	}
}

func seq(from, to int) []float64 {
	var out []float64
	for i := from; i <= to; i++ {
		out = append(out, float64(i))
	}
	return out
}

func TestSummarize(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want Summary
	}{
		{"empty", nil, Summary{}},
		{"one", []time.Duration{2 * ms}, Summary{N: 1, Mean: 2, P50: 2, P90: 2, P99: 2, Max: 2}},
		{"unsorted input", []time.Duration{4 * ms, 1 * ms, 3 * ms, 2 * ms},
			Summary{N: 4, Mean: 2.5, P50: 2.5, P90: 3.7, P99: 3.97, Max: 4}},
		{"sub-millisecond", []time.Duration{250 * time.Microsecond, 750 * time.Microsecond},
			Summary{N: 2, Mean: 0.5, P50: 0.5, P90: 0.7, P99: 0.745, Max: 0.75}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]time.Duration(nil), tc.in...)
			if diff := cmp.Diff(tc.want, Summarize(in), approx); diff != "" {
				t.Errorf("Summarize (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.in, in); diff != "" {
				t.Errorf("Summarize modified its input:\n%s", diff)
			}
		})
	}
}

func TestSub(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s, b   Summary
		want   Delta
		wantOK bool
	}{
		{"slower", Summary{N: 3, P50: 4, P99: 9}, Summary{N: 3, P50: 1.5, P99: 2}, Delta{P50: 2.5, P99: 7}, true},
		{"faster is negative", Summary{N: 1, P50: 1, P99: 1}, Summary{N: 1, P50: 2, P99: 3}, Delta{P50: -1, P99: -2}, true},
		{"empty sample", Summary{N: 0}, Summary{N: 2, P50: 1, P99: 1}, Delta{}, false},
		{"empty base", Summary{N: 2, P50: 1, P99: 1}, Summary{}, Delta{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Sub(tc.s, tc.b)
			if diff := cmp.Diff(tc.want, got, approx); diff != "" || ok != tc.wantOK {
				t.Errorf("Sub = %v, %v; want %v, %v\n%s", got, ok, tc.want, tc.wantOK, diff)
			}
		})
	}
}

func TestFitLine(t *testing.T) {
	type fit struct {
		Slope, Intercept float64
		OK               bool
	}
	for _, tc := range []struct {
		name string
		x, y []float64
		want fit
	}{
		{"exact line", []float64{0, 1, 2, 3}, []float64{5, 8, 11, 14}, fit{3, 5, true}},
		{"two points", []float64{1, 3}, []float64{2, 2}, fit{0, 2, true}},
		{"noisy", []float64{0, 1, 2}, []float64{0, 2, 1}, fit{0.5, 0.5, true}},
		{"one point", []float64{1}, []float64{1}, fit{}},
		{"same x", []float64{2, 2, 2}, []float64{1, 2, 3}, fit{}},
		{"nearly the same x", []float64{1 << 20, 1<<20 - 100, 1 << 20}, []float64{1, 2, 3}, fit{}},
		{"length mismatch", []float64{1, 2}, []float64{1}, fit{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got fit
			got.Slope, got.Intercept, got.OK = FitLine(tc.x, tc.y)
			if diff := cmp.Diff(tc.want, got, approx); diff != "" {
				t.Errorf("FitLine (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPerRequest(t *testing.T) {
	if got := perRequest(30*time.Millisecond, 4); got != 7500*time.Microsecond {
		t.Errorf("perRequest = %v", got)
	}
	if got := perRequest(time.Second, 0); got != 0 {
		t.Errorf("perRequest(_, 0) = %v, want 0", got)
	}
}
