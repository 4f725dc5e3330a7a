package compress

import (
	"github.com/ctxguard/ctxguard/internal/shareddata"
	"github.com/ctxguard/ctxguard/internal/stub"

	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/splice"
	"github.com/ctxguard/ctxguard/tools/validate"
)

// ruleInputs holds, per rule, a tool name and a result the rule shortens
// under Defaults, and how to switch the rule off.
func ruleInputs() []struct {
	rule string
	tool string
	in   string
	off  func(*Config)
} {
	longLine := strings.Repeat("m", 3000)
	var grep strings.Builder
	for i := 0; i < 400; i++ {
		grep.WriteString("src/file.go:" + stub.Commas(i) + ": match\n")
	}
	big := strings.Repeat("log line of some output\n", 10_000) // 240K chars
	var snap strings.Builder
	snap.WriteString("- Page Snapshot:\n")
	for i := 0; snap.Len() < 30_000; i++ {
		snap.WriteString(`  - button "B` + stub.Commas(i) + `" [ref=e` + stub.Commas(i) + "]\n")
	}
	return []struct {
		rule string
		tool string
		in   string
		off  func(*Config)
	}{
		{"ansi", "Bash", "\x1b[32mPASS\x1b[0m ok", func(c *Config) { c.ANSI.Enabled = false }},
		{"carriage_returns", "Bash", "10%\r20%\r100%\ndone", func(c *Config) { c.CarriageReturns.Enabled = false }},
		{"base64", "Bash", "data:image/png;base64," + b64([]byte("\x89PNG\r\n\x1a\n"), 500), func(c *Config) { c.Base64.Enabled = false }},
		{"base64 bare", "mcp__x__screenshot", `{"png":"` + b64([]byte("\x89PNG\r\n\x1a\n"), 500) + `"}`, func(c *Config) { c.Base64.Bare = false }},
		{"html", "Bash", htmlPage(20), func(c *Config) { c.HTML.Enabled = false }},
		{"snapshot", "mcp__playwright__browser_snapshot", snap.String(), func(c *Config) { c.Snapshot.Enabled = false }},
		{"line_clip", "Grep", "a.min.js:1:" + longLine, func(c *Config) { c.LineClip.Enabled = false }},
		{"head_lines", "Grep", grep.String(), func(c *Config) { c.HeadLines.Enabled = false }},
		{"cap", "Bash", big, func(c *Config) { c.Cap.Enabled = false }},
		{"cap per tool", "WebFetch", strings.Repeat("web page line\n", 10_000), func(c *Config) { c.Tools[2].MaxChars = ptr(0) }},
		{"whole pass", "Bash", "\x1b[32mPASS\x1b[0m ok", func(c *Config) { c.Enabled = false }},
		{"tool skip", "Bash", "\x1b[32mPASS\x1b[0m ok", func(c *Config) { c.Tools = append(c.Tools, ToolRule{Match: "Ba*", Skip: true}) }},
		{"tool switch", "Bash", "\x1b[32mPASS\x1b[0m ok", func(c *Config) { c.Tools = append(c.Tools, ToolRule{Match: "Bash", ANSI: ptr(false)}) }},
	}
}

// TestRulesAndSwitches checks each rule fires through Run (with its edit
// equal to Text's output) and that its switch turns it off.
func TestRulesAndSwitches(t *testing.T) {
	on := mustNew(t, Defaults())
	for _, tc := range ruleInputs() {
		t.Run(tc.rule, func(t *testing.T) {
			body := reqBody(t, call{tool: tc.tool, content: tc.in})
			edits, out := runPass(t, on, body)
			if len(edits) != 1 {
				t.Fatalf("%d edits with the rule on, want 1", len(edits))
			}
			got := decodedResult(t, out)
			if diff := cmp.Diff(on.Text(tc.tool, tc.in), got); diff != "" {
				t.Errorf("Run and Text disagree (-Text +Run):\n%s", diff)
			}
			if len(got) >= len(tc.in) {
				t.Errorf("not shorter: %d -> %d", len(tc.in), len(got))
			}
			cfg := Defaults()
			tc.off(&cfg)
			off := mustNew(t, cfg)
			if edits, _ := runPass(t, off, body); len(edits) != 0 && tc.rule != "base64 bare" {
				t.Errorf("%d edits with the rule off", len(edits))
			}
			if tc.rule == "base64 bare" {
				// Other rules may still apply; this one must not.
				if got := off.Text(tc.tool, tc.in); strings.Contains(got, "ctxguard") {
					t.Errorf("rule applied while off: %.200q", got)
				}
			}
		})
	}
}

