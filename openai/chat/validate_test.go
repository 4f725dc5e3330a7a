package chat

import (
	"strings"
	"testing"
)

const call = `{"role":"assistant","content":"","reasoning_content":"r","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},{"id":"c2","type":"function","function":{"name":"read","arguments":"{}"}}]}`

func req(msgs ...string) string {
	return `{"model":"m","messages":[{"role":"user","content":"go"},` + strings.Join(msgs, ",") + `],"stream":true}`
}

func tool(id, content string) string {
	return `{"role":"tool","tool_call_id":"` + id + `","content":` + content + `}`
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string // want: a part of the error, "" for none
	}{
		{"answered", req(call, tool("c1", `"a"`), tool("c2", `[{"type":"text","text":"b"}]`), `{"role":"user","content":"x"}`), ""},
		{"answered in any order", req(call, tool("c2", `"b"`), tool("c1", `"a"`)), ""},
		{"captured", string(readBody(t, "opencode-multiturn-0007")), ""},
		{"unanswered", req(call, tool("c1", `"a"`), `{"role":"user","content":"x"}`), `tool call "c2" (read) is not answered`},
		{"last message calls", req(call), `is not answered`},
		{"unknown id", req(call, tool("c1", `"a"`), tool("c2", `"b"`), tool("c3", `"c"`)), `"c3" answers no call`},
		{"answered twice", req(call, tool("c1", `"a"`), tool("c2", `"b"`), tool("c1", `"a"`)), `"c1" answered twice`},
		{"after a user message", req(call, tool("c1", `"a"`), tool("c2", `"b"`), `{"role":"user","content":"x"}`, tool("c1", `"a"`)), `without an assistant message before`},
		{"no content", req(call, tool("c1", `"a"`), tool("c2", `null`)), `without a tool_call_id or content`},
		{"not json", `{"messages":[`, `unexpected end`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate([]byte(tc.body))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestValidateRewrite(t *testing.T) {
	orig := req(call, tool("c1", `"aaaa"`), tool("c2", `"bbbb"`), `{"role":"assistant","content":"ok"}`, `{"role":"user","content":"x"}`)
	for _, tc := range []struct {
		name, sent, want string
	}{
		{"same", orig, ""},
		{"result cleared", strings.Replace(orig, `"aaaa"`, `"[cleared]"`, 1), ""},
		{"result as parts", strings.Replace(orig, `"bbbb"`, `[{"type":"text","text":"b"}]`, 1), ""},
		{"arguments cleared", strings.Replace(orig, `"{\"command\":\"ls\"}"`, `"{\"command\":\"[cleared]\"}"`, 1), ""},
		{"round dropped", req(`{"role":"assistant","content":"ok"}`, `{"role":"user","content":"x"}`), ""},
		{"round replaced", req(`{"role":"assistant","content":"[dropped]"}`, `{"role":"user","content":"[note]"}`, `{"role":"assistant","content":"ok"}`, `{"role":"user","content":"x"}`), ""},
		{"arguments not json", strings.Replace(orig, `"{\"command\":\"ls\"}"`, `"{cleared"`, 1), "not JSON"},
		{"reasoning changed", strings.Replace(orig, `"reasoning_content":"r"`, `"reasoning_content":"s"`, 1), "changed beyond"},
		{"reasoning dropped", strings.Replace(orig, `"reasoning_content":"r",`, ``, 1), "4 blocks became a assistant message of 3"},
		{"call id changed", strings.Replace(orig, `"c2","type"`, `"c9","type"`, 1), "not answered"},
		{"user text changed", strings.Replace(orig, `"content":"x"`, `"content":"y"`, 1), "changed beyond"},
		{"assistant text dropped", req(call, tool("c1", `"aaaa"`), tool("c2", `"bbbb"`), `{"role":"user","content":"x"}`), "became a user message"},
		{"one result dropped", req(call, tool("c1", `"aaaa"`), `{"role":"assistant","content":"ok"}`, `{"role":"user","content":"x"}`), "not answered"},
		{"top level changed", strings.Replace(orig, `"stream":true`, `"stream":false`, 1), "outside its messages"},
		{"message added", strings.Replace(orig, `],"stream"`, `,{"role":"user","content":"more"}],"stream"`, 1), "messages more"},
		{"not json", `{`, "rewrite:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateRewrite([]byte(orig), []byte(tc.sent))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// Trimming drops a run of rounds and leaves its note at the last.
	two := req(call, tool("c1", `"a"`), tool("c2", `"b"`), call, tool("c1", `"a"`), tool("c2", `"b"`), call, tool("c1", `"a"`), tool("c2", `"b"`))
	for _, tc := range []struct{ name, sent, want string }{
		{"first dropped, second replaced", req(`{"role":"assistant","content":"[dropped]"}`, `{"role":"user","content":"[note]"}`, call, tool("c1", `"a"`), tool("c2", `"b"`)), ""},
		{"both replaced", req(`{"role":"assistant","content":"x"}`, `{"role":"user","content":"y"}`, `{"role":"assistant","content":"[dropped]"}`, `{"role":"user","content":"[note]"}`, call, tool("c1", `"a"`), tool("c2", `"b"`)), ""},
		{"all dropped", req(), ""},
		{"a user message too many", req(`{"role":"assistant","content":"[dropped]"}`, `{"role":"user","content":"[note]"}`, `{"role":"user","content":"[note]"}`, call, tool("c1", `"a"`), tool("c2", `"b"`)), "message 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateRewrite([]byte(two), []byte(strings.Replace(tc.sent, `,]`, `]`, 1)))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
