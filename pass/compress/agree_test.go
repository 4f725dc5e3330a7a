package compress

import (
	"github.com/ctxguard/ctxguard/internal/stub"

	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// TestRawChecksAgreeWithText builds texts from pieces that each rule looks
// for, in random order, written with random escaping, and checks that Run
// (which decides from raw bytes whether to decode) edits exactly when Text
// (which sees the decoded text) changes something, with Text's output.
// Random bytes from the fuzzer rarely assemble a signature followed by 256
// base64 characters after a \u escape; this does, thousands of times.
func TestRawChecksAgreeWithText(t *testing.T) {
	png := b64([]byte("\x89PNG\r\n\x1a\n"), 300)
	jpeg := b64([]byte("\xff\xd8\xff\xe0"), 300)
	pdf := b64([]byte("%PDF-1.4\n"), 300)
	gif := b64([]byte("GIF89a"), 300)
	webp := b64([]byte("RIFF\x00\x00\x00\x00WEBPVP8 "), 300)
	var snap strings.Builder
	snap.WriteString("- Page Snapshot:\n")
	for i := 0; snap.Len() < 600; i++ {
		snap.WriteString("  - link [ref=e" + stub.Commas(i) + "]\n")
	}
	pieces := []string{
		"plain words ", "é", "😀", "\n", "\r\n", "\r", "\t", "/", "\\", "\"", "\x1b[31m", "\x1b", "\x00",
		png, jpeg, pdf, gif, webp, "data:image/png;base64," + png, "data:;base64," + gif, ";base64,",
		"<!DOCTYPE html>", "<div><p>a</p><p>b</p><p>c</p><p>d</p></div>", htmlPage(2), "<persisted-output>",
		"     1→", snap.String(),
		strings.Repeat(strings.Repeat("y", 130)+"\n", 17), // more long stretches than mayChange tracks strings.Repeat("x", 90), strings.Repeat("line\n", 12), "=", "A", "9j/", "[ref=",
	}
	cfg := Defaults()
	cfg.Cap.MaxChars = 5000 // above the long stretches piece, so that the cap alone does not force decoding
	cfg.Tools[0].MaxChars, cfg.Tools[0].HeadLines, cfg.Tools[0].MaxColumns = ptr(4000), ptr(30), ptr(80)
	cfg.Snapshot.TriggerChars, cfg.Snapshot.MaxChars, cfg.Snapshot.MaxTailChars = 500, 400, 100
	cfg.HTML.MinChars = 100
	cfg.Base64.MinChars = 128
	p := mustNew(t, cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	tools := []string{"Bash", "Grep", "Read", "mcp__playwright__browser_snapshot"}
	for iter := 0; iter < 4000; iter++ {
		var b strings.Builder
		for n := rng.IntN(6) + 1; n > 0; n-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		tool := tools[rng.IntN(len(tools))]
		var lit []byte
		switch rng.IntN(4) {
		case 0:
			lit = jsonscan.AppendQuote(nil, s)
		case 1:
			lit = quoteEscaped(s)
		case 2: // Go's HTML-safe escaping
			lit = jsonscan.AppendQuote(nil, s)
			lit = bytes.ReplaceAll(lit, []byte("<"), []byte(`\u003c`))
			lit = bytes.ReplaceAll(lit, []byte(">"), []byte(`\u003e`))
		case 3: // non-ASCII and slashes escaped, as Python or PHP write them
			lit = asciiOnly(s)
		}
		body := []byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"go"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"` + tool + `","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":`)
		body = append(append(body, lit...), `}]}]}`...)
		edits, _ := runPass(t, p, body)
		want := p.Text(tool, s)
		wantRepl := jsonscan.AppendQuote(nil, want)
		changes := want != s && len(wantRepl) < len(lit)
		if changes != (len(edits) == 1) || len(edits) > 1 || changes && !bytes.Equal(edits[0].Repl, wantRepl) {
			t.Fatalf("tool %s, literal %.300s: %d edits, Text changes: %v", tool, lit, len(edits), changes)
		}
	}
}

// asciiOnly writes s as a JSON string with every non-ASCII character as
// \uXXXX (surrogate pairs above the BMP) and '/' as \/.
func asciiOnly(s string) []byte {
	q := jsonscan.AppendQuote(nil, s)
	var b bytes.Buffer
	for _, r := range string(q) {
		switch {
		case r == '/':
			b.WriteString(`\/`)
		case r < 0x80:
			b.WriteRune(r)
		case r > 0xffff:
			r -= 0x10000
			writeU(&b, 0xd800+(r>>10))
			writeU(&b, 0xdc00+(r&0x3ff))
		default:
			writeU(&b, r)
		}
	}
	return b.Bytes()
}

func writeU(b *bytes.Buffer, r rune) {
	b.WriteString(`\u`)
	for shift := 12; shift >= 0; shift -= 4 {
		b.WriteByte(hexDigits[(r>>shift)&0xf])
	}
}
