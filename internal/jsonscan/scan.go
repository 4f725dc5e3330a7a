// Package jsonscan locates JSON values in a byte slice as byte spans without
// decoding them.
//
// It is the lowest layer of ctxguard's request path: protocol adapters use it
// to find messages and content blocks, and the splice layer rewrites only the
// spans a pass changed. The scanner is exactly as strict as encoding/json's
// Valid (it rejects what Valid rejects, including nesting deeper than 10000,
// and accepts invalid UTF-8 inside strings as Valid does), so a body it
// accepts is one the upstream's JSON parser accepts too.
//
// Functions in this package never retain or modify the slices they are given
// and allocate only when they return decoded strings. They are safe for
// concurrent use on the same input.
package jsonscan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Span is the half-open byte range [Start, End) of a JSON value or key in a
// body. A zero Span (Start == End) means absent.
type Span struct{ Start, End int }

// Len reports the number of bytes in s.
func (s Span) Len() int { return s.End - s.Start }

// IsZero reports whether s marks an absent value.
func (s Span) IsZero() bool { return s.Start == s.End }

// Bytes returns the bytes of s within b. The result aliases b.
func (s Span) Bytes(b []byte) []byte { return b[s.Start:s.End:s.End] }

// Contains reports whether o lies within s.
func (s Span) Contains(o Span) bool { return s.Start <= o.Start && o.End <= s.End }

// MaxDepth is the deepest nesting the scanner accepts, matching encoding/json.
const MaxDepth = 10000

// SyntaxError describes malformed JSON and where it was found.
type SyntaxError struct {
	Offset int    // byte offset of the offending byte
	Msg    string // what was wrong
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at offset %d: %s", e.Offset, e.Msg)
}

func errAt(off int, msg string) error { return &SyntaxError{Offset: off, Msg: msg} }

// ErrNotFound is returned by lookups when a key or element is absent.
var ErrNotFound = errors.New("jsonscan: not found")

// Kind is the type of a JSON value, taken from its first byte.
type Kind byte

const (
	Invalid Kind = iota
	Object
	Array
	String
	Number
	Bool
	Null
)

// KindOf reports the kind of the value that starts at b[s.Start].
func KindOf(b []byte, s Span) Kind {
	if s.Start >= s.End || s.Start >= len(b) {
		return Invalid
	}
	switch c := b[s.Start]; {
	case c == '{':
		return Object
	case c == '[':
		return Array
	case c == '"':
		return String
	case c == 't' || c == 'f':
		return Bool
	case c == 'n':
		return Null
	case c == '-' || (c >= '0' && c <= '9'):
		return Number
	}
	return Invalid
}

// SkipSpace returns the index of the first non-whitespace byte at or after i.
func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// Valid reports whether b is exactly one JSON value, optionally surrounded by
// whitespace. It agrees with encoding/json.Valid.
func Valid(b []byte) bool {
	_, err := Root(b)
	return err == nil
}

// Root validates that b holds exactly one JSON value surrounded only by
// whitespace and returns the span of that value.
func Root(b []byte) (Span, error) {
	v, err := Value(b, 0)
	if err != nil {
		return Span{}, err
	}
	if i := SkipSpace(b, v.End); i != len(b) {
		return Span{}, errAt(i, "data after top-level value")
	}
	return v, nil
}

// Value validates the JSON value that starts at the first non-space byte at
// or after i and returns its span.
func Value(b []byte, i int) (Span, error) { return ValueAt(b, i, 0) }

// ValueAt is Value for a value nested depth levels deep in its document, so
// the depth limit applies to the document as a whole.
func ValueAt(b []byte, i, depth int) (Span, error) {
	i = SkipSpace(b, i)
	if i >= len(b) {
		return Span{}, errAt(i, "unexpected end of input")
	}
	start := i
	switch c := b[i]; c {
	case '"':
		end, err := skipString(b, i)
		return Span{start, end}, err
	case '{', '[':
		end, err := skipContainer(b, i, depth)
		return Span{start, end}, err
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			end, err := skipNumber(b, i)
			return Span{start, end}, err
		}
		return Span{}, errAt(i, fmt.Sprintf("invalid character %q looking for beginning of value", c))
	}
}

func literal(b []byte, i int, lit string) (Span, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		// Report the first differing byte, as encoding/json does.
		for k := 0; k < len(lit); k++ {
			if i+k >= len(b) {
				return Span{}, errAt(i+k, "unexpected end of input in literal")
			}
			if b[i+k] != lit[k] {
				return Span{}, errAt(i+k, "invalid character in literal "+lit)
			}
		}
	}
	return Span{i, i + len(lit)}, nil
}

func skipNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
		if i >= len(b) {
			return i, errAt(i, "unexpected end of input in number")
		}
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i++
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return i, errAt(i, "invalid character in numeric literal")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, errAt(i, "expected digit after decimal point")
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, errAt(i, "expected digit in exponent")
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	return i, nil
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special flags the bytes of w that are '"', '\\' or a control character
// below 0x20 with the high bit of their byte. The lowest flagged byte is
// exactly the first such byte (bytes with the high bit set never match);
// above it flags may be spurious, as a borrow runs on from a match. So
// special(w) == 0 iff w holds no such byte, and TrailingZeros64 finds the
// first one.
func special(w uint64) uint64 {
	q := w ^ (lsb * '"')
	s := w ^ (lsb * '\\')
	// x - 1 &^ x has its high bit set iff x == 0, and x - 0x20 &^ x iff
	// x < 0x20, per byte as long as no borrow comes from the byte below.
	return ((q-lsb)&^q | (s-lsb)&^s | (w-lsb*0x20)&^w) & msb
}

