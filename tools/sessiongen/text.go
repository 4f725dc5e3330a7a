package sessiongen

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

var words = []string{
	"the", "a", "function", "returns", "error", "nil", "request", "cache", "token", "session", "message", "block",
	"handler", "config", "value", "test", "failed", "passed", "ok", "build", "module", "import", "struct", "field",
	"café", "naïve", "résumé", "日本語", "テスト", "中文", "🚀", "✓", "—", "…", "\"quoted\"", "back\\slash", "tab\there",
	"<html>", "&amp;", "a/b/c", "100%", "x=1", "`code`", "{json}", "[array]", "ünïcödé", "Ω", "≤", "→",
}

// prose returns about n characters of text.
func (g *gen) prose(n int) string {
	var b strings.Builder
	for b.Len() < n {
		w := words[g.r.IntN(len(words))]
		b.WriteString(w)
		switch g.r.IntN(12) {
		case 0:
			b.WriteString(".\n")
		case 1:
			b.WriteString(", ")
		default:
			b.WriteByte(' ')
		}
	}
	return cut(b.String(), n)
}

// text is prose that is not blank, as the API requires of a text block.
func (g *gen) text(n int) string {
	s := strings.TrimSpace(g.prose(n))
	if s == "" {
		s = "ok"
	}
	return s
}

func (g *gen) phrase() string { return g.text(10 + g.r.IntN(60)) }

func (g *gen) prompt() string { return g.text(g.size(5, 2000)) }

var codeLines = []string{
	"package main", "import (", "\t\"fmt\"", "\t\"strings\"", ")", "func main() {", "\tfmt.Printf(\"%s\\n\", strings.Repeat(\"=\", 10))",
	"\tif err != nil {", "\t\treturn fmt.Errorf(\"open %q: %w\", path, err)", "\t}", "}", "// Comment with unicode: é → 日本",
	"\tre := regexp.MustCompile(`\\d+\\.\\d+`)", "\tvar m map[string]any", "type Config struct {", "\tName string `json:\"name\"`",
	"const x = '\\u00e9' // not an escape in Go source", "\tcase '\\t', '\\n':", "\tpath := \"C:\\\\Users\\\\dev\"", "",
}

// code returns about n characters of source code.
func (g *gen) code(n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(codeLines[g.r.IntN(len(codeLines))])
		b.WriteByte('\n')
	}
	return cut(b.String(), n)
}

// numbered renders text as Read and `cat -n` show it.
func (g *gen) numbered(text string) string {
	var b strings.Builder
	for i, l := range strings.Split(text, "\n") {
		fmt.Fprintf(&b, "%6d→%s\n", i+1, l)
	}
	return b.String()
}

var logLines = []string{
	"ok  \tgithub.com/ctxguard/ctxguard/pass/clear\t0.051s", "--- FAIL: TestSomething (0.00s)", "=== RUN   TestPlan",
	"\x1b[32mPASS\x1b[0m", "\x1b[31mFAIL\x1b[0m src/app.test.ts", "npm WARN deprecated glob@7.2.3", "drwxr-xr-x  5 dev dev 4096 Nov 22 03:13 .",
	"-rw-r--r--  1 dev dev 3386 Nov 22 03:13 main.go", "    at Object.<anonymous> (/home/dev/proj/index.js:12:5)", "\r\rProgress: 45%\r",
	"warning: unused variable `x`", "error[E0308]: mismatched types", "Traceback (most recent call last):", "  File \"app.py\", line 3, in <module>",
}

func (g *gen) logs(n int) string {
	var b strings.Builder
	for b.Len() < n {
		if g.r.IntN(5) == 0 {
			b.WriteString(g.prose(20 + g.r.IntN(100)))
		} else {
			b.WriteString(logLines[g.r.IntN(len(logLines))])
		}
		b.WriteByte('\n')
	}
	return cut(b.String(), n)
}

func (g *gen) grep(n int) string {
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "%s:%d:%s\n", g.path(), 1+g.r.IntN(900), codeLines[g.r.IntN(len(codeLines))])
	}
	return cut(b.String(), n)
}

func (g *gen) markdown(n int) string {
	var b strings.Builder
	for b.Len() < n {
		switch g.r.IntN(5) {
		case 0:
			b.WriteString("## " + g.phrase() + "\n\n")
		case 1:
			b.WriteString("```go\n" + g.code(g.size(20, 600)) + "\n```\n\n")
		case 2:
			b.WriteString("- [" + g.phrase() + "](https://example.com/" + g.base62(6) + ")\n")
		default:
			b.WriteString(g.prose(g.size(40, 800)) + "\n\n")
		}
	}
	return cut(b.String(), n)
}

