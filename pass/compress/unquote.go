package compress

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// unquote decodes the JSON string literal q (quotes included) exactly as
// jsonscan.Unquote does, several times faster on long texts: it copies the
// runs between escapes in bulk instead of byte by byte. q must be a
// literal the scanner accepted (so no raw control character or quote in
// it), as every span of a parsed Conversation is. A run that is not valid
// UTF-8 (which jsonscan.Unquote repairs rune by rune) or an escape it does
// not know makes it hand the whole literal to jsonscan.Unquote.
// FuzzUnquote checks the two agree.
//
// This belongs in package jsonscan; it is here until it moves there.
func unquote(q []byte) (string, error) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return jsonscan.Unquote(q)
	}
	raw := q[1 : len(q)-1]
	dst := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		j := bytes.IndexByte(raw[i:], '\\')
		run := raw[i:]
		if j >= 0 {
			run = raw[i : i+j]
		}
		if !utf8.Valid(run) {
			return jsonscan.Unquote(q)
		}
		dst = append(dst, run...)
		if j < 0 {
			break
		}
		i += j
		if i+1 >= len(raw) {
			return jsonscan.Unquote(q) // truncated escape: let it report
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
				return jsonscan.Unquote(q)
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
			return jsonscan.Unquote(q)
		}
		i += 2
	}
	return string(dst), nil
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