// decodedResult returns the decoded text of the only tool result in body.
func decodedResult(t *testing.T, body []byte) string {
	t.Helper()
	c := parse(t, body)
	texts, _ := textSpans(c)
	if len(texts) != 1 {
		t.Fatalf("%d tool result texts", len(texts))
	}
	return c.String(texts[0])
}

// mixedBody is a request with one result per rule and some that no rule
// touches, string and array content, unusual escapes included.
func mixedBody(t testing.TB) []byte {
	var calls []call
	for _, r := range ruleInputs() {
		calls = append(calls, call{tool: r.tool, content: r.in})
	}
	calls = append(calls,
		call{tool: "Bash", content: "total 0\ndrwxr-xr-x  2 root root 4096 .\n"},
		call{tool: "Read", content: "     1→<html>\x1b[0m\n     2→" + strings.Repeat("x", 900) + "\n"},
		call{tool: "Task", content: []any{
			map[string]any{"type": "text", "text": "report \x1b[1mbold\x1b[0m"},
			map[string]any{"type": "text", "text": "untouched"},
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": b64([]byte("\x89PNG\r\n\x1a\n"), 300)}},
		}},
		call{tool: "Bash", content: "\x1b[31mred\x1b[0m", isError: true},
	)
	return reqBody(t, calls...)
}

// TestEdits checks every edit replaces exactly one tool result text span
// with the JSON quoting of Text's output, is shorter, and that Run is
// deterministic.
func TestEdits(t *testing.T) {
	p := mustNew(t, Defaults())
	body := mixedBody(t)
	c := parse(t, body)
	texts, _ := textSpans(c)
	isText := map[jsonscan.Span]bool{}
	for _, s := range texts {
		isText[s] = true
	}
	edits, out := runPass(t, p, body)
	if len(edits) < 12 {
		t.Errorf("only %d edits", len(edits))
	}
	for _, e := range edits {
		if !isText[e.Span] {
			t.Errorf("edit %v is not a Part.Text span", e.Span)
			continue
		}
		if len(e.Repl) >= e.Span.Len() {
			t.Errorf("edit %v grows %d -> %d bytes", e.Span, e.Span.Len(), len(e.Repl))
		}
		got, err := jsonscan.Unquote(e.Repl)
		if err != nil {
			t.Fatalf("repl is not a JSON string: %v", err)
		}
		want := jsonscan.AppendQuote(nil, got)
		if !bytes.Equal(want, e.Repl) {
			t.Error("repl is not AppendQuote's output")
		}
	}
	for i := 0; i < 3; i++ {
		_, again := runPass(t, mustNew(t, Defaults()), body)
		if !bytes.Equal(out, again) {
			t.Fatal("second run gave different bytes")
		}
	}
	// Rewriting the rewritten body changes nothing more: later requests
	// that carry the rewritten history are stable.
	_, twice := runPass(t, p, out)
	if !bytes.Equal(out, twice) {
		t.Error("rewrite is not idempotent")
	}
}

