package compress

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// fuzzSeeds are starting inputs shared by the fuzz targets.
func fuzzSeeds(f *testing.F) []string {
	seeds := []string{
		"", "plain", "\x1b[1;31mred\x1b[0m", "\x1b]8;;u\x1b\\t\x1b]8;;\x1b\\", "\x1b", "\x1b[", "\x1b]0;x",
		"a\rb\r\nc\r", "\r\r\n", "10%\r100%\n", "data:image/png;base64," + b64([]byte("\x89PNG\r\n\x1a\n"), 200),
		"x " + b64([]byte("\xff\xd8\xff\xe0"), 200), htmlPage(8), "     1→code\n     2→more",
		"<persisted-output>\nsaved\n</persisted-output>", strings.Repeat("line\n", 300),
		strings.Repeat("日本語", 300), "é\u2028\u00e9\\/\"",
	}
	for _, name := range []string{"bash-ansi.txt", "bash-curl-progress.txt", "grep-crlf.txt", "bash-html.txt"} {
		seeds = append(seeds, readFixture(f, name))
	}
	return seeds
}

// checkTransform asserts the properties every text transform has: no
// panic, valid UTF-8 out of valid UTF-8, never longer, deterministic.
func checkTransform(t *testing.T, name string, f func(string) string, in string) {
	t.Helper()
	out := f(in)
	if utf8.ValidString(in) && !utf8.ValidString(out) {
		t.Errorf("%s: invalid UTF-8 out of valid input %q", name, in)
	}
	if len(out) > len(in) {
		t.Errorf("%s: longer %d -> %d for %q", name, len(in), len(out), in)
	}
	if utf8.ValidString(in) && utf8.RuneCountInString(out) > utf8.RuneCountInString(in) {
		t.Errorf("%s: more characters for %q", name, in)
	}
	if again := f(in); again != out {
		t.Errorf("%s: not deterministic for %q", name, in)
	}
}

func FuzzTransforms(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, uint16(40))
	}
	md := mustNew(f, Defaults())
	snapCfg := Defaults().Snapshot
	snapCfg.TriggerChars, snapCfg.MaxChars, snapCfg.MaxTailChars = 300, 256, 60
	f.Fuzz(func(t *testing.T, s string, n uint16) {
		limit := int(n%2000) + 16
		checkTransform(t, "stripANSI", stripANSI, s)
		checkTransform(t, "collapseCR", collapseCR, s)
		checkTransform(t, "replaceBase64", func(s string) string { return replaceBase64(s, 64, true) }, s)
		checkTransform(t, "stripScripts", stripScripts, s)
		checkTransform(t, "cutSnapshot", func(s string) string { return cutSnapshot(s, &snapCfg) }, s)
		checkTransform(t, "clipLines", func(s string) string { return clipLines(s, limit) }, s)
		checkTransform(t, "headLines", func(s string) string { return headLines(s, limit/8+1, "Grep") }, s)
		checkTransform(t, "capChars", func(s string) string { return capChars(s, limit+256, 0.7, "Bash") }, s)
		checkTransform(t, "capChars tiny ratio", func(s string) string { return capChars(s, 256, 0, "") }, s)
		// The whole chain (HTML included) for a few tools.
		for _, tool := range []string{"Bash", "Grep", "Read", "mcp__playwright__browser_snapshot"} {
			checkTransform(t, "Text "+tool, func(s string) string { return md.Text(tool, s) }, s)
		}
		if utf8.RuneCountInString(s) > limit+256 {
			if got := capChars(s, limit+256, 0.7, "Bash"); utf8.RuneCountInString(got) > limit+256 && got != s {
				t.Errorf("capChars kept %d chars, cap %d", utf8.RuneCountInString(got), limit+256)
			}
		}
	})
}

// quoteEscaped writes s as a JSON string the way a client that escapes
// much more than needed would: every ASCII punctuation character as \u00XX
// and '/' as \/.
func quoteEscaped(s string) []byte {
	q := jsonscan.AppendQuote(nil, s)
	var b bytes.Buffer
	b.WriteByte('"')
	body := q[1 : len(q)-1]
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '\\':
			b.WriteByte(c)
			i++
			b.WriteByte(body[i])
		case c == '/':
			b.WriteString(`\/`)
		case c < 0x80 && !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == ' '):
			b.WriteString(`\u00`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.Bytes()
}

const hexDigits = "0123456789abcdef"

var fuzzTools = []string{"Bash", "Read", "Grep", "WebFetch", "mcp__playwright__browser_snapshot", "Task", "mcp__srv__grep_files"}

// FuzzPass runs the pass on a request holding the fuzzed text as a tool
// result, written with three escaping styles. Run must edit exactly when
// Text shortens the text, with Text's output, and the result must be a
// valid request that differs only in that result.
func FuzzPass(f *testing.F) {
	for i, s := range fuzzSeeds(f) {
		f.Add(s, uint8(i), uint8(i%3))
	}
	cfg := Defaults()
	// Small limits so that short inputs reach every rule.
	cfg.Cap.MaxChars = 300
	cfg.Tools[0].MaxChars, cfg.Tools[0].HeadLines, cfg.Tools[0].MaxColumns = ptr(256), ptr(5), ptr(40)
	cfg.Snapshot.TriggerChars, cfg.Snapshot.MaxChars = 280, 256
	cfg.HTML.MinChars = 64
	cfg.Base64.MinChars = 64
	cfg.Images.Replace = true
	p := mustNew(f, cfg)
	f.Fuzz(func(t *testing.T, s string, toolIdx, style uint8) {
		if !utf8.ValidString(s) {
			s = strings.ToValidUTF8(s, "\uFFFD")
		}
		tool := fuzzTools[int(toolIdx)%len(fuzzTools)]
		var lit []byte
		switch style % 3 {
		case 0:
			lit = jsonscan.AppendQuote(nil, s) // as JavaScript writes it
		case 1:
			lit = jsonscan.AppendQuote(nil, s)
			lit = bytes.ReplaceAll(lit, []byte("<"), []byte(`\u003c`)) // Go's HTML-safe escaping
			lit = bytes.ReplaceAll(lit, []byte(">"), []byte(`\u003e`))
			lit = bytes.ReplaceAll(lit, []byte("&"), []byte(`\u0026`))
		case 2:
			lit = quoteEscaped(s)
		}
		body := []byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"go"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"` + tool + `","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":`)
		start := len(body)
		body = append(body, lit...)
		end := len(body)
		body = append(body, `}]}]}`...)
		edits, out := runPass(t, p, body)
		want := p.Text(tool, s)
		wantRepl := jsonscan.AppendQuote(nil, want)
		changes := want != s && len(wantRepl) < len(lit)
		switch {
		case !changes && len(edits) != 0:
			t.Fatalf("edit where Text changes nothing: %q", edits[0].Repl)
		case changes && len(edits) != 1:
			t.Fatalf("no edit for %q; Text gives %q", s, want)
		case changes:
			e := edits[0]
			if e.Span.Start != start || e.Span.End != end {
				t.Fatalf("edit span %v, want [%d,%d)", e.Span, start, end)
			}
			if !bytes.Equal(e.Repl, wantRepl) {
				t.Fatalf("repl %q, want %q", e.Repl, wantRepl)
			}
			if !bytes.Equal(out[:start], body[:start]) || !bytes.Equal(out[start+len(e.Repl):], body[end:]) {
				t.Fatal("bytes outside the edit changed")
			}
		}
		if _, again := runPass(t, p, body); !bytes.Equal(again, out) {
			t.Fatal("not deterministic")
		}
	})
}