func (g *gen) snapshot(n int) string {
	var b strings.Builder
	b.WriteString("### Page state\n- Page URL: https://example.com/app\n- Page Snapshot:\n```yaml\n")
	for b.Len() < n {
		depth := strings.Repeat("  ", g.r.IntN(6))
		fmt.Fprintf(&b, "%s- %s \"%s\" [ref=e%d]\n", depth, []string{"generic", "link", "button", "heading", "textbox", "listitem"}[g.r.IntN(6)], g.phrase(), g.r.IntN(900))
	}
	b.WriteString("```\n")
	return b.String()
}

func (g *gen) dir() string {
	return "/home/dev/proj/" + []string{"src", "pkg/api", "internal/store", "cmd/server", "web/app", "docs"}[g.r.IntN(6)]
}

func (g *gen) path() string {
	return g.dir() + "/" + []string{"main", "server", "handler", "store_test", "README", "config"}[g.r.IntN(6)] + []string{".go", ".ts", ".py", ".md"}[g.r.IntN(4)]
}

const b62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func (g *gen) base62(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = b62[g.r.IntN(62)]
	}
	return string(b)
}

func (g *gen) base64(n int) string {
	const a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	n &^= 3
	b := make([]byte, n)
	for i := range b {
		b[i] = a[g.r.IntN(64)]
	}
	return string(b)
}

// uuid returns a fresh, deterministic record id.
func (g *gen) uuid() string {
	g.nid++
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", g.r.Uint32(), g.nid&0xffff, g.r.IntN(4096), g.r.IntN(4096), g.r.Uint64()&0xffffffffffff)
}

func (g *gen) timestamp() string {
	g.clock += 1 + g.r.IntN(40)
	return fmt.Sprintf("2026-11-20T%02d:%02d:%02d.%03dZ", 10+g.clock/3600%12, g.clock/60%60, g.clock%60, g.r.IntN(1000))
}

// JSON writing.

// obj writes an object from key, value pairs; values are raw JSON.
func (g *gen) obj(kv ...any) []byte {
	b := []byte{'{'}
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJS(b, kv[i].(string))
		b = append(b, ':')
		b = append(b, kv[i+1].([]byte)...)
	}
	return append(b, '}')
}

func join(elems [][]byte) []byte {
	b := []byte{'['}
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return append(b, ']')
}

func num(n int) []byte { return strconv.AppendInt(nil, int64(n), 10) }

func q(s string) []byte { return appendJS(nil, s) }

// q quotes s in the session's style.
func (g *gen) q(s string) []byte {
	if g.ascii {
		return appendASCII(nil, s)
	}
	return appendJS(nil, s)
}

// appendJS quotes s as JavaScript's JSON.stringify does: only '"', '\'
// and control characters are escaped.
func appendJS(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// appendASCII quotes s with every non-ASCII character as a \u escape
// (surrogate pairs beyond the BMP), as Python's json.dumps does.
func appendASCII(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r == '\n':
			dst = append(dst, '\\', 'n')
		case r < 0x20 || r >= 0x7f:
			if r > 0xffff {
				a, b := utf16.EncodeRune(r)
				dst = fmt.Appendf(dst, "\\u%04x\\u%04x", a, b)
			} else {
				dst = fmt.Appendf(dst, "\\u%04x", r)
			}
		default:
			dst = append(dst, byte(r))
		}
	}
	return append(dst, '"')
}

// cut returns at most n bytes of s, not splitting a UTF-8 sequence.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// NewSource returns a source that yields data's bytes, eight at a time
// (little-endian, a short tail zero-padded), and once they run out
// continues with a PCG seeded from a hash of data. So a fuzzer's bytes
// steer the first choices directly and every input still makes a whole
// session.
func NewSource(data []byte) rand.Source {
	h := fnv.New128a()
	h.Write(data)
	sum := h.Sum(nil)
	return &byteSource{data: data, pcg: rand.NewPCG(binary.LittleEndian.Uint64(sum), binary.LittleEndian.Uint64(sum[8:]))}
}

type byteSource struct {
	data []byte
	pcg  *rand.PCG
}

func (s *byteSource) Uint64() uint64 {
	if len(s.data) == 0 {
		return s.pcg.Uint64()
	}
	var b [8]byte
	n := copy(b[:], s.data)
	s.data = s.data[n:]
	return binary.LittleEndian.Uint64(b[:])
}