// TestByteFidelity: with every rule off the body passes through
// byte-identical; with rules on, only edited spans change.
func TestByteFidelity(t *testing.T) {
	body := mixedBody(t)
	for name, cfg := range map[string]Config{"all rules off": allOff(), "pass off": func() Config { c := Defaults(); c.Enabled = false; return c }()} {
		t.Run(name, func(t *testing.T) {
			p := mustNew(t, cfg)
			edits, _ := runPass(t, p, body)
			if len(edits) != 0 {
				t.Fatalf("%d edits", len(edits))
			}
			res := pipeline.New(nil, p).Run(&pipeline.Request{Conv: parse(t, body)})
			if res.Err != nil || res.Changed {
				t.Fatalf("err %v changed %v", res.Err, res.Changed)
			}
			if sha256.Sum256(res.Body) != sha256.Sum256(body) {
				t.Error("body changed")
			}
		})
	}
	t.Run("outside edits", func(t *testing.T) {
		cfg := Defaults()
		cfg.Images.Replace = true
		edits, out := runPass(t, mustNew(t, cfg), body)
		// Walk the original and the output together: every byte outside
		// an edit is the same, in the same order.
		at, o := 0, 0
		for _, e := range edits {
			n := e.Span.Start - at
			if !bytes.Equal(body[at:e.Span.Start], out[o:o+n]) {
				t.Fatalf("bytes before edit %v changed", e.Span)
			}
			o += n + len(e.Repl)
			at = e.Span.End
		}
		if !bytes.Equal(body[at:], out[o:]) {
			t.Fatal("bytes after the last edit changed")
		}
	})
}

func TestUnusualEscapes(t *testing.T) {
	p := mustNew(t, Defaults())
	// A literal as a client may write it: \/ and \u00e9 escapes, an
	// escaped backslash before n, and \u001b for ESC.
	lit := `"caf\u00e9 \/usr\/bin C:\\new \u001b[1mbold\u001b[0m \ud83d\ude00"`
	body := []byte(`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"go"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}},{"type":"tool_use","id":"t2","name":"Bash","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":` + lit + `},` +
		`{"type":"tool_result","tool_use_id":"t2","content":"caf\u00e9 \/x"}]}]}`)
	edits, out := runPass(t, p, body)
	if len(edits) != 1 {
		t.Fatalf("%d edits, want 1 (only the ANSI result)", len(edits))
	}
	c := parse(t, out)
	texts, _ := textSpans(c)
	if got, want := c.String(texts[0]), "café /usr/bin C:\\new bold 😀"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := string(c.Bytes(texts[1])); got != `"caf\u00e9 \/x"` {
		t.Errorf("untouched result re-encoded: %s", got)
	}
}

// TestEscapeBeforeSignature: a bare base64 image right after a \u escape
// (here é) starts a run although the raw byte before it is a hex digit.
func TestEscapeBeforeSignature(t *testing.T) {
	p := mustNew(t, Defaults())
	png := b64([]byte("\x89PNG\r\n\x1a\n"), 400)
	for _, lit := range []string{`"caf\u00e9` + png + `"`, `"x\n` + png + `"`, `"x\t` + png + `"`, `"\ud83d\ude00` + png + `"`} {
		body := []byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"go"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":` + lit + `}]}]}`)
		c := parse(t, body)
		want := p.Text("Bash", c.String(c.Messages[2].Blocks[0].Parts[0].Text))
		_, out := runPass(t, p, body)
		if got := decodedResult(t, out); got != want || !strings.Contains(got, "removed base64 image/png") {
			t.Errorf("%.20s...: got %.80q, want %.80q", lit, got, want)
		}
	}
}

type panicPass struct{}

func (panicPass) Name() string                                 { return "boom" }
func (panicPass) Run(*pipeline.Request) ([]splice.Edit, error) { panic("boom") }

