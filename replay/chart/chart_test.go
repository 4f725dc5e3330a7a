package chart

import (
	"bytes"
	"testing"
)

func TestNiceStep(t *testing.T) {
	for _, tc := range []struct {
		span float64
		n    int
		want float64
	}{{162_000, 5, 50_000}, {100_000, 5, 20_000}, {320, 8, 50}, {11, 8, 2}, {3, 8, 0.5}, {0, 5, 1}} {
		if got := niceStep(tc.span, tc.n); got != tc.want {
			t.Errorf("niceStep(%v, %d) = %v, want %v", tc.span, tc.n, got, tc.want)
		}
	}
	for v, want := range map[float64]string{0: "0", 500: "500", 5000: "5K", 2500: "2.5K", 1_500_000: "1.5M"} {
		if got := axisLabel(v); got != want {
			t.Errorf("axisLabel(%v) = %q, want %q", v, got, want)
		}
	}
}

// Text is escaped wherever it comes from.
func TestEscapes(t *testing.T) {
	b := SessionSVG(&Session{Name: `<img src=x onerror=alert(1)>`, Model: `"&'`, Requests: []Request{{Orig: 2, Sent: 1}}}, Light)
	if bytes.Contains(b, []byte("<img")) || !bytes.Contains(b, []byte("&lt;img src=x onerror=alert(1)&gt;")) {
		t.Errorf("name not escaped:\n%s", b)
	}
}
