package compress

import (
	"encoding/base64"
	"slices"
	"strings"
)

// b64Class marks the standard base64 alphabet (1) and, for data: URI
// payloads found in the wild, the URL-safe characters and padding (2).
var b64Class = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/':
			t[c] = 1
		case c == '-', c == '_', c == '=':
			t[c] = 2
		}
	}
	return t
}()

func isB64(c byte) bool { return b64Class[c] == 1 }

// isB64URL also accepts the URL-safe alphabet and padding.
func isB64URL(c byte) bool { return b64Class[c] != 0 }

// decodedSize returns the number of bytes n base64 characters (padding
// excluded) decode to.
func decodedSize(n int) int { return n * 3 / 4 }

// replaceBase64 replaces data: URIs with a base64 payload of at least
// minChars characters by a placeholder naming their media type and size;
// with bare, also runs of at least minChars base64 characters that decode
// to an image or PDF signature and are not part of a longer word. It
// returns s itself when nothing is replaced.
func replaceBase64(s string, minChars int, bare bool) string {
	type repl struct {
		start, end int
		marker     string
	}
	var rs []repl
	// ';' is rare, so this search is cheap; "data:" is looked for only in
	// texts that have a ";base64,".
	hasURI := strings.Contains(s, ";base64,")
	for i := 0; hasURI; {
		j := strings.Index(s[i:], "data:")
		if j < 0 {
			break
		}
		start := i + j
		i = start + 5
		end, media, payload, ok := dataURI(s, start)
		if !ok || payload < minChars {
			continue
		}
		if media == "" {
			media = "text/plain"
		}
		rs = append(rs, repl{start, end, base64Marker("data:"+media+";base64", decodedSize(payload))})
		i = end
	}
	if bare {
		// Look for bare runs in the gaps between the data: URIs only.
		uris := len(rs)
		gapStart := 0
		for k := 0; k <= uris; k++ {
			gapEnd := len(s)
			if k < uris {
				gapEnd = rs[k].start
			}
			gap := s[gapStart:gapEnd]
			sc := newBareScanner(gap, minChars)
			for i := 0; ; {
				start, end, media := sc.find(i)
				if start < 0 {
					break
				}
				i = end
				rs = append(rs, repl{gapStart + start, gapStart + end, base64Marker("base64 "+media, decodedSize(countB64(gap[start:end])))})
			}
			if k < uris {
				gapStart = rs[k].end
			}
		}
		if len(rs) > uris {
			slices.SortFunc(rs, func(a, b repl) int { return a.start - b.start })
		}
	}
	if len(rs) == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, r := range rs {
		b.WriteString(s[last:r.start])
		b.WriteString(r.marker)
		last = r.end
	}
	b.WriteString(s[last:])
	return b.String()
}

func countB64(s string) int {
	n := len(s)
	for n > 0 && s[n-1] == '=' {
		n--
	}
	return n
}

// dataURI parses a data: URI with a base64 payload starting at s[i]. It
// returns the end of the URI, the media type (without parameters) and the
// payload length without padding.
func dataURI(s string, i int) (end int, media string, payload int, ok bool) {
	j := i + 5
	k := j
	for k < len(s) && (isMediaChar(s[k])) {
		k++
	}
	media = s[j:k]
	// Parameters: ;name=value ... up to ;base64, within a bounded length
	// so that a text full of "data:;" is scanned in linear time.
	limit := min(len(s), k+128)
	for k < limit && s[k] == ';' {
		if strings.HasPrefix(s[k:], ";base64,") {
			p := k + len(";base64,")
			q := p
			for q < len(s) && isB64URL(s[q]) {
				q++
			}
			pad := q
			for pad > p && s[pad-1] == '=' {
				pad--
			}
			return q, media, pad - p, true
		}
		k++
		for k < limit && s[k] != ';' && s[k] != ',' && isParamChar(s[k]) {
			k++
		}
	}
	return 0, "", 0, false
}

func isMediaChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("!#$&^_.+-/", c) >= 0
}

func isParamChar(c byte) bool {
	return c > ' ' && c < 0x7f && c != '"' && c != '\'' && c != '(' && c != ')' && c != '<' && c != '>'
}

// Base64 prefixes of the file signatures bare detection knows, each with
// the index of a byte that is rare in tool output, which the search looks
// for. The media type is confirmed by decoding the run's first bytes.
var bareStarts = [...]struct {
	prefix string
	anchor int
}{{"iVBORw0KGgo", 1}, {"/9j/", 2}, {"R0lGOD", 3}, {"UklGR", 3}, {"JVBERi0", 1}}

// anchoredIndex returns the index of the first pat at or after s[from],
// or -1, searching for pat[k] and comparing around each hit.
func anchoredIndex(s string, from int, pat string, k int) int {
	for i := from + k; i < len(s); {
		j := strings.IndexByte(s[i:], pat[k])
		if j < 0 {
			return -1
		}
		i += j
		if st := i - k; st+len(pat) <= len(s) && s[st:st+len(pat)] == pat {
			return st
		}
		i++
	}
	return -1
}

// bareScanner finds base64 runs that start with a known signature. It
// remembers where each signature next occurs, so a whole scan is linear in
// the length of the text.
type bareScanner struct {
	s        string
	minChars int
	next     [len(bareStarts)]int // next occurrence at or after the search point; -1 none
}

func newBareScanner(s string, minChars int) *bareScanner {
	b := &bareScanner{s: s, minChars: minChars}
	for i := range b.next {
		b.next[i] = -2 // not searched yet
	}
	return b
}

// find returns the next run at or after s[from] that starts with a known
// signature, is not preceded by a base64 character (so it is not the
// middle of a longer word), holds at least minChars base64 characters and
// whose first bytes decode to that signature. start is -1 when there is
// none.
func (b *bareScanner) find(from int) (start, end int, media string) {
	s := b.s
	for from < len(s) {
		best := -1
		for k, m := range bareStarts {
			if b.next[k] == -1 {
				continue
			}
			if b.next[k] < from {
				if j := anchoredIndex(s, from, m.prefix, m.anchor); j >= 0 {
					b.next[k] = j
				} else {
					b.next[k] = -1
					continue
				}
			}
			if best < 0 || b.next[k] < best {
				best = b.next[k]
			}
		}
		if best < 0 {
			return -1, 0, ""
		}
		start, end = best, best
		for end < len(s) && isB64(s[end]) {
			end++
		}
		from = end + 1
		if start > 0 && (isB64(s[start-1]) || s[start-1] == '=') {
			continue // inside a longer run: skipped whole
		}
		for n := 0; end < len(s) && s[end] == '=' && n < 2; n++ {
			end++
		}
		if end-start < b.minChars {
			continue
		}
		if media = sniff(s[start:end]); media == "" {
			continue
		}
		return start, end, media
	}
	return -1, 0, ""
}

// sniff decodes the first bytes of a base64 run and names their format.
func sniff(run string) string {
	var head [12]byte
	n, _ := base64.StdEncoding.Decode(head[:], []byte(run[:16]))
	h := head[:n]
	switch {
	case strings.HasPrefix(string(h), "\x89PNG\r\n\x1a\n"):
		return "image/png"
	case strings.HasPrefix(string(h), "\xff\xd8\xff"):
		return "image/jpeg"
	case strings.HasPrefix(string(h), "GIF87a"), strings.HasPrefix(string(h), "GIF89a"):
		return "image/gif"
	case len(h) >= 12 && string(h[:4]) == "RIFF" && string(h[8:12]) == "WEBP":
		return "image/webp"
	case strings.HasPrefix(string(h), "%PDF-"):
		return "application/pdf"
	}
	return ""
}