func TestFailOpen(t *testing.T) {
	p := mustNew(t, Defaults())
	body := mixedBody(t)
	t.Run("later pass panics", func(t *testing.T) {
		pl := pipeline.New(nil, p, panicPass{})
		res := pl.Run(&pipeline.Request{Conv: parse(t, body)})
		if res.Err == nil || res.FailedIn != "boom" || !bytes.Equal(res.Body, body) {
			t.Fatalf("err %v failed in %q, body kept %v", res.Err, res.FailedIn, bytes.Equal(res.Body, body))
		}
		if err := validate.Rewrite(body, res.Body, validate.Options{}); err != nil {
			t.Error(err)
		}
	})
	t.Run("compress errors", func(t *testing.T) {
		// A conversation whose text span is not a string literal (a
		// corrupted adapter result) makes Run return an error.
		c := parse(t, body)
		msgs := append([]conversation.Message(nil), c.Messages...)
		for mi := range msgs {
			blocks := append([]conversation.Block(nil), msgs[mi].Blocks...)
			for bi := range blocks {
				if blocks[bi].Kind == conversation.ToolResult && len(blocks[bi].Parts) > 0 {
					parts := append([]conversation.Part(nil), blocks[bi].Parts...)
					parts[0].Text = jsonscan.Span{Start: parts[0].Text.Start + 1, End: parts[0].Text.End}
					blocks[bi].Parts = parts
				}
			}
			msgs[mi].Blocks = blocks
		}
		bad := *c
		bad.Messages = msgs
		pl := pipeline.New(nil, p)
		res := pl.Run(&pipeline.Request{Conv: &bad})
		if res.Err == nil || res.FailedIn != Name || !bytes.Equal(res.Body, body) {
			t.Fatalf("err %v failed in %q", res.Err, res.FailedIn)
		}
		var pe *pipeline.PassError
		if !errors.As(res.Err, &pe) {
			t.Errorf("error %T", res.Err)
		}
	})
	t.Run("pipeline success validates", func(t *testing.T) {
		res := pipeline.New(nil, p).Run(&pipeline.Request{Conv: parse(t, body)})
		if res.Err != nil || !res.Changed || len(res.Body) >= len(body) {
			t.Fatalf("err %v changed %v", res.Err, res.Changed)
		}
		if err := validate.Rewrite(body, res.Body, validate.Options{}); err != nil {
			t.Error(err)
		}
	})
}

// editFirst is a pass that rewrites the first tool result text.
type editFirst struct{}

func (editFirst) Name() string { return "first" }
func (editFirst) Run(r *pipeline.Request) ([]splice.Edit, error) {
	texts, _ := textSpans(r.Conv)
	return []splice.Edit{{Span: texts[0], Repl: []byte(`"replaced"`)}}, nil
}

func TestLeavesEarlierEdits(t *testing.T) {
	body := mixedBody(t)
	res := pipeline.New(nil, editFirst{}, mustNew(t, Defaults())).Run(&pipeline.Request{Conv: parse(t, body)})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	c := parse(t, res.Body)
	texts, _ := textSpans(c)
	if got := c.String(texts[0]); got != "replaced" {
		t.Errorf("earlier pass's edit replaced: %q", got)
	}
}

func TestExactAndPersisted(t *testing.T) {
	p := mustNew(t, Defaults())
	read := readFixture(t, "read-numbered.txt")
	ansiHTML := "\x1b[1m" + htmlPage(20)
	cases := []struct {
		name, tool, in string
	}{
		{"real Read output", "Read", read},
		{"Read of HTML with ANSI", "Read", ansiHTML},
		{"Edit result", "Edit", readFixture(t, "edit.txt")},
		{"gutter from another tool", "Task", "     1→\x1b[1m" + htmlPage(20)},
		{"MCP file read", "mcp__filesystem__read_file", ansiHTML},
		{"persisted output", "Bash", readFixture(t, "bash-persisted.txt") + "\x1b[1m" + strings.Repeat("x", 300_000)},
		{"small html", "Bash", readFixture(t, "bash-html.txt")},
		{"crlf only", "Grep", readFixture(t, "grep-crlf.txt")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			edits, _ := runPass(t, p, reqBody(t, call{tool: tc.tool, content: tc.in}))
			if len(edits) != 0 {
				t.Errorf("%d edits", len(edits))
			}
		})
	}
	t.Run("exact tools still capped", func(t *testing.T) {
		in := "     1→" + strings.Repeat("line\n", 50_000)
		edits, out := runPass(t, p, reqBody(t, call{tool: "Read", content: in}))
		if len(edits) != 1 || !strings.Contains(decodedResult(t, out), "; cap 200,000 chars for Read ...]") {
			t.Errorf("%d edits", len(edits))
		}
	})
}

