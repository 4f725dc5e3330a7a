package replay

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tools/transcript"
	"github.com/google/go-cmp/cmp"
)

// A tool result as Claude Code's Read returns it (line numbers and →),
// with lines of every kind the detector tells apart.
const readResult = "     1→func computeTotalPrice(items []Item) int {\n" + // distinctive (after the prefix)
	"     2→\treturn 0\n" + // too short
	"     3→#!/usr/bin/env python3 -u -W ignore::Warning\n" + // code boilerplate
	"     4→the user typed this very line as well\n" + // also in a user text block
	"     5→// totals are computed in cents, never floats\n" // distinctive

func q(s string) string { return string(jsonscan.AppendQuote(nil, s)) }

// quoteStream is two requests: the first asks, the second carries the
// Read result; answer 2 quotes it in several ways.
func quoteStream(answer2 string) []Request {
	user := `{"role":"user","content":` + q("look at prices\nthe user typed this very line as well") + `}`
	call := `{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/p.go"}}]}`
	result := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":` + q(readResult) + `}]}`
	return []Request{
		{Body: body(user), Answer: []byte(call)},
		{Body: body(user, call, result), Answer: []byte(answer2)},
	}
}

// answerText is an assistant message with one text block.
func answerText(text string) string {
	return `{"role":"assistant","content":[{"type":"text","text":` + q(text) + `}]}`
}

// stubber replaces the Read result in request 2 with a stub; keep puts
// the original in st under its id and names it in the stub.
func stubber(st store.Store, keep bool) DetailedRewriter {
	return func(b []byte, _ time.Time) (Outcome, error) {
		qr := []byte(q(readResult))
		if !bytes.Contains(b, qr) {
			return Outcome{Body: b}, nil
		}
		stub := "[cleared]"
		if keep {
			id := store.ID([]byte(readResult))
			if err := st.PutBlob(context.Background(), id, []byte(readResult)); err != nil {
				return Outcome{}, err
			}
			stub = "[ctxguard cleared Read result, 230 chars, blob " + id + "]"
		}
		return Outcome{Body: bytes.Replace(b, qr, []byte(q(stub)), 1)}, nil
	}
}

func TestQuoteRetention(t *testing.T) {
	// Quotes found: the inline code span (line 1) and the Markdown list
	// item (line 5). Not quotes: line 2 (short), line 3 (boilerplate),
	// line 4 (the user's text holds it), a line of no tool result.
	answer := answerText("The bug is in `func computeTotalPrice(items []Item) int {` here.\n" +
		"- // totals are computed in cents, never floats\n" +
		"\treturn 0\n" +
		"#!/usr/bin/env python3 -u -W ignore::Warning\n" +
		"> the user typed this very line as well\n" +
		"a line that no tool ever printed, long enough")
	identity := func(b []byte, _ time.Time) (Outcome, error) { return Outcome{Body: b}, nil }
	for _, tc := range []struct {
		name  string
		rw    func(store.Store) DetailedRewriter
		store bool
		want  QuoteStats
	}{
		{"unchanged", func(store.Store) DetailedRewriter { return identity }, true, QuoteStats{Quotes: 2, Kept: 2}},
		{"stub naming a blob", func(s store.Store) DetailedRewriter { return stubber(s, true) }, true, QuoteStats{Quotes: 2, Retrievable: 2, Cleared: 2, ClearedRetrievable: 2}},
		{"stub naming nothing", func(s store.Store) DetailedRewriter { return stubber(s, false) }, true, QuoteStats{Quotes: 2, Lost: 2, Cleared: 2}},
		{"blob but no store to look in", func(s store.Store) DetailedRewriter { return stubber(s, true) }, false, QuoteStats{Quotes: 2, Lost: 2, Cleared: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := store.NewMemory()
			opt := Options{}
			if tc.store {
				opt.Store = mem
			}
			st, err := Measure("q", quoteStream(answer), tc.rw(mem), opt)
			if err != nil {
				t.Fatal(err)
			}
			tot := st.Totals()
			if tot.Quotes != tc.want {
				t.Errorf("quotes %+v, want %+v", tot.Quotes, tc.want)
			}
			if st.Requests[0].Quotes.Quotes != 0 {
				t.Errorf("request 1 found quotes %+v with no tool result before it", st.Requests[0].Quotes)
			}
			if tc.want.Lost > 0 {
				if len(st.Lost) != 2 || st.Lost[0].Request != 1 || st.Lost[0].Line != "func computeTotalPrice(items []Item) int {" {
					t.Errorf("lost examples %+v", st.Lost)
				}
			} else if len(st.Lost) != 0 {
				t.Errorf("lost examples %+v", st.Lost)
			}
			want := Ratio(float64(tc.want.Kept+tc.want.Retrievable), 2)
			if tot.Quotes.Retention() != want {
				t.Errorf("retention %v, want %v", tot.Quotes.Retention(), want)
			}
		})
	}
}

