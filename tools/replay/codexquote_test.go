package replay

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/tools/transcript"
	"github.com/google/go-cmp/cmp"
)

// codexRollout is a hand-written rollout: the agent reads a file with a
// shell command, then answers with a reasoning summary, a message that
// quotes a line of it and a patch whose context and removed lines quote
// two more; the next request runs a command and ends with a message.
const codexRollout = `{"timestamp":"2026-01-30T10:00:00Z","type":"session_meta","payload":{"id":"019c0000-0000-7000-8000-000000000001","cli_version":"0.94.0","base_instructions":{"text":"be brief"}}}
{"timestamp":"2026-01-30T10:00:01Z","type":"turn_context","payload":{"model":"gpt-5.2-codex"}}
{"timestamp":"2026-01-30T10:00:02Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"fix the greeting"}]}}
{"timestamp":"2026-01-30T10:00:03Z","type":"response_item","payload":{"type":"function_call","name":"shell_command","arguments":"{\"command\":\"cat src/greet.rs\"}","call_id":"c1"}}
{"timestamp":"2026-01-30T10:00:04Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"pub fn greeting_for(name: &str) -> String {\n    format!(\"Hello there, {}\", name)\n}\n// the greeting module of the service"}}
{"timestamp":"2026-01-30T10:00:05Z","type":"response_item","payload":{"type":"reasoning","summary":[{"type":"summary_text","text":"The format string is the bug."}],"encrypted_content":"gAAAA"}}
{"timestamp":"2026-01-30T10:00:06Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"The function is:\n` + "`pub fn greeting_for(name: &str) -> String {`" + `"}]}}
{"timestamp":"2026-01-30T10:00:07Z","type":"response_item","payload":{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch\n*** Update File: src/greet.rs\n-    format!(\"Hello there, {}\", name)\n+    format!(\"Hello, {}!\", name)\n // the greeting module of the service\n*** End Patch","call_id":"c2"}}
{"timestamp":"2026-01-30T10:00:08Z","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"c2","output":"Success. Updated the following files:\nM src/greet.rs"}}
{"timestamp":"2026-01-30T10:00:09Z","type":"response_item","payload":{"type":"function_call","name":"shell_command","arguments":"{\"command\":\"cargo test\"}","call_id":"c3"}}
{"timestamp":"2026-01-30T10:00:10Z","type":"response_item","payload":{"type":"function_call_output","call_id":"c3","output":"test result: ok. 3 passed"}}
{"timestamp":"2026-01-30T10:00:11Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Fixed."}]}}
`

// TestCodexQuotes: from a rollout to the quotes, end to end: the
// requests sessionStream rebuilds carry their recorded output items as
// answers (codexAnswer), and quote retention finds the file lines they
// repeat: a line of a message, and the context and removed lines of a
// patch.
func TestCodexQuotes(t *testing.T) {
	s := transcript.ParseCodex([]byte(codexRollout), "rollout-2026-01-30T10-00-00-019c0000-0000-7000-8000-000000000001.jsonl")
	stream, _, err := sessionStream(s, transcript.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var answers []string
	for _, r := range stream {
		if r.Answer == nil {
			answers = append(answers, "")
			continue
		}
		if !json.Valid(r.Answer) {
			t.Fatalf("answer is not JSON: %s", r.Answer)
		}
		answers = append(answers, strings.Join(answerTexts(r.Answer), " | "))
	}
	want := []string{
		// Request 0 answered with the shell call (a tool input's every
		// string, keys included).
		"command\ncat src/greet.rs\n",
		// Request 1: reasoning, message, patch.
		"The format string is the bug. | The function is:\n`pub fn greeting_for(name: &str) -> String {` | *** Begin Patch\n*** Update File: src/greet.rs\n-    format!(\"Hello there, {}\", name)\n+    format!(\"Hello, {}!\", name)\n // the greeting module of the service\n*** End Patch\n",
		"command\ncargo test\n",
		"Fixed.",
	}
	if d := cmp.Diff(want, answers); d != "" {
		t.Fatalf("answers (-want +got):\n%s", d)
	}
	// Quote retention over the stream, sent as it came.
	q := newQuoteTracker(nil)
	var quoted []string
	for i, r := range stream {
		c, err := responses.Protocol.Parse(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		q.observe(c, i == 0)
		quoted = append(quoted, q.quoted(r.Answer)...)
	}
	wantQuoted := []string{
		"pub fn greeting_for(name: &str) -> String {",
		`format!("Hello there, {}", name)`,
		"// the greeting module of the service",
	}
	if d := cmp.Diff(wantQuoted, quoted); d != "" {
		t.Errorf("quoted lines (-want +got):\n%s", d)
	}
}
