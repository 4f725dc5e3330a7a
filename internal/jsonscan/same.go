package jsonscan

import "bytes"

// Text returns the text of the JSON string literal at s in b, for
// comparing it with a name: the bytes between the quotes, aliasing b, or
// a decoded copy when they hold an escape (rare in keys and type names),
// so a switch on it costs no allocation. It returns nil when s is not a
// string literal that decodes.
func Text(b []byte, s Span) []byte {
	if KindOf(b, s) != String || s.Len() < 2 {
		return nil
	}
	raw := b[s.Start+1 : s.End-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw
	}
	d, err := AppendUnquote(nil, b[s.Start:s.End])
	if err != nil {
		return nil
	}
	return d
}

// SameString reports whether the JSON string literals at x and y in b hold
// the same text, however each is escaped.
func SameString(b []byte, x, y Span) bool {
	bx, by := x.Bytes(b), y.Bytes(b)
	if bytes.Equal(bx, by) {
		return true
	}
	if bytes.IndexByte(bx, '\\') < 0 && bytes.IndexByte(by, '\\') < 0 {
		return false
	}
	sx, e1 := Unquote(bx)
	sy, e2 := Unquote(by)
	return e1 == nil && e2 == nil && sx == sy
}

// CommonPrefix returns the length of the longest common prefix of a and
// b: how far a session's next request repeats its last one.
func CommonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+4096 <= n && bytes.Equal(a[i:i+4096], b[i:i+4096]) {
		i += 4096
	}
	for i+64 <= n && bytes.Equal(a[i:i+64], b[i:i+64]) {
		i += 64
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}
