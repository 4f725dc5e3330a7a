package jsonscan

import (
	"encoding/binary"
	"math/bits"
)

// indexSpecialSWAR is indexSpecial in portable Go, 8 bytes at a time: the
// implementation where there is no assembly one (and the reference the
// assembly is tested against).
func indexSpecialSWAR(b []byte) int {
	i := 0
	for ; i+16 <= len(b); i += 16 {
		m0 := special(binary.LittleEndian.Uint64(b[i:]))
		m1 := special(binary.LittleEndian.Uint64(b[i+8:]))
		if m0 != 0 {
			return i + bits.TrailingZeros64(m0)>>3
		}
		if m1 != 0 {
			return i + 8 + bits.TrailingZeros64(m1)>>3
		}
	}
	return i
}
