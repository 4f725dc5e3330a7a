package transcript

import (
	"unicode/utf8"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// appendCompact appends the valid JSON value v to dst with the whitespace
// between tokens removed. Everything else, key order, string escapes and
// number spellings included, is copied byte for byte.
func appendCompact(dst, v []byte) []byte {
	for i := 0; i < len(v); {
		c := v[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			i++
		case '"':
			j := i + 1
			for j < len(v) {
				if v[j] == '\\' {
					j += 2
					continue
				}
				if v[j] == '"' {
					break
				}
				j++
			}
			j = min(j+1, len(v))
			dst = append(dst, v[i:j]...)
			i = j
		default:
			j := i + 1
			for j < len(v) {
				switch v[j] {
				case ' ', '\t', '\n', '\r', '"':
					goto out
				}
				j++
			}
		out:
			dst = append(dst, v[i:j]...)
			i = j
		}
	}
	return dst
}

// compact returns a compact copy of the valid JSON value v.
func compact(v []byte) []byte { return appendCompact(make([]byte, 0, len(v)), v) }

const hexDigits = "0123456789abcdef"

// appendQuote appends s as a JSON string the way JavaScript's
// JSON.stringify writes it (which is what Claude Code sends): '"' and '\'
// escaped, \b \f \n \r \t for those controls, \u00xx (lower-case hex) for
// the other controls below 0x20, everything else, non-ASCII, '<', '>',
// '&', U+2028 and U+2029 included, written as is. Invalid UTF-8 becomes
// U+FFFD, since a JavaScript string cannot hold it.
func appendQuote(dst []byte, s string) []byte {
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
				i++
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
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func quote(s string) []byte { return appendQuote(nil, s) }

// member returns the value span of the top-level member key of the object
// raw (the last one, as encoding/json picks), or a zero span.
func member(raw []byte, key string) jsonscan.Span {
	s, err := jsonscan.Lookup(raw, jsonscan.Span{Start: 0, End: len(raw)}, key)
	if err != nil {
		return jsonscan.Span{}
	}
	return s
}

// str decodes the JSON string at s in raw, or returns "" if it is absent
// or not a string.
func str(raw []byte, s jsonscan.Span) string {
	if jsonscan.KindOf(raw, s) != jsonscan.String {
		return ""
	}
	v, err := jsonscan.Unquote(s.Bytes(raw))
	if err != nil {
		return ""
	}
	return v
}

// replaceSpan returns a copy of raw with span s replaced by repl.
func replaceSpan(raw []byte, s jsonscan.Span, repl []byte) []byte {
	out := make([]byte, 0, len(raw)-s.Len()+len(repl))
	out = append(out, raw[:s.Start]...)
	out = append(out, repl...)
	return append(out, raw[s.End:]...)
}

// withoutMember returns the compact object raw without its top-level
// members named key (and reports whether any was removed).
func withoutMember(raw []byte, key string) ([]byte, bool) {
	root := jsonscan.Span{Start: 0, End: len(raw)}
	it := jsonscan.Members(raw, root)
	out := []byte{'{'}
	removed := false
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		if jsonscan.KeyIs(raw, k, key) {
			removed = true
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, raw[k.Start:v.End]...)
	}
	if it.Err() != nil || !removed {
		return raw, false
	}
	return append(out, '}'), true
}

// appendMarked appends the compact block object raw with a cache_control
// marker added as its last member, as Claude Code adds it.
func appendMarked(dst, raw []byte) []byte {
	if len(raw) < 2 {
		return append(dst, raw...)
	}
	dst = append(dst, raw[:len(raw)-1]...)
	if raw[len(raw)-2] != '{' {
		dst = append(dst, ',')
	}
	return append(dst, `"cache_control":{"type":"ephemeral"}}`...)
}