// compactionStream is quoteStream with one more turn: the last answer
// quotes the Read result; compactor replaces the first three messages
// (the request, the Read call and its result) in the last request.
func compactionStream(quote string) []Request {
	s := quoteStream(answerText("Noted."))
	user, call, result := `{"role":"user","content":`+q("look at prices\nthe user typed this very line as well")+`}`, string(s[0].Answer), `{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":`+q(readResult)+`}]}`
	return append(s, Request{Body: body(user, call, result, answerText("Noted."), `{"role":"user","content":"now quote it"}`), Answer: []byte(answerText(quote))})
}

// compactor summarizes the first three messages of a five-message request
// in summary; keep puts the originals in st as a blob the note names.
func compactor(st store.Store, keep bool, summary string) DetailedRewriter {
	return func(b []byte, _ time.Time) (Outcome, error) {
		c, err := anthropic.Parse(b)
		if err != nil || len(c.Messages) != 5 {
			return Outcome{Body: b}, err
		}
		where := "The originals could not be kept."
		if keep {
			orig, err := c.AppendTranscript(nil, 0, 2)
			if err != nil {
				return Outcome{}, err
			}
			id := store.ID(orig)
			if err := st.PutBlob(context.Background(), id, orig); err != nil {
				return Outcome{}, err
			}
			where = "The original messages are kept word for word in blob " + id + "."
		}
		text := conversation.CompactionNote + "3 messages of this conversation into the summary below. " + where + "]\n\n<summary>\n" + summary + "\n</summary>"
		out := append([]byte(nil), b[:c.Messages[0].Span.Start]...)
		out = append(out, `{"role":"user","content":[{"type":"text","text":`+q(text)+`}]}`...)
		out = append(out, b[c.Messages[3].Span.Start-1:]...)
		return Outcome{Body: out, Compaction: &Compaction{Text: text, Messages: 3}}, nil
	}
}

// A quoted line whose tool result a compaction replaced counts as
// compacted, retrievable when the blob the note names holds it.
func TestQuoteCompacted(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep bool
		want QuoteStats
	}{
		{"blob named", true, QuoteStats{Quotes: 1, Retrievable: 1, Compacted: 1, CompactedRetrievable: 1}},
		{"no blob", false, QuoteStats{Quotes: 1, Lost: 1, Compacted: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := store.NewMemory()
			st, err := Measure("q", compactionStream("- // totals are computed in cents, never floats"), compactor(mem, tc.keep, "the user asked about prices"), Options{Store: mem})
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Totals().Quotes; got != tc.want {
				t.Errorf("quotes %+v, want %+v", got, tc.want)
			}
		})
	}
}

