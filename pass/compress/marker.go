package compress

import (
	"github.com/ctxguard/ctxguard/internal/stub"

	"strings"
	"unicode/utf8"
)

// Markers are ASCII apart from the tool name, short, and a pure function
// of what was cut: no times, no random IDs.

func lineRange(first, last int) string {
	if first == last {
		return "line " + stub.Commas(first)
	}
	return "lines " + stub.Commas(first) + "-" + stub.Commas(last)
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
	return "[... ctxguard cut " + stub.Commas(cutChars) + " chars (" + lineRange(first, last) + "); " + limit + " ...]"
}

func headMarker(cutLines, first, last, cutChars, limit int, tool string) string {
	lines := " lines ("
	if cutLines == 1 {
		lines = " line ("
	}
	return "[... ctxguard cut " + stub.Commas(cutLines) + lines + strings.TrimPrefix(strings.TrimPrefix(lineRange(first, last), "lines "), "line ") +
		", " + stub.Commas(cutChars) + " chars); head limit " + stub.Commas(limit) + " lines" + forTool(tool) + " ...]"
}

func clipMarker(cutChars, limit int) string {
	return " [... ctxguard clipped " + stub.Commas(cutChars) + " chars; line limit " + stub.Commas(limit) + " ...]"
}

func base64Marker(what string, bytes int) string {
	return "[... ctxguard removed " + what + ", " + stub.Commas(bytes) + " bytes ...]"
}
