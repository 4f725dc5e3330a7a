package transcript

import (
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

func quote(s string) []byte { return jsonscan.AppendQuote(nil, s) }

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

// isTrue reports whether the value at s in raw is the literal true.
func isTrue(raw []byte, s jsonscan.Span) bool {
	return jsonscan.KindOf(raw, s) == jsonscan.Bool && raw[s.Start] == 't'
}
