package price

import "testing"

// TestBill: each part at its rate, the long-prompt rates above the
// threshold; Cost is Bill of cache writes and reads.
func TestBill(t *testing.T) {
	p := Price{Input: 3, CacheWrite: 3.75, CacheRead: 0.3,
		Long: &LongPrice{Above: 200_000, Input: 6, CacheWrite: 7.5, CacheRead: 0.6}}
	for _, tc := range []struct {
		in, w, r int
		want     float64
	}{
		{100_000, 0, 0, 0.3},
		{0, 100_000, 0, 0.375},
		{100_000, 50_000, 50_000, (100_000*3 + 50_000*3.75 + 50_000*0.3) / 1e6},
		{100_000, 50_000, 50_001, (100_000*6 + 50_000*7.5 + 50_001*0.6) / 1e6}, // over 200K: long rates
	} {
		if got := p.Bill(tc.in, tc.w, tc.r); got != tc.want {
			t.Errorf("Bill(%d, %d, %d) = %v, want %v", tc.in, tc.w, tc.r, got, tc.want)
		}
	}
	if got, want := p.Cost(250_000, 50_000), p.Bill(0, 200_000, 50_000); got != want {
		t.Errorf("Cost = %v, want Bill's %v", got, want)
	}
}
