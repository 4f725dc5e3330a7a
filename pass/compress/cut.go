package compress

import (
	"github.com/ctxguard/ctxguard/internal/stub"

	"strings"
	"unicode/utf8"
)

// runeOffset returns the byte offset in s after its first n runes.
func runeOffset(s string, n int) int {
	i := 0
	for ; n > 0 && i < len(s); n-- {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return i
}

// runeOffsetFromEnd returns the byte offset in s where its last n runes
// begin.
func runeOffsetFromEnd(s string, n int) int {
	i := len(s)
	for ; n > 0 && i > 0; n-- {
		if s[i-1] < utf8.RuneSelf {
			i--
			continue
		}
		_, size := utf8.DecodeLastRuneInString(s[:i])
		i -= size
	}
	return i
}

// snapWindow bounds how far a cut moves to land on a line boundary.
func snapWindow(kept int) int { return min(kept/4, 2000) }

// headTail keeps at most keep characters of s (n characters long, n >
// keep), marker included: the first share·budget characters and up to
// maxTail (if >= 0) of the rest from the end, cut at line boundaries when
// one is near. marker builds the marker from the characters cut and the
// first and last line they touch. It returns s when keep is too small to
// hold the marker.
func headTail(s string, n, keep int, share float64, maxTail int, marker func(cut, first, last int) string) string {
	lines := strings.Count(s, "\n") + 1
	// The longest marker this cut can need: "line L" may become "lines F-L"
	// with F <= L. Two newlines go around it.
	reserve := utf8.RuneCountInString(marker(n, lines, lines)) + 2 + len(stub.Commas(lines)) + 2
	budget := keep - reserve
	if budget <= 0 {
		return s
	}
	headN := int(float64(budget) * share)
	tailN := budget - headN
	if maxTail >= 0 && tailN > maxTail {
		tailN = maxTail
	}
	hb := runeOffset(s, headN)
	tb := runeOffsetFromEnd(s, tailN)
	if hb > 0 {
		if i := strings.LastIndexByte(s[:hb], '\n'); i >= 0 && hb-(i+1) <= snapWindow(hb) {
			hb = i + 1
		}
	}
	if tb < len(s) && tb > 0 && s[tb-1] != '\n' {
		if i := strings.IndexByte(s[tb:], '\n'); i >= 0 && i < snapWindow(len(s)-tb) {
			tb += i + 1
		}
	}
	if hb >= tb {
		return s
	}
	cut := s[hb:tb]
	first := strings.Count(s[:hb], "\n") + 1
	last := first + strings.Count(cut[:len(cut)-1], "\n")
	m := marker(utf8.RuneCountInString(cut), first, last)
	var b strings.Builder
	b.Grow(hb + len(m) + 2 + len(s) - tb)
	b.WriteString(s[:hb])
	if hb > 0 && s[hb-1] != '\n' {
		b.WriteByte('\n')
	}
	b.WriteString(m)
	if tb < len(s) {
		b.WriteByte('\n')
		b.WriteString(s[tb:])
	}
	if b.Len() >= len(s) {
		return s
	}
	return b.String()
}

// capChars keeps at most max characters of s, marker included: head and
// tail in the ratio headRatio. It returns s itself when s fits.
func capChars(s string, max int, headRatio float64, tool string) string {
	if len(s) <= max {
		return s
	}
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s
	}
	limit := "cap " + stub.Commas(max) + " chars" + forTool(tool)
	return headTail(s, n, max, headRatio, -1, func(cut, first, last int) string {
		return cutMarker(cut, first, last, limit)
	})
}

// isSnapshot reports whether s is a browser page snapshot: an
// accessibility tree with [ref=...] markers that either says it is a page
// snapshot or has at least 20 of them.
func isSnapshot(s string) bool {
	if !strings.Contains(s, "[ref=") {
		return false
	}
	if strings.Contains(s, "Page Snapshot") || strings.Contains(s, "page snapshot") {
		return true
	}
	n := 0
	for i := 0; n < 20; n++ {
		j := strings.Index(s[i:], "[ref=")
		if j < 0 {
			return false
		}
		i += j + 5
	}
	return true
}

// cutSnapshot shortens a snapshot longer than c.TriggerChars to
// c.MaxChars, marker included: c.HeadRatio of it from the start and at
// most c.MaxTailChars from the end.
func cutSnapshot(s string, c *SnapshotConfig) string {
	if len(s) <= c.TriggerChars {
		return s
	}
	n := utf8.RuneCountInString(s)
	if n <= c.TriggerChars || !isSnapshot(s) {
		return s
	}
	limit := "page snapshot limit " + stub.Commas(c.MaxChars) + " chars"
	return headTail(s, n, c.MaxChars, c.HeadRatio, c.MaxTailChars, func(cut, first, last int) string {
		return cutMarker(cut, first, last, limit)
	})
}

// headLines keeps the first max lines of s and a marker. It returns s
// itself when s has at most max lines.
func headLines(s string, max int, tool string) string {
	i := 0
	for k := 0; k < max; k++ {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			return s
		}
		i += j + 1
	}
	rest := s[i:]
	if rest == "" || isOwnMarker(rest, "[... ctxguard cut ") {
		return s // fits, or was cut before: a rewritten text stays as it is
	}
	cutLines := strings.Count(rest, "\n")
	if !strings.HasSuffix(rest, "\n") {
		cutLines++
	}
	runes := utf8.RuneCountInString(rest)
	m := headMarker(cutLines, max+1, max+cutLines, runes, max, tool)
	if len(m) >= len(rest) || utf8.RuneCountInString(m) > runes {
		return s // cutting would not save anything
	}
	return s[:i] + m
}

// clipLines clips each line longer than max characters to its first max
// characters and a marker, where that makes the line shorter. A line's CR
// before its LF is kept. It returns s itself when no line is clipped.
func clipLines(s string, max int) string {
	var b strings.Builder
	last := 0 // s[:last] is in b
	for start := 0; start < len(s); {
		end := strings.IndexByte(s[start:], '\n')
		next := 0
		if end < 0 {
			end, next = len(s), len(s)
		} else {
			end += start
			next = end + 1
		}
		lineEnd := end
		if lineEnd > start && s[lineEnd-1] == '\r' {
			lineEnd--
		}
		if line := s[start:lineEnd]; len(line) > max {
			if n := utf8.RuneCountInString(line); n > max {
				k := runeOffset(line, max)
				if isOwnMarker(line[k:], " [... ctxguard clipped ") {
					start = next
					continue
				}
				m := clipMarker(n-max, max)
				if len(m) < len(line)-k && utf8.RuneCountInString(m) < n-max {
					if last == 0 {
						b.Grow(len(s))
					}
					b.WriteString(s[last : start+k])
					b.WriteString(m)
					last = lineEnd
				}
			}
		}
		start = next
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// isOwnMarker reports whether s is one marker line this package wrote,
// starting with prefix.
func isOwnMarker(s, prefix string) bool {
	return strings.HasPrefix(s, prefix) && strings.HasSuffix(s, " ...]") && !strings.Contains(s, "\n")
}