// An Edit's old_string quotes the file it read, line by line.
func TestQuoteInToolInput(t *testing.T) {
	edit := `{"role":"assistant","content":[{"type":"text","text":"Fixing it."},{"type":"tool_use","id":"t2","name":"Edit","input":{"file_path":"/p.go","old_string":` +
		q("func computeTotalPrice(items []Item) int {\n\treturn 0") + `,"new_string":"x"}}]}`
	st, err := Measure("q", quoteStream(edit), func(b []byte, _ time.Time) (Outcome, error) { return Outcome{Body: b}, nil }, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Totals().Quotes; got != (QuoteStats{Quotes: 1, Kept: 1}) {
		t.Errorf("quotes %+v, want 1 kept", got)
	}
}

// A line printed by QuoteBoilerplate tool results or more is a tool's
// fixed reply, not a quote; one printed by fewer is.
func TestQuoteBoilerplate(t *testing.T) {
	line := "Todos have been modified successfully, keep going"
	for _, n := range []int{QuoteBoilerplate - 1, QuoteBoilerplate} {
		msgs := []string{`{"role":"user","content":"go"}`}
		for i := range n {
			msgs = append(msgs,
				fmt.Sprintf(`{"role":"assistant","content":[{"type":"tool_use","id":"t%d","name":"TodoWrite","input":{}}]}`, i),
				fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d","content":%s}]}`, i, q(line)))
		}
		c, err := anthropic.Parse(body(msgs...))
		if err != nil {
			t.Fatal(err)
		}
		tr := newQuoteTracker(nil)
		tr.observe(c, true)
		got := tr.quoted([]byte(answerText(line)))
		if want := n < QuoteBoilerplate; (len(got) == 1) != want {
			t.Errorf("line in %d results: quoted %v, want quote %v", n, got, want)
		}
	}
}

// A compaction restarts the history: lines of results before it are no
// longer quotable.
func TestQuoteReset(t *testing.T) {
	stream := quoteStream(answerText("- // totals are computed in cents, never floats"))
	stream = append(stream, Request{
		Body:   body(`{"role":"user","content":"summary of what happened so far, nothing else"}`),
		Reset:  true,
		Answer: []byte(answerText("- // totals are computed in cents, never floats")),
	})
	st, err := Measure("q", stream, func(b []byte, _ time.Time) (Outcome, error) { return Outcome{Body: b}, nil }, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Requests[1].Quotes.Quotes != 1 || st.Requests[2].Quotes.Quotes != 0 {
		t.Errorf("quotes before/after the reset: %+v, %+v", st.Requests[1].Quotes, st.Requests[2].Quotes)
	}
}

func TestQuoteHelpers(t *testing.T) {
	for in, want := range map[string]string{
		"     12→\tfoo := bar()": "foo := bar()",
		"12\tcat -n style line":  "cat -n style line",
		"  plain  ":              "plain",
		"2024 was a year":        "2024 was a year",
	} {
		if got := normLine(in); got != want {
			t.Errorf("normLine(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]bool{
		"short line":                              false,
		"1234567890 1234567890 1234567890":        false, // too few letters
		"a perfectly ordinary sentence here":      true,
		"import \"github.com/ctxguard/ctxguard\"": false,
		"from collections import OrderedDict":     false,
		"#!/usr/bin/env python3 with options":     false,
	} {
		if got := distinctive(in); got != want {
			t.Errorf("distinctive(%q) = %v, want %v", in, got, want)
		}
	}
	text := "see blob abcdefghijklm] and GET http://127.0.0.1:8787/ctxguard/v1/blobs/nopqrstuvwxyz, blob abcdefghijklm again, blob <blob>"
	if got := strings.Join(blobIDs(text), ","); got != "abcdefghijklm,nopqrstuvwxyz" {
		t.Errorf("blobIDs = %s", got)
	}
	if got := string(decodedStrings(nil, []byte(`{"a":"x\ny","b":["\u00e9"],"c":1}`))); got != "a\nx\ny\nb\né\nc\n" {
		t.Errorf("decodedStrings = %q", got)
	}
	if got := clip("héllo world", 2); got != "h…" {
		t.Errorf("clip = %q", got)
	}
}

// A Gemini model content reads as an assistant message: text parts and
// function calls' args.
func TestGeminiAnswer(t *testing.T) {
	parts := [][]byte{
		[]byte(`{"text":"Line one"}`),
		[]byte(`{"functionCall":{"id":"c1","args":{"command":"cat a"},"name":"run_shell_command"},"thoughtSignature":"x"}`),
		[]byte(`{"inlineData":{"mimeType":"image/png","data":"iVBO"}}`),
		[]byte(`not json`),
	}
	want := []string{"Line one", "command\ncat a\n"}
	if diff := cmp.Diff(want, answerTexts(geminiAnswer(parts))); diff != "" {
		t.Errorf("answer texts (-want +got):\n%s", diff)
	}
	if geminiAnswer(nil) == nil {
		t.Error("an empty content is no answer")
	}
}

// A Codex turn's output items read as one assistant message: message
// text, reasoning summaries, tool arguments and patches.
func TestCodexAnswer(t *testing.T) {
	items := []transcript.CodexItem{
		{Type: "reasoning", Raw: []byte(`{"type":"reasoning","summary":[{"type":"summary_text","text":"**Planning**"}],"encrypted_content":"gAAA"}`)},
		{Type: "message", Raw: []byte(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Line one"}]}`)},
		{Type: "function_call", Raw: []byte(`{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"cat a\"]}","call_id":"c1"}`)},
		{Type: "custom_tool_call", Raw: []byte(`{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch\n context line\n","call_id":"c2"}`)},
		{Type: "web_search_call", Raw: []byte(`{"type":"web_search_call","status":"completed"}`)},
		{Type: "message", Raw: []byte(`not json`)},
	}
	got := answerTexts(codexAnswer(items))
	want := []string{"**Planning**", "Line one", "command\nbash\n-lc\ncat a\n", "*** Begin Patch\n context line\n\n"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answer texts (-want +got):\n%s", diff)
	}
	if got := answerTexts(codexAnswer(nil)); len(got) != 0 {
		t.Errorf("empty turn: %q", got)
	}
	if codexAnswer(nil) == nil {
		t.Error("an empty turn is no answer: quote retention would miss its history's restart")
	}
}
