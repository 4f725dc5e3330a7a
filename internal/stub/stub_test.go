package stub

import "testing"

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		n            int
		commas, size string
	}{
		{0, "0", "0"}, {-1234, "-1,234", "-1234"}, {999, "999", "999"}, {1000, "1,000", "1K"}, {4080, "4,080", "4K"},
		{4150, "4,150", "4.1K"}, {23_999, "23,999", "23K"}, {1_234_567, "1,234,567", "1.2M"}, {12_000_000, "12,000,000", "12M"},
	} {
		if got := Commas(tc.n); got != tc.commas {
			t.Errorf("Commas(%d) = %q, want %q", tc.n, got, tc.commas)
		}
		if got := Size(tc.n); got != tc.size {
			t.Errorf("Size(%d) = %q, want %q", tc.n, got, tc.size)
		}
	}
}
