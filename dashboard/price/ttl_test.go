package price

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestExtended: the 1-hour write is twice the input price where writes
// carry a premium (by hand: Sonnet 4.5 $3 → $6, its long rate $6 → $12),
// and unchanged without one (OpenAI: $1.75 stays $1.75).
func TestExtended(t *testing.T) {
	sonnet := Price{Input: 3, CacheWrite: 3.75, CacheRead: 0.3,
		Long: &LongPrice{Above: 200_000, Input: 6, CacheWrite: 7.5, CacheRead: 0.6}}
	codex := Price{Input: 1.75, CacheWrite: 1.75, CacheRead: 0.175}
	for _, tc := range []struct {
		name      string
		in, want  Price
		wantLongW float64
	}{
		{"anthropic", sonnet, Price{Input: 3, CacheWrite: 6, CacheRead: 0.3,
			Long: &LongPrice{Above: 200_000, Input: 6, CacheWrite: 12, CacheRead: 0.6}}, 7.5},
		{"openai", codex, codex, 0},
	} {
		if d := cmp.Diff(tc.want, tc.in.Extended()); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
		if tc.in.Long != nil && tc.in.Long.CacheWrite != tc.wantLongW {
			t.Errorf("%s: Extended changed the receiver's long rates", tc.name)
		}
	}
}