func TestImages(t *testing.T) {
	img := map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": b64([]byte("\x89PNG\r\n\x1a\n"), 3000)}}
	imgCC := map[string]any{"type": "image", "source": img["source"], "cache_control": map[string]any{"type": "ephemeral"}}
	body := reqBody(t,
		call{tool: "mcp__playwright__browser_take_screenshot", content: []any{map[string]any{"type": "text", "text": "Took a screenshot"}, img}},
		call{tool: "Read", content: []any{imgCC}},
	)
	t.Run("off by default", func(t *testing.T) {
		if edits, _ := runPass(t, mustNew(t, Defaults()), body); len(edits) != 0 {
			t.Errorf("%d edits", len(edits))
		}
	})
	t.Run("replace", func(t *testing.T) {
		cfg := Defaults()
		cfg.Images.Replace = true
		edits, out := runPass(t, mustNew(t, cfg), body)
		if len(edits) != 2 {
			t.Fatalf("%d edits", len(edits))
		}
		c := parse(t, out)
		if c.CacheMarkers != parse(t, body).CacheMarkers {
			t.Errorf("cache markers %d -> %d", parse(t, body).CacheMarkers, c.CacheMarkers)
		}
		texts, images := textSpans(c)
		if len(images) != 0 || len(texts) != 3 {
			t.Fatalf("%d texts %d images", len(texts), len(images))
		}
		if got, want := c.String(texts[1]), "[ctxguard removed an image: image/png, 3,008 bytes]"; got != want {
			t.Errorf("placeholder %q, want %q", got, want)
		}
		if !bytes.Contains(out, []byte(`"text":"[ctxguard removed an image: image/png, 3,008 bytes]","cache_control":{"type":"ephemeral"}}`)) {
			t.Error("cache_control not carried over")
		}
	})
	t.Run("per tool", func(t *testing.T) {
		cfg := Defaults()
		cfg.Tools = append(cfg.Tools, ToolRule{Match: "mcp__playwright__*", Images: ptr(true)})
		edits, _ := runPass(t, mustNew(t, cfg), body)
		if len(edits) != 1 {
			t.Errorf("%d edits", len(edits))
		}
	})
}

