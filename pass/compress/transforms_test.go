package compress

import (
	"github.com/ctxguard/ctxguard/internal/stub"

	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type tcase struct {
	name, in, want string
}

func runCases(t *testing.T, f func(string) string, cases []tcase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, f(tc.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestStripANSI(t *testing.T) {
	runCases(t, stripANSI, []tcase{
		{"none", "plain text", "plain text"},
		{"sgr", "\x1b[1;33mwarn\x1b[0m ok", "warn ok"},
		{"erase line and cursor", "a\x1b[2K\x1b[1Gb\x1b[?25l", "ab"},
		{"osc8 hyperlink keeps text", "\x1b]8;;https://x.y\x1b\\link\x1b]8;;\x1b\\ end", "link end"},
		{"osc title with bel", "\x1b]0;title\x07text", "text"},
		{"charset designation", "\x1b(Bx", "x"},
		{"save cursor", "\x1b7a\x1b8", "a"},
		{"lone esc at end", "abc\x1b", "abc"},
		{"unterminated osc keeps text", "\x1b]8;;https://x.y and more", "]8;;https://x.y and more"},
		{"truncated csi", "abc\x1b[12", "abc"},
		{"utf8 around", "é\x1b[31m→\x1b[0mü", "é→ü"},
	})
}

func TestCollapseCR(t *testing.T) {
	runCases(t, collapseCR, []tcase{
		{"none", "a\nb", "a\nb"},
		{"crlf kept", "a\r\nb\r\n", "a\r\nb\r\n"},
		{"progress", "dl 10%\rdl 50%\rdl 100%\ndone", "dl 100%\ndone"},
		{"trailing cr keeps last redraw", "working 100%\r\nnext", "working 100%\r\nnext"},
		{"cr at end of text", "a 50%\ra 100%\r", "a 100%"},
		{"blank redraw ignored", "result\r      \r\nok", "result\r\nok"},
		{"progress then crlf", "1%\r2%\r3%\r\nx", "3%\r\nx"},
		{"only crs", "\r\r\nx", "\r\nx"},
		{"curl", "  0     0\r100  3097k\nend", "100  3097k\nend"},
	})
}

func b64(prefix []byte, n int) string {
	data := append(append([]byte(nil), prefix...), make([]byte, n)...)
	for i := len(prefix); i < len(data); i++ {
		data[i] = byte(i * 7)
	}
	return base64.StdEncoding.EncodeToString(data)
}

func TestReplaceBase64(t *testing.T) {
	png := b64([]byte("\x89PNG\r\n\x1a\n"), 600)
	jpeg := b64([]byte("\xff\xd8\xff\xe0"), 600)
	pdf := b64([]byte("%PDF-1.7\n"), 600)
	random := b64([]byte("not an image"), 600) // long, but no signature
	sha := "sha512-" + b64(nil, 64)
	short := b64([]byte("\x89PNG\r\n\x1a\n"), 20)
	pngBytes := stub.Commas(decodedSize(countB64(png)))
	f := func(s string) string { return replaceBase64(s, 256, true) }
	runCases(t, f, []tcase{
		{"none", "no base64 here", "no base64 here"},
		{"data uri", `<img src="data:image/png;base64,` + png + `">`,
			`<img src="[... ctxguard removed data:image/png;base64, ` + pngBytes + ` bytes ...]">`},
		{"data uri with params", "url(data:font/woff2;charset=utf-8;base64," + random + ")",
			"url([... ctxguard removed data:font/woff2;base64, " + stub.Commas(decodedSize(countB64(random))) + " bytes ...])"},
		{"data uri without media type", "data:;base64," + random,
			"[... ctxguard removed data:text/plain;base64, " + stub.Commas(decodedSize(countB64(random))) + " bytes ...]"},
		{"short data uri kept", "data:image/png;base64," + short, "data:image/png;base64," + short},
		{"bare png", `{"screenshot":"` + png + `"}`, `{"screenshot":"[... ctxguard removed base64 image/png, ` + pngBytes + ` bytes ...]"}`},
		{"bare jpeg", "img: " + jpeg + "\n", "img: [... ctxguard removed base64 image/jpeg, " + stub.Commas(decodedSize(countB64(jpeg))) + " bytes ...]\n"},
		{"bare pdf", pdf, "[... ctxguard removed base64 application/pdf, " + stub.Commas(decodedSize(countB64(pdf))) + " bytes ...]"},
		{"bare without signature kept", "key: " + random, "key: " + random},
		{"hash kept", "integrity " + sha, "integrity " + sha},
		{"signature inside a word kept", "x" + png, "x" + png},
		{"uri and bare", "data:image/png;base64," + png + " and " + png,
			"[... ctxguard removed data:image/png;base64, " + pngBytes + " bytes ...] and [... ctxguard removed base64 image/png, " + pngBytes + " bytes ...]"},
	})
	t.Run("bare off", func(t *testing.T) {
		in := "x: " + png
		if got := replaceBase64(in, 256, false); got != in {
			t.Errorf("bare run replaced with bare off: %q", got)
		}
	})
}

func TestLooksHTML(t *testing.T) {
	page := "<!DOCTYPE html><html><head><title>t</title></head><body><div><p>a</p><p>b</p></div></body></html>"
	cases := []struct {
		name string
		in   string
		want bool
	}{
		{"document", page, true},
		{"leading space and bom", "\ufeff \n" + page, true},
		{"xml prolog", `<?xml version="1.0"?>` + "\n" + page, true},
		{"fragment", "<div><ul><li>a</li><li>b</li><li>c</li></ul><p>x</p></div>", true},
		{"too few tags", "<div><p>x</p></div>", false},
		{"not ending with tag", page + "\nexit 0", false},
		{"jsx file", "import React from 'react'\nexport const A = () => <div><p>a</p><p>b</p><p>c</p><p>d</p></div>", false},
		{"vue component", "<script setup>\nconst a = 1\n</script>\n<template><div><p>a</p><p>b</p><p>c</p><p>d</p></div></template>", false},
		{"template", "<div>{{ .Title }}<p>a</p><p>b</p><p>c</p><p>d</p></div>", false},
		{"xml", "<project><dependencies><dependency>a</dependency></dependencies></project>", false},
		{"diff", "diff --git a/x.html b/x.html\n+<div><p>a</p><p>b</p><p>c</p><p>d</p></div>", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := looksHTML(tc.in); got != tc.want {
				t.Errorf("looksHTML = %v, want %v", got, tc.want)
			}
		})
	}
}

func htmlPage(n int) string {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><title>Docs</title><style>body { color: red; margin: 0 }</style>\n")
	b.WriteString("<script>window.dataLayer = window.dataLayer || []; function gtag(){dataLayer.push(arguments);}</script></head>\n<body>\n")
	b.WriteString(`<nav class="top"><a href="/">Home</a> | <a href="/docs">Docs</a></nav>` + "\n<h1>Configuration</h1>\n")
	for i := 0; i < n; i++ {
		b.WriteString(`<div class="section"><h2 id="s">Section</h2><p class="lead">Some <em>text</em> with a <a href="https://example.com/page">link</a>.</p></div>` + "\n")
	}
	b.WriteString("<table><thead><tr><th>Key</th><th>Default</th></tr></thead><tbody><tr><td>port</td><td>8080</td></tr></tbody></table>\n</body></html>\n")
	return b.String()
}

func TestReduceHTML(t *testing.T) {
	md := mustNew(t, Defaults())
	page := htmlPage(10)
	got := md.reduceHTML(page)
	for _, want := range []string{"[ctxguard converted ", "# Configuration", "| Key  | Default |", "[link](https://example.com/page)"} {
		if !strings.Contains(got, want) {
			t.Errorf("markdown lacks %q:\n%s", want, got)
		}
	}
	for _, gone := range []string{"dataLayer", "color: red", "<div"} {
		if strings.Contains(got, gone) {
			t.Errorf("markdown still holds %q", gone)
		}
	}
	t.Run("too small", func(t *testing.T) {
		small := htmlPage(0)
		if len(small) >= md.cfg.HTML.MinChars {
			t.Fatalf("fixture %d chars", len(small))
		}
		if got := md.reduceHTML(small); got != small {
			t.Error("page under min_chars converted")
		}
	})
	t.Run("over max", func(t *testing.T) {
		cfg := Defaults()
		cfg.HTML.MaxChars = 2000
		p := mustNew(t, cfg)
		if got := p.reduceHTML(htmlPage(40)); got != htmlPage(40) {
			t.Error("page over max_chars converted")
		}
	})
	t.Run("strip only", func(t *testing.T) {
		cfg := Defaults()
		cfg.HTML.Markdown = false
		p := mustNew(t, cfg)
		got := p.reduceHTML(page)
		want := strings.Replace(page, "window.dataLayer = window.dataLayer || []; function gtag(){dataLayer.push(arguments);}", "[... ctxguard removed 86 chars of script ...]", 1)
		// The style body is shorter than its marker and stays.
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

func TestCapChars(t *testing.T) {
	var lines []string
	for i := 1; i <= 1000; i++ {
		lines = append(lines, strings.Repeat("x", 20)+" "+stub.Commas(i))
	}
	s := strings.Join(lines, "\n")
	got := capChars(s, 2000, 0.7, "Grep")
	if n := len([]rune(got)); n > 2000 {
		t.Errorf("capped to %d chars, over 2000", n)
	}
	if !strings.HasPrefix(got, lines[0]+"\n") || !strings.HasSuffix(got, "\n"+lines[999]) {
		t.Error("head or tail lost")
	}
	if !strings.Contains(got, "[... ctxguard cut ") || !strings.Contains(got, "; cap 2,000 chars for Grep ...]") {
		t.Errorf("no marker:\n%s", got)
	}
	// Cuts land on line boundaries: every kept line is a whole line.
	for _, l := range strings.Split(got, "\n") {
		if !strings.HasPrefix(l, "[...") && !strings.HasPrefix(l, strings.Repeat("x", 20)+" ") {
			t.Errorf("partial line %q", l)
		}
	}
	t.Run("marker counts", func(t *testing.T) {
		in := strings.Repeat("a\n", 300) // 600 chars, 301 lines (the last empty)
		got := capChars(in, 300, 0.5, "")
		if n := len([]rune(got)); n > 300 {
			t.Errorf("%d chars", n)
		}
		i := strings.Index(got, "[...")
		j := strings.Index(got, "...]\n") + 5
		head, tail := i/2, (len(got)-j)/2 // kept lines
		want := strings.Repeat("a\n", head) +
			"[... ctxguard cut " + stub.Commas(600-2*head-2*tail) + " chars (lines " + stub.Commas(head+1) + "-" + stub.Commas(300-tail) + "); cap 300 chars ...]\n" +
			strings.Repeat("a\n", tail)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if head < tail-2 || head > tail+2 {
			t.Errorf("head %d lines, tail %d: want about even", head, tail)
		}
	})
	runCases(t, func(s string) string { return capChars(s, 300, 0.7, "") }, []tcase{
		{"fits", strings.Repeat("é", 300), strings.Repeat("é", 300)},
		{"counts code points not bytes", strings.Repeat("日本", 150), strings.Repeat("日本", 150)},
	})
	t.Run("one long line cut mid-line on rune boundaries", func(t *testing.T) {
		in := strings.Repeat("日本語", 400)
		got := capChars(in, 300, 0.7, "")
		if n := len([]rune(got)); n > 300 {
			t.Errorf("%d chars", n)
		}
		if !strings.HasPrefix(got, "日本語日本語") || !strings.HasSuffix(got, "日本語") {
			t.Errorf("got %q", got)
		}
	})
}

func TestCutSnapshot(t *testing.T) {
	var b strings.Builder
	b.WriteString("### Page state\n- Page URL: https://example.com/\n- Page Snapshot:\n```yaml\n")
	for i := 0; b.Len() < 40_000; i++ {
		b.WriteString(`  - link "Item ` + stub.Commas(i) + `" [ref=e` + stub.Commas(i) + `] [cursor=pointer]` + "\n")
	}
	b.WriteString("```\n")
	snap := b.String()
	c := Defaults().Snapshot
	got := cutSnapshot(snap, &c)
	n := len([]rune(got))
	if n > c.MaxChars {
		t.Errorf("kept %d chars, over %d", n, c.MaxChars)
	}
	i := strings.Index(got, "[... ctxguard cut ")
	if i < 0 || !strings.Contains(got, "page snapshot limit 16,000 chars ...]") {
		t.Fatalf("no marker in %q", got[:200])
	}
	head, tail := got[:i], got[strings.Index(got[i:], "\n")+i+1:]
	if len(head) < 10_000 || len(head) > 11_200 {
		t.Errorf("head %d chars, want about 70%% of the budget", len(head))
	}
	if len(tail) > c.MaxTailChars || len(tail) < 2_000 {
		t.Errorf("tail %d chars, want at most %d", len(tail), c.MaxTailChars)
	}
	if !strings.HasPrefix(got, "### Page state") || !strings.HasSuffix(got, "```\n") {
		t.Error("head or tail lost")
	}
	t.Run("under trigger", func(t *testing.T) {
		small := snap[:19_000]
		if got := cutSnapshot(small, &c); got != small {
			t.Error("snapshot under trigger cut")
		}
	})
	t.Run("not a snapshot", func(t *testing.T) {
		plain := strings.ReplaceAll(strings.ReplaceAll(snap, "ref=", "id="), "Page Snapshot", "Page")
		if got := cutSnapshot(plain, &c); got != plain {
			t.Error("plain text cut as snapshot")
		}
	})
	t.Run("ref markers alone", func(t *testing.T) {
		noTitle := strings.ReplaceAll(snap, "Page Snapshot", "Page")
		if got := cutSnapshot(noTitle, &c); got == noTitle {
			t.Error("ref= tree not recognised")
		}
	})
}

func TestHeadLines(t *testing.T) {
	runCases(t, func(s string) string { return headLines(s, 3, "Grep") }, []tcase{
		{"fits", "a\nb\nc", "a\nb\nc"},
		{"fits with newline", "a\nb\nc\n", "a\nb\nc\n"},
		{"cut", "a\nb\nc\n" + strings.Repeat("dddddddddd\n", 20), "a\nb\nc\n[... ctxguard cut 20 lines (4-23, 220 chars); head limit 3 lines for Grep ...]"},
		{"cut no trailing newline", "a\nb\nc\n" + strings.Repeat("d", 200), "a\nb\nc\n[... ctxguard cut 1 line (4, 200 chars); head limit 3 lines for Grep ...]"},
		{"cut would not save", "a\nb\nc\nd\ne\n", "a\nb\nc\nd\ne\n"},
	})
}

func TestClipLines(t *testing.T) {
	long := strings.Repeat("x", 100)
	runCases(t, func(s string) string { return clipLines(s, 20) }, []tcase{
		{"short", "abc\ndef", "abc\ndef"},
		{"clip", "ok\n" + long + "\nok", "ok\n" + long[:20] + " [... ctxguard clipped 80 chars; line limit 20 ...]\nok"},
		{"crlf kept", long + "\r\nok", long[:20] + " [... ctxguard clipped 80 chars; line limit 20 ...]\r\nok"},
		{"just over kept whole", strings.Repeat("y", 40), strings.Repeat("y", 40)},
		{"runes", strings.Repeat("é", 100), strings.Repeat("é", 20) + " [... ctxguard clipped 80 chars; line limit 20 ...]"},
		{"last line", "a\n" + long, "a\n" + long[:20] + " [... ctxguard clipped 80 chars; line limit 20 ...]"},
	})
}

func TestCommas(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 12345: "12,345", 1234567: "1,234,567"} {
		if got := stub.Commas(n); got != want {
			t.Errorf("stub.Commas(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestLineGutter(t *testing.T) {
	for s, want := range map[string]bool{
		"     1→package main": true,
		"    12→x":            true,
		"1→x":                 true,
		"→x":                  false,
		"  a→b":               false,
		"diff":                false,
		"":                    false,
	} {
		if got := lineGutter(s); got != want {
			t.Errorf("lineGutter(%q) = %v", s, got)
		}
	}
}
