package compact

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

func parse(t testing.TB, body string) *conversation.Conversation {
	t.Helper()
	c, err := anthropic.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// body is an Anthropic request holding msgs.
func body(msgs ...string) string {
	return `{"model":"claude-sonnet-4-5","messages":[` + strings.Join(msgs, ",") + `]}`
}

// Message builders for tests.
func user(text string) string { return `{"role":"user","content":` + q(text) + `}` }
func assistant(text string) string {
	return `{"role":"assistant","content":[{"type":"text","text":` + q(text) + `}]}`
}
func call(id, name, input string) string {
	return `{"role":"assistant","content":[{"type":"tool_use","id":"` + id + `","name":"` + name + `","input":` + input + `}]}`
}
func result(id, content string, isError bool) string {
	return `{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id + `","is_error":` + strconv.FormatBool(isError) + `,"content":` + q(content) + `}]}`
}
func bash(id, cmd string) string { return call(id, "Bash", `{"command":`+q(cmd)+`}`) }

// newTestPass is a pass over a memory store, for records.
func newTestPass(t testing.TB) *Pass {
	t.Helper()
	p, err := New(Defaults(), Options{Blobs: &store.Blobs{Store: store.NewMemory()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// foldSpans summarizes c's messages in the spans that end at each of
// ends, each compaction folding in the record before it as the store
// hands it back (JSON). prose, when not nil, gives a model's answer per
// span ("" for the extractive summary).
func foldSpans(t testing.TB, p *Pass, c *conversation.Conversation, ends []int, budget int, prose func(i int) string) []*record {
	t.Helper()
	var recs []*record
	var prev *record
	from := 0
	for i, end := range ends {
		in := &spanInput{prev: previousFacts(prev), cur: scanSpan(c, from, end, 0), from: from, to: end, count: end, budget: budget}
		if prev != nil {
			in.prevSummary = prev.Summary
		}
		var err error
		if in.transcript, err = c.AppendTranscript(nil, from, end-1); err != nil {
			t.Fatal(err)
		}
		text := ""
		if prose != nil {
			text = prose(i)
		}
		rec := p.newRecord(context.Background(), in, text, "", 0, 0)
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		var back record
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &back)
		prev, from = &back, end
	}
	return recs
}

// session is a Claude Code-shaped history touching every section.
func session() string {
	todo := `{"todos":[{"content":"write the parser","status":"completed"},{"content":"add tests","status":"in_progress"}]}`
	return body(
		`{"role":"user","content":[{"type":"text","text":"<system-reminder>ignore me</system-reminder>"},{"type":"text","text":"Please fix the failing parser test in parse.go"}]}`,
		`{"role":"assistant","content":[{"type":"text","text":"Looking at the parser."},{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/src/parse.go"}}]}`,
		result("t1", "package parse", false),
		bash("t2", "go test ./..."),
		result("t2", "--- FAIL: TestParse\nparse_test.go:12: got 1, want 2\nFAIL\tparse 0.01s", true),
		`{"role":"assistant","content":[{"type":"tool_use","id":"t3","name":"Edit","input":{"file_path":"/src/parse.go","old_string":"a","new_string":"b"}},{"type":"tool_use","id":"t4","name":"Write","input":{"file_path":"/src/parse_extra.go","content":"package parse"}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t3","content":"ok"},{"type":"tool_result","tool_use_id":"t4","content":"ok"}]}`,
		call("t5", "TodoWrite", todo),
		result("t5", "ok", false),
		call("t6", "Grep", `{"pattern":"func Parse\\(","path":"/src","glob":"*.go"}`),
		result("t6", "/src/parse.go", false),
		assistant("The parser is fixed; tests next."),
		user("Also make the error message clearer."),
		assistant("Will do."),
	)
}

func TestExtractSections(t *testing.T) {
	c := parse(t, session())
	p := newTestPass(t)
	got := foldSpans(t, p, c, []int{len(c.Messages)}, 5000, nil)[0].Summary
	for _, want := range []string{
		"[1] Please fix the failing parser test in parse.go",
		"[2] Also make the error message clearer.",
		"Created: /src/parse_extra.go",
		"Edited: /src/parse.go",
		"Read: /src/parse.go",
		"Searched: Grep `func Parse\\(` in /src (*.go)",
		"- `go test ./...`: --- FAIL: TestParse | parse_test.go:12: got 1, want 2 | FAIL parse 0.01s",
		"[completed] write the parser",
		"[in_progress] add tests",
		"The parser is fixed; tests next.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "ignore me") {
		t.Error("a system reminder was taken for a user request")
	}
	if again := foldSpans(t, p, c, []int{len(c.Messages)}, 5000, nil)[0].Summary; again != got {
		t.Error("not deterministic")
	}
}

// TestLongCommand: a long command of several lines (a heredoc) shows its
// first line and how much more is in which blob; a long one-line command
// shows whole.
func TestLongCommand(t *testing.T) {
	heredoc := "cat > notes.md <<'EOF'\n" + strings.Repeat("a line of the notes\n", 40) + "EOF"
	long := "ssh host '" + strings.Repeat("echo step; ", 30) + "'"
	c := parse(t, body(user("write the notes"), bash("t1", heredoc), result("t1", "", false), bash("t2", long), result("t2", "Exit code 1\nno route", true), assistant("ok")))
	rec := foldSpans(t, newTestPass(t), c, []int{len(c.Messages)}, 5000, nil)[0]
	for _, want := range []string{
		"\ncat > notes.md <<'EOF' [… " + strconv.Itoa(len(heredoc)-len("cat > notes.md <<'EOF'")) + " more bytes, in blob " + rec.Blobs[0] + " …]\n",
		"- `" + oneLine(long) + "` (exit 1): no route",
	} {
		if !strings.Contains(rec.Summary, want) {
			t.Errorf("missing %q in:\n%s", want, rec.Summary)
		}
	}
}

// TestFoldKeepsMarkdown (defect 1): a later compaction folds the earlier
// one's record, not its text, so a request and an assistant message full
// of Markdown headings and rules are kept whole. Splitting the earlier
// summary on "\n\n## " and "\n---\n" cut both at their first heading.
func TestFoldKeepsMarkdown(t *testing.T) {
	request := "Audit the proxy.\n\n## Scope\nonly pass/clear\n---\n## Output\na report with a table\n\n| a | b |\n|---|---|\n| 1 | 2 |"
	report := "# Audit report\n\n## Findings\n1. the stub is too long\n\n---\n\n## Plan\n- shorten `stubText` in clear.go\n- rerun `go test ./pass/clear`"
	c := parse(t, body(
		user(request),
		assistant(report),
		bash("t1", "ls"),
		result("t1", "a\nb", false),
		user("go on"),
		bash("t2", "git status"),
		result("t2", "clean", false),
		user("and then?"),
		bash("t3", "git log -1"),
		result("t3", "commit 1", false),
		assistant("ok"),
	))
	recs := foldSpans(t, newTestPass(t), c, []int{4, 7, 10}, 5000, nil)
	last := recs[len(recs)-1].Summary
	for _, want := range []string{"[1] " + request, "[2] go on", "[3] and then?", report} {
		if !strings.Contains(last, want) {
			t.Errorf("the third fold lost %q:\n%s", want, last)
		}
	}
}

// TestFitOrder (defect 2): over budget, the oldest successful commands
// collapse to a count naming their blobs, while every request, every
// failure with its reason, every file and the latest assistant text stay
// whole.
func TestFitOrder(t *testing.T) {
	latest := "Summary of the work:" + strings.Repeat(" the `retryPolicy` in backoff.go now caps at 30s;", 40)
	msgs := []string{user("THE FIRST REQUEST: make the retries bounded")}
	for i := range 120 {
		id := "c" + strconv.Itoa(i)
		msgs = append(msgs, assistant("step "+strconv.Itoa(i)+": "+strings.Repeat("thinking aloud ", 20)), bash(id, "make step-"+strconv.Itoa(i)+" && echo done"), result(id, "done", false))
	}
	msgs = append(msgs, call("r1", "Read", `{"file_path":"/src/backoff.go"}`), result("r1", "package backoff", false),
		bash("f1", "go test ./backoff"), result("f1", "ok\nrunning\n--- FAIL: TestCap (0.00s)\nbackoff_test.go:9: waited 31s\nFAIL", true),
		user("THE LAST REQUEST: and log each retry"), assistant(latest))
	c := parse(t, body(msgs...))
	budget := 1500
	rec := foldSpans(t, newTestPass(t), c, []int{len(c.Messages)}, budget, nil)[0]
	got := rec.Summary
	if n := tokens.EstimateText(got); n > budget {
		t.Fatalf("%d tokens for a budget of %d", n, budget)
	}
	for _, want := range []string{"THE FIRST REQUEST: make the retries bounded", "THE LAST REQUEST: and log each retry", latest,
		"Read: /src/backoff.go", "- `go test ./backoff`: --- FAIL: TestCap (0.00s) | backoff_test.go:9: waited 31s | FAIL",
		"make step-119 && echo done"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q", want)
		}
	}
	m := regexp.MustCompile(`\[(\d+) successful commands not listed here: they are in blob ([a-z]+)\]`).FindStringSubmatch(got)
	if m == nil || m[2] != rec.Blobs[0] {
		t.Fatalf("no count of the collapsed commands naming blob %s:\n%s", rec.Blobs[0], got)
	}
	n, _ := strconv.Atoi(m[1])
	listed := strings.Count(got, " && echo done")
	if n == 0 || n+listed != 120 || strings.Contains(got, "make step-0 ") {
		t.Errorf("%d commands counted and %d listed, want 120, the oldest counted", n, listed)
	}
}

// TestFailureReasons (defect 3): a failure keeps the lines that say why
// (here on line 3, and the last line), not its first two lines; errors of
// any tool and the user's refusals are recorded.
func TestFailureReasons(t *testing.T) {
	refusal := "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed."
	c := parse(t, body(
		user("check the resolver"),
		bash("t1", "nslookup example.com 10.0.0.1"),
		result("t1", "Exit code 1\n;; Got recursion not available from 10.0.0.1\nServer:\t\t10.0.0.1\n;; connection timed out; no servers could be reached\n\n", true),
		bash("t2", "make build"),
		result("t2", "Exit code 2\ncc -c a.c\ncc -c b.c\nb.c:3: error: expected ';'\ncc -c c.c\nmake: *** [b.o] Error 1", true),
		call("t3", "Read", `{"file_path":"/etc/resolv.conf.d"}`),
		result("t3", "<tool_use_error>File does not exist.</tool_use_error>", true),
		call("t4", "Edit", `{"file_path":"/etc/hosts","old_string":"a","new_string":"b"}`),
		result("t4", refusal, true),
		call("t5", "WebFetch", `{"url":"https://example.com/doc","prompt":"read"}`),
		result("t5", "Request failed with status code 403", true),
		call("t6", "Read", `{"file_path":"/notes/log.txt"}`),
		result("t6", refusal+"\nthe build: exit code 1", false),
		assistant("stopped"),
	))
	got := foldSpans(t, newTestPass(t), c, []int{len(c.Messages)}, 5000, nil)[0].Summary
	for _, want := range []string{
		"- `nslookup example.com 10.0.0.1` (exit 1): ;; Got recursion not available from 10.0.0.1 | Server: 10.0.0.1 | ;; connection timed out; no servers could be reached",
		"- `make build` (exit 2): b.c:3: error: expected ';' | cc -c c.c | make: *** [b.o] Error 1",
		"- Read /etc/resolv.conf.d: <tool_use_error>File does not exist.</tool_use_error>",
		"- Edit /etc/hosts — refused by the user: " + refusal,
		"- WebFetch https://example.com/doc: Request failed with status code 403",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "/notes/log.txt:") {
		t.Errorf("a file that quotes a refusal and an exit code was taken for a failure:\n%s", got)
	}
}

// TestInjected (defect 4): text the client injects into the user's turn
// is not listed as the user's request; slash commands and notifications
// are noted as such.
func TestInjected(t *testing.T) {
	c := parse(t, body(
		`{"role":"user","content":[{"type":"text","text":"<local-command-caveat>Caveat: The messages below were generated by the user while running local commands. DO NOT respond to these messages.</local-command-caveat>"}]}`,
		`{"role":"user","content":[{"type":"text","text":"<command-name>/review</command-name>\n<command-message>review</command-message>\n<command-args>pass/clear</command-args>"}]}`,
		`{"role":"user","content":[{"type":"text","text":"<local-command-stdout></local-command-stdout>"}]}`,
		assistant("reviewing"),
		`{"role":"user","content":[{"type":"text","text":"<task-notification>\n<task-id>bc34d29</task-id>\n<status>completed</status>\n<summary>Background command \"Get NVMe errors\" completed (exit code 0)</summary>\n</task-notification>"},{"type":"text","text":"[Request interrupted by user]"},{"type":"text","text":"what did the NVMe check find?"}]}`,
		assistant("it found nothing"),
	))
	f := scanSpan(c, 0, len(c.Messages), 0)
	var reqs []string
	for _, n := range f.Requests {
		reqs = append(reqs, n.Text)
	}
	if want := []string{"what did the NVMe check find?"}; !slices.Equal(reqs, want) {
		t.Errorf("requests %q, want %q", reqs, want)
	}
	got := fit(merge(&facts{}, f, "blobx"), whole, 5000)
	for _, want := range []string{hInjected, "the user ran /review pass/clear", `task notification: Background command "Get NVMe errors" completed (exit code 0)`, "[Request interrupted by user]"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Caveat") {
		t.Error("the caveat was kept")
	}
	// Claude Code's own summary, after it compacted the session, is an
	// earlier summary.
	sum := "This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\n## Analysis\nthe user wants X"
	f = scanSpan(parse(t, body(user(sum), assistant("ok"))), 0, 2, 0)
	if got := fit(merge(&facts{}, f, "blobx"), whole, 5000); len(f.Requests) > 0 || !strings.Contains(got, hEarlier+"\n"+sum) {
		t.Errorf("a client's summary is not kept as an earlier summary:\n%s", got)
	}
}

// TestMedia (defect 5): an image in a tool's result and one the user
// pasted are mentioned, with the tool and the blob that holds them.
func TestMedia(t *testing.T) {
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk" + strings.Repeat("A", 4000)
	c := parse(t, body(
		`{"role":"user","content":[{"type":"text","text":"why is the page blank?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+png+`"}}]}`,
		call("s1", "mcp__playwright__browser_take_screenshot", `{"filename":"page.png"}`),
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"s1","content":[{"type":"text","text":"Took the screenshot"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+png+`"}}]}]}`,
		assistant("the CSS failed to load"),
	))
	rec := foldSpans(t, newTestPass(t), c, []int{len(c.Messages)}, 5000, nil)[0]
	blob := rec.Blobs[0]
	for _, want := range []string{
		"- an image (image/png 3 KB) in a user message, kept in blob " + blob,
		"- an image (image/png 3 KB) in the result of mcp__playwright__browser_take_screenshot {\"filename\":\"page.png\"}, kept in blob " + blob,
	} {
		if !strings.Contains(rec.Summary, want) {
			t.Errorf("missing %q in:\n%s", want, rec.Summary)
		}
	}
}

// TestLegacyRecord: a record written before facts existed (its summary
// text only) still decodes, and the next compaction keeps its summary as
// an earlier summary.
func TestLegacyRecord(t *testing.T) {
	old := []byte(`{"text":"[ctxguard compacted the first 4 messages ...]\n\n<summary>\nOLD\n</summary>","summary":"This is an extractive summary of the earlier conversation, written by ctxguard without a model: ...\n\n## User requests (verbatim)\nfix it\n---\n## Plan\nkeep","blobs":["abcdefghijklm"],"messages":4,"tokens":30,"input_tokens":100,"output_tokens":20,"extractive":true}`)
	p := newTestPass(t)
	rec, err := p.records.Decode(old)
	if err != nil {
		t.Fatalf("a record of the previous format does not decode: %v", err)
	}
	c := parse(t, session())
	in := &spanInput{prev: previousFacts(rec), cur: scanSpan(c, 0, len(c.Messages), 0), count: 18, budget: 5000, prevSummary: rec.Summary}
	if in.transcript, err = c.AppendTranscript(nil, 0, len(c.Messages)-1); err != nil {
		t.Fatal(err)
	}
	got := p.newRecord(context.Background(), in, "", "", 0, 0)
	if !strings.Contains(got.Summary, hEarlier+"\n"+rec.Summary) {
		t.Errorf("the previous record's summary is not kept whole as an earlier summary:\n%s", got.Summary)
	}
	if !strings.Contains(got.Summary, "Please fix the failing parser test") || got.Blobs[0] != "abcdefghijklm" || len(got.Blobs) != 2 {
		t.Errorf("blobs %v, summary:\n%s", got.Blobs, got.Summary)
	}
}

// TestExtractCodex: Codex's shell commands (argv arrays and JSON
// results), apply_patch patches and update_plan, through the Responses
// adapter.
func TestExtractCodex(t *testing.T) {
	patch := "*** Begin Patch\n*** Add File: new.go\n+package x\n*** Update File: old.go\n@@\n-a\n+b\n*** Delete File: gone.go\n*** End Patch"
	items := []string{
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>cwd</environment_context>"}]}`,
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>be brief</INSTRUCTIONS>"}]}`,
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"refactor the module"}]}`,
		`{"type":"function_call","call_id":"c1","name":"shell","arguments":` + q(`{"command":["bash","-lc","cargo build"]}`) + `}`,
		`{"type":"function_call_output","call_id":"c1","output":"error[E0425]: cannot find value\nExit code: 101"}`,
		`{"type":"function_call","call_id":"c4","name":"shell","arguments":` + q(`{"command":["bash","-lc","cat missing.md"]}`) + `}`,
		`{"type":"function_call_output","call_id":"c4","output":` + q(`{"output":"cat: missing.md: No such file or directory\n","metadata":{"exit_code":1,"duration_seconds":0.0}}`) + `}`,
		`{"type":"custom_tool_call","call_id":"c2","name":"apply_patch","input":` + q(patch) + `}`,
		`{"type":"custom_tool_call_output","call_id":"c2","output":"Success"}`,
		`{"type":"custom_tool_call","call_id":"c5","name":"apply_patch","input":` + q("*** Begin Patch\n*** Update File: epics.md\n@@\n-a\n+b\n*** End Patch") + `}`,
		`{"type":"custom_tool_call_output","call_id":"c5","output":"apply_patch verification failed: Failed to find expected lines in epics.md:\nFR22: Epic 5"}`,
		`{"type":"function_call","call_id":"c3","name":"update_plan","arguments":` + q(`{"plan":[{"step":"split module","status":"in_progress"}]}`) + `}`,
		`{"type":"function_call_output","call_id":"c3","output":"Plan updated"}`,
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Refactoring."}]}`,
	}
	c, err := responses.Parse([]byte(`{"model":"gpt-5.1-codex","input":[` + strings.Join(items, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := fit(merge(&facts{}, scanSpan(c, 0, len(c.Messages), 0), "blobx"), whole, 5000)
	for _, want := range []string{"[1] refactor the module", "- `cargo build` (exit 101): error[E0425]: cannot find value",
		"- `cat missing.md` (exit 1): cat: missing.md: No such file or directory", "Created: new.go", "Edited: old.go, epics.md", "Deleted: gone.go",
		"- apply_patch epics.md: apply_patch verification failed: Failed to find expected lines in epics.md: | FR22: Epic 5",
		"[in_progress] split module", "Refactoring."} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "environment_context") || strings.Contains(got, "be brief") || strings.Contains(got, "[2]") {
		t.Errorf("Codex's injected context was taken for a request:\n%s", got)
	}
}

// Markdown-laden agent text in several languages, for the property test.
var foldTexts = []string{
	"## Plan\n1. read `config.go`\n2. fix `parseAmount`\n---\n## Risks\nnone",
	"# Отчёт\n\n## Выводы\n- функция `loadConfig` падает\n\n---\n\n| поле | значение |\n|---|---|\n| a | 1 |",
	"## 調査結果\n`store.Decisions` のキャッシュが古い。\n\n---\n\n### 次の手順\n- `RefreshInterval` を短くする",
	"## الخطة\n- إصلاح `applyPatch`\n---\n> ملاحظة: لا تغيّر `main.go`",
	"```go\n// ## not a heading\nfunc f() {}\n```\n\n## Done 🎉\n\n---\n***\n___",
	"Plain text with a trailing rule\n---",
}

// TestFoldProperty: Markdown-laden, multi-language agent text folded N
// times at small budgets: every item is in the summary, or counted among
// those of its kind left out, with the blob of its span named.
func TestFoldProperty(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 17))
			var msgs []string
			var ends []int
			type item struct {
				kind, text string
				span       int
			}
			var items []item
			pick := func() string { return foldTexts[r.IntN(len(foldTexts))] }
			for span := range 8 {
				for turn := range 1 + r.IntN(4) {
					req := fmt.Sprintf("request %d.%d: %s", span, turn, pick())
					msgs = append(msgs, user(req))
					items = append(items, item{kRequests, req, span})
					for k := range r.IntN(5) {
						id := fmt.Sprintf("t%d_%d_%d", span, turn, k)
						switch r.IntN(4) {
						case 0:
							cmd := fmt.Sprintf("go test ./pkg%d/...", r.IntN(30))
							msgs = append(msgs, bash(id, cmd), result(id, "ok", false))
							items = append(items, item{kCommands, cmd, span})
						case 1:
							cmd := fmt.Sprintf("make target-%d", r.IntN(30))
							reason := fmt.Sprintf("error: target-%d failed: %s", r.IntN(1000), strings.ReplaceAll(pick(), "\n", " "))
							msgs = append(msgs, bash(id, cmd), result(id, "noise\n"+reason, true))
							items = append(items, item{kFailures, cmd, span})
						case 2:
							file := fmt.Sprintf("/src/ファイル_%d.go", r.IntN(60))
							msgs = append(msgs, call(id, "Read", `{"file_path":`+q(file)+`}`), result(id, "x", false))
							items = append(items, item{kFiles, file, span})
						case 3:
							pat := fmt.Sprintf("func Test%d", r.IntN(60))
							msgs = append(msgs, call(id, "Grep", `{"pattern":`+q(pat)+`}`), result(id, "x", false))
							items = append(items, item{kSearches, pat, span})
						}
					}
					text := fmt.Sprintf("answer %d.%d: %s", span, turn, pick())
					msgs = append(msgs, assistant(text))
					items = append(items, item{kAssistant, text, span})
				}
				ends = append(ends, len(msgs))
			}
			c := parse(t, body(msgs...))
			for _, budget := range []int{500, 1500, 4000} {
				recs := foldSpans(t, newTestPass(t), c, ends, budget, nil)
				for i, rec := range recs {
					got := rec.Summary
					if n := rec.Tokens; n > budget {
						t.Errorf("budget %d, fold %d: %d tokens", budget, i, n)
					}
					if m := regexp.MustCompile(`bytes of this summary cut here[^\n]*`).FindString(got); m != "" {
						// The last resort, at the smallest budget only:
						// the cut names every blob.
						if budget >= 1500 {
							t.Errorf("budget %d, fold %d: the summary was cut:\n%s", budget, i, got)
						}
						for _, b := range rec.Blobs {
							if !strings.Contains(m, "blob "+b) {
								t.Errorf("budget %d, fold %d: the cut does not name blob %s", budget, i, b)
							}
						}
						continue
					}
					counted := countLines(got)
					missing := map[string]int{}
					seen := map[string]bool{}
					for _, it := range items {
						if it.span > i || seen[it.kind+it.text] {
							continue
						}
						seen[it.kind+it.text] = true
						if strings.Contains(got, it.text) || cutAndNamed(got, it.text, rec.Facts.Spans[it.span]) {
							continue
						}
						missing[it.kind]++
						if blobs := counted[it.kind]; !strings.Contains(blobs.where, "blob "+rec.Facts.Spans[it.span]) {
							t.Errorf("budget %d, fold %d: %s %q dropped, and no count of %s names blob %s:\n%s", budget, i, it.kind, it.text, it.kind, rec.Facts.Spans[it.span], got)
						}
					}
					for kind, n := range missing {
						// Commands repeat: a count covers each distinct one.
						if n > counted[kind].n {
							t.Errorf("budget %d, fold %d: %d %s missing, %d counted", budget, i, n, kind, counted[kind].n)
						}
					}
				}
			}
		})
	}
}