// skipString returns the index just past the closing quote of the string
// whose opening quote is at b[i]. Most runs between escapes are short and
// are skipped 16 bytes at a time inline; a longer run goes to
// indexSpecial, which takes the bytes in bulk.
func skipString(b []byte, i int) (int, error) {
	i++
	for {
		if i+16 <= len(b) {
			m0 := special(binary.LittleEndian.Uint64(b[i:]))
			m1 := special(binary.LittleEndian.Uint64(b[i+8:]))
			if m0 != 0 {
				i += bits.TrailingZeros64(m0) >> 3
				goto found
			}
			if m1 != 0 {
				i += 8 + bits.TrailingZeros64(m1)>>3
				goto found
			}
			i += 16
			blocks := (len(b) - i) &^ 15
			j := indexSpecial(b[i:])
			i += j
			if j < blocks {
				goto found
			}
		}
		for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
			i++
		}
		if i >= len(b) {
			return i, errAt(i, "unexpected end of input in string")
		}
	found:
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 < len(b) && escapes[b[i+1]] {
				i += 2
				continue
			}
			var err error
			if i, err = skipEscape(b, i); err != nil {
				return i, err
			}
		default: // c < 0x20
			return i, errAt(i, "control character in string")
		}
	}
}

// escapes marks the letters of the one-letter escapes: \" \\ \/ \b \f \n \r \t.
var escapes = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// skipEscape returns the index just past the escape whose backslash is at
// b[i].
func skipEscape(b []byte, i int) (int, error) {
	if i+1 >= len(b) {
		return i + 1, errAt(i+1, "unexpected end of input in string escape")
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, nil
	case 'u':
		for k := 2; k < 6; k++ {
			if i+k >= len(b) {
				return i + k, errAt(i+k, "unexpected end of input in \\u escape")
			}
			if !isHex(b[i+k]) {
				return i + k, errAt(i+k, "invalid character in \\u escape")
			}
		}
		return i + 6, nil
	}
	return i + 1, errAt(i+1, "invalid escape character")
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// skipContainer validates the object or array that opens at b[i] and returns
// the index just past its closing bracket. It is iterative, with an explicit
// stack, so hostile nesting cannot exhaust the goroutine stack.
func skipContainer(b []byte, i, outer int) (int, error) {
	// stack holds one bit per open container: 1 for object, 0 for array.
	var stack []uint64
	depth := 0
	push := func(obj bool) {
		w, bit := depth>>6, uint(depth&63)
		if w == len(stack) {
			stack = append(stack, 0)
		}
		if obj {
			stack[w] |= 1 << bit
		} else {
			stack[w] &^= 1 << bit
		}
		depth++
	}
	top := func() bool { d := depth - 1; return stack[d>>6]&(1<<uint(d&63)) != 0 }

	var err error
	// open handles the byte at b[i], which is '{' or '['; it returns the
	// index after any immediately closed empty container handling is left
	// to the main loop.
	for {
		// Here b[i] is '{' or '['.
		if outer+depth >= MaxDepth {
			return i, errAt(i, "exceeded max depth")
		}
		obj := b[i] == '{'
		push(obj)
		i = SkipSpace(b, i+1)
		if i >= len(b) {
			return i, errAt(i, "unexpected end of input")
		}
		if (obj && b[i] == '}') || (!obj && b[i] == ']') {
			i++
			depth--
			goto afterValue
		}
	value:
		// Expect a value (arrays) or key:value (objects) at b[i].
		if top() {
			if b[i] != '"' {
				return i, errAt(i, "expected string for object key")
			}
			if i, err = skipString(b, i); err != nil {
				return i, err
			}
			i = SkipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, errAt(i, "expected ':' after object key")
			}
			i = SkipSpace(b, i+1)
			if i >= len(b) {
				return i, errAt(i, "unexpected end of input")
			}
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			continue
		default:
			var v Span
			if v, err = ValueAt(b, i, outer+depth); err != nil {
				return v.End, err
			}
			i = v.End
		}
	afterValue:
		for {
			if depth == 0 {
				return i, nil
			}
			i = SkipSpace(b, i)
			if i >= len(b) {
				return i, errAt(i, "unexpected end of input")
			}
			obj := top()
			switch c := b[i]; {
			case c == ',':
				i = SkipSpace(b, i+1)
				if i >= len(b) {
					return i, errAt(i, "unexpected end of input")
				}
				goto value
			case (obj && c == '}') || (!obj && c == ']'):
				i++
				depth--
			default:
				if obj {
					return i, errAt(i, "expected ',' or '}' after object value")
				}
				return i, errAt(i, "expected ',' or ']' after array element")
			}
		}
	}
}
