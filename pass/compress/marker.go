package compress

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Markers are ASCII apart from the tool name, short, and a pure function
// of what was cut: no times, no random IDs.

// commas formats n >= 0 with thousands separators: 12345 -> "12,345".
func commas(n int) string {
	s := strconv.Itoa(n)
	if n < 0 || len(s) <= 3 {
		return s
	}
	b := make([]byte, 0, len(s)+len(s)/3)
	for i := 0; i < len(s); i++ {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	return string(b)
}

func lineRange(first, last int) string {
	if first == last {
		return "line " + commas(first)
	}
	return "lines " + commas(first) + "-" + commas(last)
}

// forTool names the tool a limit came from, with a bounded length.
func forTool(tool string) string {
	if tool == "" {
		return ""
	}
	if utf8.RuneCountInString(tool) > 64 {
		r := []rune(tool)
		tool = string(r[:64])
	}
	return " for " + tool
}

// cutMarker describes a head + tail cut.
func cutMarker(cutChars, first, last int, limit string) string {
	return "[... ctxguard cut " + commas(cutChars) + " chars (" + lineRange(first, last) + "); " + limit + " ...]"
}

func headMarker(cutLines, first, last, cutChars, limit int, tool string) string {
	lines := " lines ("
	if cutLines == 1 {
		lines = " line ("
	}
	return "[... ctxguard cut " + commas(cutLines) + lines + strings.TrimPrefix(strings.TrimPrefix(lineRange(first, last), "lines "), "line ") +
		", " + commas(cutChars) + " chars); head limit " + commas(limit) + " lines" + forTool(tool) + " ...]"
}

func clipMarker(cutChars, limit int) string {
	return " [... ctxguard clipped " + commas(cutChars) + " chars; line limit " + commas(limit) + " ...]"
}

func base64Marker(what string, bytes int) string {
	return "[... ctxguard removed " + what + ", " + commas(bytes) + " bytes ...]"
}