// TestRecordBounded: a record keeps the facts of a few summaries' worth,
// not of everything a long session said; what it lets go is counted with
// its blob.
func TestRecordBounded(t *testing.T) {
	var msgs []string
	for i := range 60 {
		id := "c" + strconv.Itoa(i)
		msgs = append(msgs, user(fmt.Sprintf("request %d: %s", i, strings.Repeat("a pasted log line\n", 900))), bash(id, fmt.Sprintf("cat big-%d.log", i)), result(id, "ok", false))
	}
	msgs = append(msgs, assistant("done"))
	c := parse(t, body(msgs...))
	budget := 1000
	rec := foldSpans(t, newTestPass(t), c, []int{len(c.Messages)}, budget, nil)[0]
	b, _ := json.Marshal(rec.Facts)
	if len(b) > 4*storeFactor*budget*2 {
		t.Errorf("the record keeps %d bytes of facts for a budget of %d tokens", len(b), budget)
	}
	if o := rec.Facts.omitted(kRequests); o == nil || o.Count == 0 || !slices.Equal(o.Spans, []int{0}) {
		t.Errorf("the requests the record let go are not counted: %+v", rec.Facts.Omitted)
	}
}

// TestEveryCountRendered: every kind of item a summary can leave out has
// its count rendered, with the blob named.
func TestEveryCountRendered(t *testing.T) {
	kinds := []string{kRequests, kInjected, kFiles, kSearches, kFailures, kMedia, kCommands, kOldCommands, kPlan, kAssistant, kEarlier}
	f := &facts{Spans: []string{"blobone", "blobtwo"}}
	for i, k := range kinds {
		f.omit(k, 1, 0, []int{i % 2})
	}
	got := f.render(whole)
	for i, k := range kinds {
		if want := fmt.Sprintf("[1 %s not listed here: they are in blob %s]", k, f.Spans[i%2]); !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

type countLine struct {
	n     int
	where string
}

var countRE = regexp.MustCompile(`\[(\d+) ([a-z ]+?)(?:, run \d+ times in all,)? not listed here: they are in ([^\]]*)\]`)

// countLines reads a summary's counts of what it left out, by kind.
func countLines(s string) map[string]countLine {
	out := map[string]countLine{}
	for _, m := range countRE.FindAllStringSubmatch(s, -1) {
		n, _ := strconv.Atoi(m[1])
		kind := m[2]
		out[kind] = countLine{n: out[kind].n + n, where: out[kind].where + m[3]}
	}
	return out
}

// cutAndNamed reports whether text's head is in s, with a cut marker
// naming blob.
func cutAndNamed(s, text, blob string) bool {
	head := text[:min(len(text), 24)]
	i := strings.Index(s, head)
	return i >= 0 && strings.Contains(s[i:], "cut here; the whole is in blob "+blob)
}

// TestModelSummary (defect 7): the model is asked for discoveries and the
// files read and changed; its summary is followed by the facts it might
// have missed; an empty or over-budget answer gives way to the extractive
// summary.
func TestModelSummary(t *testing.T) {
	prompt := systemPrompt(4000)
	for _, want := range []string{"## User requests", "## Goal", "## Instructions", "## Discoveries", "## Accomplished", "## In progress and left", "## Relevant files", "read", "changed", "4000 tokens"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, prompt)
		}
	}
	c := parse(t, session())
	p := newTestPass(t)
	prose := "## Goal\nfix the parser\n\n## Discoveries\nTestParse wants 2"
	rec := foldSpans(t, p, c, []int{len(c.Messages)}, 5000, func(int) string { return prose })[0]
	if !strings.HasPrefix(rec.Summary, prose+"\n\n"+appendixHeader) || rec.Extractive {
		t.Fatalf("the model's summary is not followed by the appendix:\n%s", rec.Summary)
	}
	for _, want := range []string{"[1] Please fix the failing parser test in parse.go", "Edited: /src/parse.go", "Read: /src/parse.go", "Grep `func Parse\\(`", "- `go test ./...`: --- FAIL: TestParse"} {
		if !strings.Contains(rec.Summary, want) {
			t.Errorf("the appendix lacks %q:\n%s", want, rec.Summary)
		}
	}
	if strings.Contains(rec.Summary, hCommands) || strings.Contains(rec.Summary, hAssistant) {
		t.Errorf("the appendix holds more than requests, files, failures and images:\n%s", rec.Summary)
	}
	// What the model's summary holds word for word is not repeated.
	withPath := prose + "\nfiles: /src/parse.go"
	rec = foldSpans(t, p, c, []int{len(c.Messages)}, 5000, func(int) string { return withPath })[0]
	if strings.Contains(rec.Summary, "Edited: /src/parse.go") || !strings.Contains(rec.Summary, "Created: /src/parse_extra.go") {
		t.Errorf("the appendix repeats a path the model's summary holds, or lost one it does not:\n%s", rec.Summary)
	}
	// The next fold keeps the model's prose as the earlier summary.
	next := foldSpans(t, p, c, []int{5, len(c.Messages)}, 5000, func(i int) string { return []string{prose, ""}[i] })[1]
	if !strings.Contains(next.Summary, hEarlier+"\n"+prose) {
		t.Errorf("the model's prose did not carry into the next fold:\n%s", next.Summary)
	}
	for name, answer := range map[string]string{"empty": "  \n", "over budget": strings.Repeat("a long summary ", 2000)} {
		rec := foldSpans(t, p, c, []int{len(c.Messages)}, 1000, func(int) string { return answer })[0]
		if !rec.Extractive || !strings.HasPrefix(rec.Summary, extractHeader) || tokens.EstimateText(rec.Summary) > 1000 {
			t.Errorf("%s answer: not replaced by the extractive summary:\n%s", name, rec.Summary)
		}
	}
}

func FuzzExtract(f *testing.F) {
	f.Add([]byte(session()), 0, 100, 500, "")
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}]}`), 0, 1, 50, "prev")
	f.Add([]byte(body(
		user("<task-notification>\n<summary>done</summary>\n</task-notification>"), user("<command-name>/x</command-name>"),
		bash("t1", "make"), result("t1", "Exit code 2\na\nb: error: c\nd", true),
		call("t2", "Read", `{"file_path":"/a"}`), result("t2", "The user doesn't want to proceed with this tool use.", true),
		`{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}`,
	)), 0, 9, 300, "")
	f.Fuzz(func(t *testing.T, body []byte, from, to, budget int, prev string) {
		c, err := anthropic.Parse(body)
		if err != nil {
			return
		}
		budget = 50 + abs(budget)%20_000
		pf := previousFacts(&record{Summary: prev, Blobs: []string{"abcdefghijklm"}})
		got := fit(merge(pf, scanSpan(c, from, to, 0), "nopqrstuvwxyz"), whole, budget)
		if n := tokens.EstimateText(got); n > budget && len(got) > 3*budget+400 {
			t.Fatalf("%d bytes (%d tokens) for a budget of %d tokens", len(got), n, budget)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
