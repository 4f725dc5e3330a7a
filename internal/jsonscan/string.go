package jsonscan

import (
	"bytes"
	"encoding/binary"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Unquote decodes the JSON string literal q (quotes included) the way
// encoding/json does: invalid UTF-8 and unpaired surrogates become U+FFFD.
func Unquote(q []byte) (string, error) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return "", errAt(0, "not a string literal")
	}
	raw := q[1 : len(q)-1]
	// Fast path: no escapes and valid UTF-8 needs only a copy.
	simple := true
	for _, c := range raw {
		if c == '\\' || c == '"' || c < 0x20 || c >= utf8.RuneSelf {
			simple = false
			break
		}
	}
	if simple {
		return string(raw), nil
	}
	out, err := AppendUnquote(make([]byte, 0, len(raw)), q)
	if len(out) == 0 {
		return "", err
	}
	// out is this call's own buffer and nothing else refers to it: the
	// string can take it over instead of copying it.
	return unsafe.String(&out[0], len(out)), err
}

// AppendUnquote appends the decoded form of the JSON string literal q to dst.
// Runs between escapes are checked and copied in bulk.
func AppendUnquote(dst, q []byte) ([]byte, error) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return dst, errAt(0, "not a string literal")
	}
	raw := q[1 : len(q)-1]
	for i := 0; i < len(raw); {
		// The run up to the next escape.
		end := len(raw)
		if j := bytes.IndexByte(raw[i:], '\\'); j >= 0 {
			end = i + j
		}
		if run := raw[i:end]; plain(run) {
			dst = append(dst, run...)
		} else {
			var err error
			if dst, err = appendRun(dst, raw, i, end); err != nil {
				return dst, err
			}
		}
		i = end
		if i == len(raw) {
			break
		}
		if i+1 >= len(raw) {
			return dst, errAt(i+1, "truncated escape")
		}
		switch e := raw[i+1]; e {
		case '"', '\\', '/':
			dst = append(dst, e)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(raw, i+2)
			if !ok {
				return dst, errAt(i+1, "invalid \\u escape")
			}
			i += 6
			if utf16.IsSurrogate(r) {
				r2, ok2 := rune(-1), false
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r2, ok2 = hex4(raw, i+2)
				}
				if dec := utf16.DecodeRune(r, r2); ok2 && dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default:
			return dst, errAt(i+1, "invalid escape character")
		}
		i += 2
	}
	return dst, nil
}

// plain reports whether a run holds no quote or control character and is
// valid UTF-8, so it decodes to itself.
func plain(run []byte) bool {
	i := 0
	for ; i+8 <= len(run); i += 8 {
		if special(binary.LittleEndian.Uint64(run[i:])) != 0 {
			return false
		}
	}
	for ; i < len(run); i++ {
		if c := run[i]; c < 0x20 || c == '"' {
			return false
		}
	}
	return utf8.Valid(run)
}

// appendRun decodes raw[i:end], which holds no escape, byte by byte:
// invalid UTF-8 becomes U+FFFD, a quote or control character is an error.
func appendRun(dst, raw []byte, i, end int) ([]byte, error) {
	for i < end {
		c := raw[i]
		switch {
		case c < 0x20 || c == '"':
			return dst, errAt(i, "unescaped character in string")
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:end])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, "\uFFFD"...)
			} else {
				dst = append(dst, raw[i:i+size]...)
			}
			i += size
		}
	}
	return dst, nil
}

// Blank reports whether the JSON string literal q (quotes included)
// decodes to white space alone (unicode.IsSpace), or to nothing: the text
// the Messages API refuses as a message's only content. It reads q as
// written (plain or escaped white space), stops at the first other
// character and allocates nothing; what is not a literal is not blank.
func Blank(q []byte) bool {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return false
	}
	raw := q[1 : len(q)-1]
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == ' ':
			i++
		case c == '\\':
			if i+1 >= len(raw) {
				return false
			}
			switch raw[i+1] {
			case 'n', 't', 'r', 'f':
				i += 2
			case 'u':
				r, ok := hex4(raw, i+2)
				if !ok || utf16.IsSurrogate(r) || !unicode.IsSpace(r) {
					return false
				}
				i += 6
			default:
				return false
			}
		case c < utf8.RuneSelf:
			return false // raw control characters are not JSON
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if !unicode.IsSpace(r) {
				return false
			}
			i += n
		}
	}
	return true
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

const hexDigits = "0123456789abcdef"

// AppendQuote appends s to dst as a JSON string literal. It escapes only what
// JSON requires ('"', '\\' and control characters, using \n \r \t \b \f
// where they exist and \u00XX otherwise) and writes everything else,
// including '<', '>', '&' and non-ASCII text, as UTF-8. Invalid UTF-8 becomes
// U+FFFD. The output is a deterministic function of s, and the same bytes
// JavaScript's JSON.stringify writes (which is what Claude Code sends).
func AppendQuote(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\uFFFD"...)
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
