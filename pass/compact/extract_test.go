package compact_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass/compact"
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

// session is a Claude Code-shaped history touching every section.
func session() string {
	todo := `{"todos":[{"content":"write the parser","status":"completed"},{"content":"add tests","status":"in_progress"}]}`
	msgs := []string{
		`{"role":"user","content":[{"type":"text","text":"<system-reminder>ignore me</system-reminder>"},{"type":"text","text":"Please fix the failing parser test in parse.go"}]}`,
		`{"role":"assistant","content":[{"type":"text","text":"Looking at the parser."},{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/src/parse.go"}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"package parse"}]}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"go test ./..."}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","is_error":true,"content":"--- FAIL: TestParse\nparse_test.go:12: got 1, want 2"}]}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"t3","name":"Edit","input":{"file_path":"/src/parse.go","old_string":"a","new_string":"b"}},{"type":"tool_use","id":"t4","name":"Write","input":{"file_path":"/src/parse_extra.go","content":"package parse"}}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t3","content":"ok"},{"type":"tool_result","tool_use_id":"t4","content":"ok"}]}`,
		`{"role":"assistant","content":[{"type":"tool_use","id":"t5","name":"TodoWrite","input":` + todo + `}]}`,
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t5","content":"ok"}]}`,
		`{"role":"assistant","content":"The parser is fixed; tests next."}`,
		`{"role":"user","content":"Also make the error message clearer."}`,
		`{"role":"assistant","content":"Will do."}`,
	}
	return `{"model":"claude-sonnet-4-5","messages":[` + strings.Join(msgs, ",") + `]}`
}

func TestExtractSections(t *testing.T) {
	c := parse(t, session())
	got := compact.Extract(c, 0, len(c.Messages), "", 5000)
	for _, want := range []string{
		"Please fix the failing parser test in parse.go",
		"Also make the error message clearer.",
		"Created: /src/parse_extra.go",
		"Edited: /src/parse.go",
		"Read: /src/parse.go",
		"`go test ./...` — failed: --- FAIL: TestParse | parse_test.go:12: got 1, want 2",
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
	if again := compact.Extract(c, 0, len(c.Messages), "", 5000); again != got {
		t.Error("not deterministic")
	}
}

// TestExtractFolds: a second summary over a later span keeps what the
// first said (the first request, the files) and adds the new.
func TestExtractFolds(t *testing.T) {
	c := parse(t, session())
	first := compact.Extract(c, 0, 7, "", 5000)
	second := compact.Extract(c, 7, len(c.Messages), first, 5000)
	for _, want := range []string{"Please fix the failing parser test", "Also make the error message clearer.", "/src/parse_extra.go", "add tests"} {
		if !strings.Contains(second, want) {
			t.Errorf("the folded summary lost %q:\n%s", want, second)
		}
	}
	// Another summarizer's text is kept as an earlier summary.
	if got := compact.Extract(c, 7, len(c.Messages), "MODEL SUMMARY: all good", 5000); !strings.Contains(got, "MODEL SUMMARY: all good") {
		t.Errorf("an earlier model summary was dropped:\n%s", got)
	}
}

// TestExtractBudget: over budget, it shrinks and still keeps the first
// and the last user request.
func TestExtractBudget(t *testing.T) {
	var msgs []string
	for i := range 200 {
		msgs = append(msgs, `{"role":"user","content":`+q(strings.Repeat("request words ", 50)+string(rune('A'+i%26)))+`}`,
			`{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t`+string(rune('a'+i%26))+strings.Repeat("x", i)+`","name":"Bash","input":{"command":"make step-`+strings.Repeat("9", i%7)+`"}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t`+string(rune('a'+i%26))+strings.Repeat("x", i)+`","content":"done"}]}`)
	}
	msgs[0] = `{"role":"user","content":"THE FIRST REQUEST"}`
	msgs = append(msgs, `{"role":"user","content":"THE LAST REQUEST"}`, `{"role":"assistant","content":"end"}`)
	c := parse(t, `{"model":"m","messages":[`+strings.Join(msgs, ",")+`]}`)
	for _, budget := range []int{300, 2000, 8000} {
		got := compact.Extract(c, 0, len(c.Messages), "", budget)
		if n := tokens.EstimateText(got); n > budget {
			t.Errorf("budget %d: %d tokens", budget, n)
		}
		if budget >= 2000 && (!strings.Contains(got, "THE FIRST REQUEST") || !strings.Contains(got, "THE LAST REQUEST")) {
			t.Errorf("budget %d: the first or the last request went", budget)
		}
	}
}

// TestExtractCodex: Codex's shell commands (argv arrays), apply_patch
// patches and update_plan, through the Responses adapter.
func TestExtractCodex(t *testing.T) {
	patch := "*** Begin Patch\n*** Add File: new.go\n+package x\n*** Update File: old.go\n@@\n-a\n+b\n*** Delete File: gone.go\n*** End Patch"
	items := []string{
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>cwd</environment_context>"}]}`,
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"refactor the module"}]}`,
		`{"type":"function_call","call_id":"c1","name":"shell","arguments":` + q(`{"command":["bash","-lc","cargo build"]}`) + `}`,
		`{"type":"function_call_output","call_id":"c1","output":"error[E0425]: cannot find value\nExit code: 101"}`,
		`{"type":"custom_tool_call","call_id":"c2","name":"apply_patch","input":` + q(patch) + `}`,
		`{"type":"custom_tool_call_output","call_id":"c2","output":"Success"}`,
		`{"type":"function_call","call_id":"c3","name":"update_plan","arguments":` + q(`{"plan":[{"step":"split module","status":"in_progress"}]}`) + `}`,
		`{"type":"function_call_output","call_id":"c3","output":"Plan updated"}`,
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Refactoring."}]}`,
	}
	c, err := responses.Parse([]byte(`{"model":"gpt-5.1-codex","input":[` + strings.Join(items, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := compact.Extract(c, 0, len(c.Messages), "", 5000)
	for _, want := range []string{"refactor the module", "`cargo build` — failed: error[E0425]: cannot find value", "Created: new.go", "Edited: old.go", "Deleted: gone.go", "[in_progress] split module", "Refactoring."} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "environment_context") {
		t.Error("Codex's environment context was taken for a request")
	}
}

func FuzzExtract(f *testing.F) {
	f.Add([]byte(session()), 0, 100, 500, "")
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}]}`), 0, 1, 50, "prev")
	f.Fuzz(func(t *testing.T, body []byte, from, to, budget int, prev string) {
		c, err := anthropic.Parse(body)
		if err != nil {
			return
		}
		budget = 50 + abs(budget)%20_000
		got := compact.Extract(c, from, to, prev, budget)
		if len(got) > 3*budget+200 {
			t.Fatalf("%d bytes for a budget of %d tokens", len(got), budget)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
