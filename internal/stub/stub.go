// Package stub renders the short texts ctxguard puts in front of the
// model where it removed something: numbers in them are formatted here,
// once, so every pass says sizes the same way. Everything is a pure
// function of its arguments (no times, no random ids), because a stub must
// come out byte-identical on every request.
package stub

import "strconv"

// Commas formats n with thousands separators: 12345 -> "12,345".
func Commas(n int) string {
	if n < 0 {
		return "-" + Commas(-n)
	}
	s := strconv.Itoa(n)
	if len(s) <= 3 {
		return s
	}
	b := make([]byte, 0, len(s)+len(s)/3)
	for i := 0; i < len(s); i++ {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	return string(b)
}

// Size formats a count compactly for stubs, which sit in every request:
// 812, 4.1K, 23K, 1.2M. Two significant digits are enough to say how
// much was there.
func Size(n int) string {
	switch {
	case n < 1000:
		return strconv.Itoa(n)
	case n < 10_000:
		return strconv.FormatFloat(float64(n/100)/10, 'f', -1, 64) + "K"
	case n < 1_000_000:
		return strconv.Itoa(n/1000) + "K"
	case n < 10_000_000:
		return strconv.FormatFloat(float64(n/100_000)/10, 'f', -1, 64) + "M"
	}
	return strconv.Itoa(n/1_000_000) + "M"
}

// RemovedReasoning is the text, as a JSON string literal, of the block
// that stands for an assistant message whose thinking (all it held) was
// removed. Every pass that empties such a message writes it, so that two
// passes removing the same message's thinking make the same edit.
const RemovedReasoning = `"[ctxguard removed earlier reasoning]"`
