package jsonscan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// firstSpecial is special's contract, byte by byte: the lane of the first
// '"', '\\' or control byte of w, or 8.
func firstSpecial(w uint64) int {
	for lane := range 8 {
		if c := byte(w >> (8 * lane)); c == '"' || c == '\\' || c < 0x20 {
			return lane
		}
	}
	return 8
}

func TestSpecialMask(t *testing.T) {
	check := func(w uint64) {
		t.Helper()
		if got, want := bits.TrailingZeros64(special(w))>>3, firstSpecial(w); got != want {
			t.Fatalf("special(%#016x) = %#x: first flagged lane %d, want %d", w, special(w), got, want)
		}
	}
	// Every pair of byte values in every pair of lanes, the other lanes
	// plain or all 0xff: borrows and carries between lanes must never
	// flag a byte before the first real match.
	for _, fill := range []byte{'a', 0xff, 0x20} {
		for x := range 256 {
			for y := range 256 {
				for lx := range 8 {
					for ly := lx + 1; ly < 8; ly += 3 {
						var w [8]byte
						for i := range w {
							w[i] = fill
						}
						w[lx], w[ly] = byte(x), byte(y)
						check(binary.LittleEndian.Uint64(w[:]))
					}
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		check(r.Uint64())
	}
}

// skipStringSimple is the reference for skipString: one byte at a time
// (escapes are skipEscape's, which both share).
func skipStringSimple(b []byte, i int) (int, error) {
	i++
	for {
		if i >= len(b) {
			return i, errAt(i, "unexpected end of input in string")
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			var err error
			if i, err = skipEscape(b, i); err != nil {
				return i, err
			}
		case c < 0x20:
			return i, errAt(i, "control character in string")
		default:
			i++
		}
	}
}

// checkSkipString asserts skipString and skipStringSimple agree on the
// string opening at b[0]: same end, same error (offset and message).
func checkSkipString(t *testing.T, b []byte) {
	t.Helper()
	got, gerr := skipString(b, 0)
	want, werr := skipStringSimple(b, 0)
	var gs, ws *SyntaxError
	errors.As(gerr, &gs)
	errors.As(werr, &ws)
	if got != want || (gs == nil) != (ws == nil) || (gs != nil && *gs != *ws) {
		t.Fatalf("skipString(%q) = %d, %v; simple scanner: %d, %v", b, got, gerr, want, werr)
	}
}

// stringAlphabet is what random literals are made of: plain ASCII, the
// bytes the scanner stops at, escapes' letters and hex digits, UTF-8
// (valid and not) and the bytes around the SWAR thresholds.
var stringAlphabet = []byte("aZ0 \"\\\\\\/bnu\x00\x01\x1f\x20\x21\x7f\x80\xbf\xc3\xa9\xe4\xb8\xad\xff\xfe\x5c\x22\x5b\x5d")

// TestSkipStringDifferential compares the bulk string scanner with the
// simple one on random literals of every length up to 160 bytes, so runs,
// escapes and the closing quote land at every offset of a word.
func TestSkipStringDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, 0, 176)
	for n := range 160 {
		for range 1500 {
			b = append(b[:0], '"')
			plainRun := r.IntN(2) == 0 // mostly plain text, as real strings are
			for range n {
				if plainRun && r.IntN(16) != 0 {
					b = append(b, 'a'+byte(r.IntN(26)))
				} else {
					b = append(b, stringAlphabet[r.IntN(len(stringAlphabet))])
				}
			}
			checkSkipString(t, b)
			checkSkipString(t, append(b, '"'))
		}
	}
}

func FuzzSkipString(f *testing.F) {
	f.Add([]byte(`"plain text long enough for two words \n and \u00e9 and \ud83d\ude00"`))
	f.Add([]byte("\"0123456789abcdef\x1f\""))
	f.Add([]byte("\"0123456\\u12\""))
	f.Add([]byte("\"\xff\xfe\x80 invalid utf-8 is accepted inside strings\""))
	f.Fuzz(func(t *testing.T, b []byte) {
		b = append([]byte{'"'}, b...)
		checkSkipString(t, b)
	})
}

// indexSpecialSimple is indexSpecial's contract, byte by byte.
func indexSpecialSimple(b []byte) int {
	n := len(b) &^ 15
	for i, c := range b[:n] {
		if c == '"' || c == '\\' || c < 0x20 {
			return i
		}
	}
	return n
}

// TestIndexSpecial: the bulk scanner (assembly where there is one) and
// the portable one agree with the simple one for every byte value at
// every offset of inputs of every length up to 80, on a plain or a
// high-bit background, and on random inputs.
func TestIndexSpecial(t *testing.T) {
	check := func(b []byte) {
		t.Helper()
		want := indexSpecialSimple(b)
		if got := indexSpecial(b); got != want {
			t.Fatalf("indexSpecial(%q) = %d, want %d", b, got, want)
		}
		if got := indexSpecialSWAR(b); got != want {
			t.Fatalf("indexSpecialSWAR(%q) = %d, want %d", b, got, want)
		}
	}
	buf := make([]byte, 96)
	for _, fill := range []byte{'a', 0xff} {
		for n := range 81 {
			b := buf[:n]
			for i := range b {
				b[i] = fill
			}
			check(b)
			for pos := range n {
				for c := range 256 {
					b[pos] = byte(c)
					check(b)
				}
				b[pos] = fill
			}
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		b := buf[:r.IntN(len(buf))]
		for i := range b {
			b[i] = stringAlphabet[r.IntN(len(stringAlphabet))]
			if r.IntN(4) != 0 {
				b[i] = 'a'
			}
		}
		check(b[r.IntN(len(b)+1):]) // any alignment
	}
}

func FuzzIndexSpecial(f *testing.F) {
	f.Add([]byte("0123456789abcdef0123456789abcdef\"0123456789abcdef"))
	f.Add([]byte("0123456789abcdef\x7f\x80\xff\x1f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		want := indexSpecialSimple(b)
		if got := indexSpecial(b); got != want {
			t.Fatalf("indexSpecial(%q) = %d, want %d", b, got, want)
		}
		if got := indexSpecialSWAR(b); got != want {
			t.Fatalf("indexSpecialSWAR(%q) = %d, want %d", b, got, want)
		}
	})
}

// BenchmarkSkipString: one 1 MB string literal whose runs between
// escapes are gap bytes long (real tool output: median 5, 90th
// percentile 38, most bytes in runs over 32), so both the per-escape
// cost and the bulk rate show.
func BenchmarkSkipString(b *testing.B) {
	for _, gap := range []int{8, 40, 200, 4096} {
		line := append(bytes.Repeat([]byte("a"), gap), `\n`...)
		lit := append([]byte{'"'}, bytes.Repeat(line, (1<<20)/len(line))...)
		lit = append(lit, '"')
		b.Run(fmt.Sprintf("gap%d", gap), func(b *testing.B) {
			b.SetBytes(int64(len(lit)))
			b.ReportAllocs()
			for b.Loop() {
				if end, err := skipString(lit, 0); err != nil || end != len(lit) {
					b.Fatalf("skipString = %d, %v; want %d", end, err, len(lit))
				}
			}
		})
	}
}
