package responses

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	call := `{"type":"function_call","name":"sh","arguments":"{}","call_id":"c1"}`
	out := `{"type":"function_call_output","call_id":"c1","output":"x"}`
	rs := `{"type":"reasoning","id":"rs_1","encrypted_content":"A"}`
	tests := []struct {
		name, input string
		extra       string
		want        string // a part of the error, "" for valid
	}{
		{"string input", `"hi"`, "", ""},
		{"round", `[` + rs + `,` + call + `,` + out + `]`, "", ""},
		{"output without call", `[` + out + `]`, "", "answers no earlier call"},
		{"output without call, continued", `[` + out + `]`, `,"previous_response_id":"resp_1"`, ""},
		{"output of a referenced call", `[{"type":"item_reference","id":"fc_1"},` + out + `]`, "", ""},
		{"output before call", `[` + out + `,` + call + `]`, "", "answers no earlier call"},
		{"call without output", `[` + call + `]`, "", "has no output"},
		{"output of another kind", `[` + call + `,{"type":"custom_tool_call_output","call_id":"c1","output":"x"}]`, "", "answers a function_call"},
		{"reasoning last", `[` + call + `,` + out + `,` + rs + `]`, "", "without its successor"},
		{"reasoning before a user message", `[` + rs + `,{"role":"user","content":"x"}]`, "", "without its successor"},
		{"reasoning before an assistant message", `[` + rs + `,{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x"}]}]`, "", ""},
		{"input_text in an assistant message", `[{"type":"message","role":"assistant","content":[{"type":"input_text","text":"x"}]}]`, "", "input_text in a assistant message"},
		{"text without text", `[{"type":"message","role":"user","content":[{"type":"input_text"}]}]`, "", "without a string text"},
		{"bad role", `[{"role":"tool","content":"x"}]`, "", `role "tool"`},
		{"compaction without content", `[{"type":"compaction","id":"cmp_1"}]`, "", "compaction without"},
		{"arguments not a string", `[{"type":"function_call","name":"sh","arguments":{},"call_id":"c1"},` + out + `]`, "", "without a string name and arguments"},
		{"item not an object", `[1]`, "", "not an object"},
		{"input object", `{}`, "", "neither a string nor an array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate([]byte(`{"model":"m","input":` + tt.input + tt.extra + `}`))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate = %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
	if err := Validate([]byte(`{"input":[`)); err == nil {
		t.Error("Validate accepts a truncated body")
	}
}

func TestValidateRewrite(t *testing.T) {
	rounds := []Round{{Reasoning: true, Output: "one"}, {Kind: "custom", Args: "patch", Output: "two", Text: "done"}, {Output: "three"}}
	orig := string(Session(rounds))
	note := `{"type":"message","role":"user","content":[{"type":"input_text","text":"[dropped]"}]}`
	tests := []struct {
		name string
		sent string
		want string
	}{
		{"same", orig, ""},
		{"output stubbed", strings.Replace(orig, `"output":"one"`, `"output":"[cleared]"`, 1), ""},
		{"output as parts", strings.Replace(orig, `"output":"one"`, `"output":[{"type":"input_text","text":"o"}]`, 1), ""},
		{"arguments cleared", strings.Replace(orig, `"arguments":"{\"cmd\": \"make test\", \"yield_time_ms\": 2000}"`, `"arguments":"{\"cmd\":\"[cleared]\"}"`, 1), ""},
		{"custom input cleared", strings.Replace(orig, `"input":"patch"`, `"input":"[cleared]"`, 1), ""},
		{"round dropped with a note", cut(orig, `{"type":"reasoning","id":"rs_0000"`, `{"type":"custom_tool_call"`, note+","), ""},
		{"output dropped alone", cut(orig, `{"type":"function_call_output","id":"fco_call_0000"`, `{"type":"custom_tool_call"`, ""), "has no output"},
		{"reasoning kept without its call", cut(orig, `{"type":"function_call","status":"completed","id":"fc_call_0000"`, `{"type":"custom_tool_call"`, ""), "without its successor"},
		{"message dropped", cut(orig, `{"type":"message","status":"completed"`, `{"type":"message","id":"msg_ucall`, ""), "was dropped"},
		{"reasoning edited", strings.Replace(orig, `"gAAAAB`, `"gAAAAC`, 1), "neither an item of the original nor a note"},
		{"call id changed", strings.Replace(orig, `"output":"one"`, `"output":"one","x":1`, 1), "neither an item"},
		{"model changed", strings.Replace(orig, `"gpt-5.1-codex"`, `"gpt-5"`, 1), "other than input changed"},
		{"note of another shape", cut(orig, `{"type":"reasoning","id":"rs_0000"`, `{"type":"custom_tool_call"`, `{"type":"message","role":"user","content":"x"},`), "neither an item"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.sent == orig && tt.name != "same" {
				t.Fatal("the edit did not apply")
			}
			err := ValidateRewrite([]byte(orig), []byte(tt.sent))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ValidateRewrite = %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("ValidateRewrite = %v, want %q", err, tt.want)
			}
		})
	}
}

// cut replaces s from the start of from up to the start of to with repl.
func cut(s, from, to, repl string) string {
	i := strings.Index(s, from)
	j := strings.Index(s[i:], to)
	return s[:i] + repl + s[i+j:]
}
