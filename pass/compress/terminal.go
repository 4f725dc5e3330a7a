package compress

import "strings"

const esc = 0x1b

// stripANSI removes ANSI escape sequences (ECMA-48): CSI sequences
// (ESC [ ... final byte), OSC strings (ESC ] ... BEL or ESC \, so an OSC 8
// hyperlink keeps its visible text), DCS/SOS/PM/APC strings, and two- and
// three-byte escapes (ESC 7, ESC ( B, ...). An OSC or DCS string without a
// terminator loses only its ESC, so no text after it can vanish. It
// returns s itself when s holds no ESC.
func stripANSI(s string) string {
	i := strings.IndexByte(s, esc)
	if i < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i >= 0 {
		b = append(b, s[:i]...)
		s = s[i+ansiLen(s[i:]):]
		i = strings.IndexByte(s, esc)
	}
	return string(append(b, s...))
}

// ansiLen returns the length of the escape sequence at the start of s,
// which starts with ESC.
func ansiLen(s string) int {
	if len(s) < 2 {
		return 1
	}
	switch c := s[1]; {
	case c == '[': // CSI: parameters 0x30-0x3F, intermediates 0x20-0x2F, final 0x40-0x7E
		i := 2
		for i < len(s) && s[i] >= 0x30 && s[i] <= 0x3F {
			i++
		}
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2F {
			i++
		}
		if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7E {
			return i + 1
		}
		return i // malformed or cut short: drop what was read
	case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_':
		// String until ST (ESC \) or, for OSC, BEL.
		for i := 2; i < len(s); i++ {
			if s[i] == 0x07 && c == ']' {
				return i + 1
			}
			if s[i] == esc {
				if i+1 < len(s) && s[i+1] == '\\' {
					return i + 2
				}
				break
			}
		}
		return 1
	case c >= 0x20 && c <= 0x2F: // nF: intermediates then a final byte
		i := 2
		for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2F {
			i++
		}
		if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7E {
			return i + 1
		}
		return 1
	case c >= 0x30 && c <= 0x7E: // Fp, Fe, Fs
		return 2
	}
	return 1
}

// collapseCR keeps, for each line that holds a bare carriage return (one
// not followed by a line feed), the text after its last carriage return
// that is not blank: the final state of a progress bar or spinner that
// redraws itself. A CR right before LF is a line ending and is kept. It
// returns s itself when nothing changes.
func collapseCR(s string) string {
	if !hasBareCR(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for len(s) > 0 {
		line, rest, nl := s, "", false
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, rest, nl = s[:i], s[i+1:], true
		}
		s = rest
		crlf := nl && strings.HasSuffix(line, "\r")
		if crlf {
			line = line[:len(line)-1]
		}
		if strings.IndexByte(line, '\r') >= 0 {
			line = lastRedraw(line)
		}
		b.WriteString(line)
		if crlf {
			b.WriteByte('\r')
		}
		if nl {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func hasBareCR(s string) bool {
	for i := 0; ; {
		j := strings.IndexByte(s[i:], '\r')
		if j < 0 {
			return false
		}
		i += j + 1
		if i >= len(s) || s[i] != '\n' {
			return true
		}
	}
}

// lastRedraw returns the last segment of line between carriage returns
// that holds something other than spaces and tabs, or "" if none does.
func lastRedraw(line string) string {
	for line != "" {
		i := strings.LastIndexByte(line, '\r')
		seg := line[i+1:]
		if strings.TrimLeft(seg, " \t") != "" {
			return seg
		}
		if i < 0 {
			break
		}
		line = line[:i]
	}
	return ""
}
