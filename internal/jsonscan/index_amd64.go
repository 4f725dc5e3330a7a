//go:build !purego

package jsonscan

// indexSpecial returns the index of the first '"', '\\' or control byte
// below 0x20 in the whole 16-byte blocks of b, or, when they hold none,
// the length of those blocks (len(b) &^ 15). The bytes after them are the
// caller's to scan.
//
//go:noescape
func indexSpecial(b []byte) int