func TestConcurrentUse(t *testing.T) {
	p := mustNew(t, Defaults())
	body := mixedBody(t)
	_, want := runPass(t, p, body)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				_, got := runPass(t, p, body)
				if !bytes.Equal(got, want) {
					t.Error("concurrent run differs")
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestName(t *testing.T) {
	if got := mustNew(t, Defaults()).Name(); got != "compress" {
		t.Errorf("Name() = %q", got)
	}
}

func TestHTMLMemo(t *testing.T) {
	cached := mustNew(t, Defaults())
	cfg := Defaults()
	cfg.HTML.CacheBytes = 0
	uncached := mustNew(t, cfg)
	if uncached.memo != nil {
		t.Fatal("memo with cache_bytes 0")
	}
	pages := []string{htmlPage(10), htmlPage(20), htmlPage(30)}
	for round := 0; round < 2; round++ {
		for _, pg := range pages {
			a, b := cached.Text("Bash", pg), uncached.Text("Bash", pg)
			if a != b || a == pg {
				t.Fatalf("round %d: memo changed the output or nothing converted", round)
			}
		}
	}
	if got := len(cached.memo.m); got != len(pages) {
		t.Errorf("%d memo entries, want %d", got, len(pages))
	}
	t.Run("bounded", func(t *testing.T) {
		m := newHTMLMemo(4000)
		for i := 0; i < 50; i++ {
			m.put(memoKey(stub.Commas(i)), strings.Repeat("x", 500))
		}
		if m.size > 4000 || len(m.m) != m.ll.Len() || len(m.m) == 0 {
			t.Errorf("size %d entries %d/%d", m.size, len(m.m), m.ll.Len())
		}
		if _, ok := m.get(memoKey(stub.Commas(49))); !ok {
			t.Error("newest entry evicted")
		}
		if _, ok := m.get(memoKey(stub.Commas(0))); ok {
			t.Error("oldest entry kept")
		}
		m.put(memoKey("big"), strings.Repeat("x", 2000)) // over a quarter of the limit
		if _, ok := m.get(memoKey("big")); ok {
			t.Error("oversized entry kept")
		}
	})
}

// TestSticky replays a growing session: every request repeats the rewrite
// of each earlier result byte for byte, so the rewritten history is a
// stable prefix for prompt caching.
func TestSticky(t *testing.T) {
	p := mustNew(t, Defaults())
	var calls []call
	for _, r := range ruleInputs() {
		calls = append(calls, call{tool: r.tool, content: r.in})
	}
	var prev [][]byte
	for k := 1; k <= len(calls); k++ {
		_, out := runPass(t, p, reqBody(t, calls[:k]...))
		c := parse(t, out)
		texts, _ := textSpans(c)
		for i := range prev {
			if !bytes.Equal(prev[i], c.Bytes(texts[i])) {
				t.Fatalf("request %d rewrote result %d differently", k, i)
			}
		}
		prev = prev[:0]
		for _, s := range texts {
			prev = append(prev, append([]byte(nil), c.Bytes(s)...))
		}
	}
}

// TestRealSessions replays the tool results of every real Claude Code
// transcript in the shared data folder (in a clone without it, the
// repository's subset) through the pass: valid rewrites (runPass checks
// validate.Rewrite), Run agreeing with Text on every result, and the
// bytes saved.
func TestRealSessions(t *testing.T) {
	dir, _ := shareddata.Sessions(t, "claude-code")
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(files) == 0 {
		t.Fatalf("no sessions in %s", dir)
	}
	p := mustNew(t, Defaults())
	var total, saved, edited int
	for _, f := range files {
		calls := sessionCalls(t, f)
		if len(calls) == 0 {
			continue
		}
		body := reqBody(t, calls...)
		edits, out := runPass(t, p, body)
		total += len(body)
		saved += len(body) - len(out)
		edited += len(edits)
		c := parse(t, body)
		for _, m := range c.Messages {
			for bi := range m.Blocks {
				b := &m.Blocks[bi]
				for _, pt := range b.Parts {
					if pt.Kind != conversation.Text {
						continue
					}
					s := c.String(pt.Text)
					want := jsonscan.AppendQuote(nil, p.Text(c.ToolName(b), s))
					e, ok, err := p.textEdit(body, pt.Text, ptrTo(p.resolve(c.ToolName(b))), c.ToolName(b))
					if err != nil {
						t.Fatal(err)
					}
					if changed := len(want) < pt.Text.Len() && p.Text(c.ToolName(b), s) != s; changed != ok || ok && !bytes.Equal(e.Repl, want) {
						t.Errorf("%s: Run and Text disagree on a %s result", filepath.Base(f), c.ToolName(b))
					}
				}
			}
		}
	}
	t.Logf("%d sessions, %d bytes, %d edits, %d bytes saved (%.1f%%)", len(files), total, edited, saved, 100*float64(saved)/float64(total))
	if edited == 0 {
		t.Error("no tool result was rewritten: the test checks too little")
	}
}

func ptrTo[T any](v T) *T { return &v }

// sessionCalls reads the tool results of one transcript, skipping the
// lines that are not JSON (redacted by hand).
func sessionCalls(tb testing.TB, path string) []call {
	f, err := os.Open(path)
	if err != nil {
		tb.Fatalf("no transcript: %v", err)
	}
	defer f.Close()
	names := map[string]string{}
	var calls []call
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var rec struct {
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		var blocks []struct {
			Type      string          `json:"type"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || json.Unmarshal(rec.Message.Content, &blocks) != nil {
			continue
		}
		for _, bl := range blocks {
			switch bl.Type {
			case "tool_use":
				names[bl.ID] = bl.Name
			case "tool_result":
				var content any
				if json.Unmarshal(bl.Content, &content) == nil && content != nil {
					calls = append(calls, call{tool: names[bl.ToolUseID], content: content})
				}
			}
		}
	}
	return calls
}
