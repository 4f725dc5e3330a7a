package tap

import (
	"strconv"
	"strings"
	"testing"
)

// counted is a toy protocol: a "n" event's data is a number added to the
// usage; a JSON answer's usage is a number.
var counted = Usage[int]{
	Want: func(name []byte) bool { return string(name) == "n" },
	Event: func(_, data []byte, u *int) bool {
		n, err := strconv.Atoi(string(data))
		if err != nil {
			return false
		}
		*u += n
		return true
	},
	MaxEvent: 16,
	JSON: func(val []byte) (int, bool) {
		n, err := strconv.Atoi(string(val))
		return n, err == nil
	},
}

func TestUsageTap(t *testing.T) {
	for _, tc := range []struct {
		name, ct, body string
		want           int
		found          bool
	}{
		{"events add up", "text/event-stream", "event: n\ndata: 2\n\nevent: n\ndata: 3\n\n", 5, true},
		{"unwanted events are not read", "text/event-stream", "event: x\ndata: 7\n\nevent: n\ndata: 1\n\n", 1, true},
		{"an event over MaxEvent is skipped", "text/event-stream", "event: n\ndata: 1" + strings.Repeat("0", 20) + "\n\nevent: n\ndata: 4\n\n", 4, true},
		{"an event it cannot read", "text/event-stream", "event: n\ndata: x\n\n", 0, false},
		{"json", "application/json; charset=utf-8", `{"a":1,"usage":42}`, 42, true},
		{"json: the last usage wins", "application/problem+json", `{"usage":1,"usage":2}`, 2, true},
		{"json: a usage it cannot read drops what was read", "application/json", `{"usage":1,"usage":"x"}`, 0, false},
		{"json: a usage over MaxUsage", "application/json", `{"usage":1` + strings.Repeat("0", MaxUsage) + `}`, 0, false},
		{"another type is not read", "text/plain", `{"usage":1}`, 0, false},
	} {
		for _, piece := range []int{1, 3, 0} {
			var tp UsageTap[int]
			Setup(&tp, tc.ct, &counted)
			b := []byte(tc.body)
			for len(b) > 0 {
				k := len(b)
				if piece > 0 {
					k = min(piece, k)
				}
				if n, err := tp.Write(b[:k]); n != k || err != nil {
					t.Fatalf("%s: Write = %d, %v", tc.name, n, err)
				}
				b = b[k:]
			}
			if u, ok := tp.Usage(); u != tc.want || ok != tc.found {
				t.Errorf("%s (pieces of %d): usage %d, %v; want %d, %v", tc.name, piece, u, ok, tc.want, tc.found)
			}
		}
	}
}

func TestUsageTapReset(t *testing.T) {
	var tp UsageTap[int]
	Setup(&tp, "text/event-stream", &counted)
	tp.Write([]byte("event: n\ndata: 5\n\nevent: n\ndata: 6")) // the second event is cut off
	tp.Reset("application/json")
	if u, ok := tp.Usage(); u != 0 || ok {
		t.Fatalf("after Reset: %d, %v", u, ok)
	}
	tp.Write([]byte(`{"usage":9}`))
	if u, ok := tp.Usage(); u != 9 || !ok {
		t.Errorf("a JSON answer after an SSE one: %d, %v; want 9, true", u, ok)
	}
}
