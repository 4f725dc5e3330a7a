package jsonscan

import (
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{`"type"`, "type", true},
		{`"\u0074ype"`, "type", true},
		{`""`, "", true},
		{`"bad \x"`, "", false},
		{`12`, "", false},
		{`null`, "", false},
	} {
		b := []byte(tc.in)
		got := Text(b, Span{Start: 0, End: len(b)})
		if (got != nil) != tc.ok || string(got) != tc.want {
			t.Errorf("Text(%s) = %q (nil %v), want %q ok %v", tc.in, got, got == nil, tc.want, tc.ok)
		}
	}
}

func TestSameString(t *testing.T) {
	b := []byte(`["call_1","call_\u0031","call_2","call_\u0032x"]`)
	sp := func(i int) Span {
		it := Elements(b, Span{0, len(b)})
		var v Span
		for k := 0; k <= i; k++ {
			v, _ = it.NextElement()
		}
		return v
	}
	for _, tc := range []struct {
		x, y int
		want bool
	}{{0, 0, true}, {0, 1, true}, {1, 0, true}, {0, 2, false}, {2, 3, false}} {
		if got := SameString(b, sp(tc.x), sp(tc.y)); got != tc.want {
			t.Errorf("SameString(%d, %d) = %v", tc.x, tc.y, got)
		}
	}
}

func TestCommonPrefix(t *testing.T) {
	long := strings.Repeat("x", 10000)
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "abd", 2}, {"abc", "ab", 2}, {long, long + "y", 10000},
		{long[:5000] + "a" + long, long[:5000] + "b", 5000}, {long[:64] + "z", long[:65], 64},
	} {
		if got := CommonPrefix([]byte(tc.a), []byte(tc.b)); got != tc.want {
			t.Errorf("CommonPrefix(len %d, len %d) = %d, want %d", len(tc.a), len(tc.b), got, tc.want)
		}
	}
}
