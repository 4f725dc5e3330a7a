package validate

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// req builds a request around message objects given as JSON text.
func req(msgs ...string) string {
	return `{"model":"m","max_tokens":100,"messages":[` + strings.Join(msgs, ",") + `]}`
}

const (
	u0   = `{"role":"user","content":"hi"}`
	sys1 = `{"role":"system","content":"be brief"}`
	// a complete tool round, thinking included
	aUse  = `{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"c2ln"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]}`
	uRes  = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"out"}]}`
	aText = `{"role":"assistant","content":"done"}`
)

// rulesOf returns the rules of err's problems (nil for a nil error).
func rulesOf(t *testing.T, err error) []Rule {
	t.Helper()
	if err == nil {
		return nil
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not an *Error", err)
	}
	return e.Rules()
}

func TestRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want []Rule
	}{
		// valid
		{"minimal", req(u0), nil},
		{"system message inside messages", req(u0, sys1, aText, `{"role":"user","content":"more"}`), nil},
		{"tool round", req(u0, aUse, uRes), nil},
		{"tool round then text", req(u0, aUse, uRes, aText, `{"role":"user","content":"ok"}`), nil},
		{"parallel tools", req(u0,
			`{"role":"assistant","content":[{"type":"text","text":"two"},{"type":"tool_use","id":"a","name":"X","input":{}},{"type":"tool_use","id":"b","name":"Y","input":{}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"b","content":[{"type":"text","text":"B"},{"type":"image","source":{}}]},{"type":"tool_result","tool_use_id":"a","is_error":true},{"type":"text","text":"note"}]}`), nil},
		{"empty thinking with signature", req(u0, `{"role":"assistant","content":[{"type":"thinking","thinking":"","signature":"c2ln"},{"type":"text","text":"x"}]}`, u0), nil},
		{"redacted thinking", req(u0, `{"role":"assistant","content":[{"type":"redacted_thinking","data":"ZGF0YQ=="},{"type":"text","text":"x"}]}`, u0), nil},
		{"prefill empty string", req(u0, `{"role":"assistant","content":""}`), nil},
		{"prefill empty array", req(u0, `{"role":"assistant","content":[]}`), nil},
		{"prefill text", req(u0, `{"role":"assistant","content":"Sure,"}`), nil},
		{"consecutive users", req(u0, u0), nil},
		{"whitespace text beside real text", req(`{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":" "}]}`), nil},
		{"whitespace text beside tool_use", req(u0, `{"role":"assistant","content":[{"type":"text","text":"\n\n"},{"type":"tool_use","id":"t","name":"X","input":{}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":""}]}`), nil},
		{"unknown block and fields", req(`{"role":"user","x":1,"content":[{"type":"mystery","y":[1]},{"type":"text","text":"a","citations":null}]}`), nil},
		{"four markers", `{"model":"m","system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}],"tools":[{"name":"X","cache_control":{"type":"ephemeral"}}],"messages":[` +
			u0 + `,{"role":"assistant","content":[{"type":"tool_use","id":"x","name":"X","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":[{"type":"text","text":"b","cache_control":{"type":"ephemeral","ttl":"5m"}}]},{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]}]}`,
			nil},
		{"null cache_control is no marker", req(`{"role":"user","content":[{"type":"text","text":"a","cache_control":null}]}`), nil},
		{"system string", `{"model":"m","system":"s","messages":[` + u0 + `]}`, nil},
		{"escaped keys", `{"model":"m","messages":[{"r\u006fle":"user","content":[{"typ\u0065":"text","text":"hi"}]}]}`, nil},

		// not a request
		{"invalid json", `{"model":"m","messages":[`, []Rule{RuleJSON}},
		{"trailing data", req(u0) + "x", []Rule{RuleJSON}},
		{"not an object", `[1]`, []Rule{RuleShape}},
		{"no messages", `{"model":"m"}`, []Rule{RuleShape}},
		{"message not an object", `{"model":"m","messages":[1]}`, []Rule{RuleShape}},
		{"message without content", `{"model":"m","messages":[{"role":"user"}]}`, []Rule{RuleShape}},
		{"model missing", `{"messages":[` + u0 + `]}`, []Rule{RuleShape}},
		{"model empty", `{"model":"","messages":[` + u0 + `]}`, []Rule{RuleShape}},
		{"max_tokens zero", `{"model":"m","max_tokens":0,"messages":[` + u0 + `]}`, []Rule{RuleShape}},
		{"max_tokens fraction", `{"model":"m","max_tokens":1.5,"messages":[` + u0 + `]}`, []Rule{RuleShape}},
		{"stream string", `{"model":"m","stream":"yes","messages":[` + u0 + `]}`, []Rule{RuleShape}},
		{"system number", `{"model":"m","system":5,"messages":[` + u0 + `]}`, []Rule{RuleShape}},
		{"system image block", `{"model":"m","system":[{"type":"image"}],"messages":[` + u0 + `]}`, []Rule{RuleShape}},
		{"system empty text", `{"model":"m","system":[{"type":"text","text":""}],"messages":[` + u0 + `]}`, []Rule{RuleEmpty}},
		{"tools object", `{"model":"m","tools":{},"messages":[` + u0 + `]}`, []Rule{RuleShape}},
		{"tool without name", `{"model":"m","tools":[{"x":1}],"messages":[` + u0 + `]}`, []Rule{RuleShape}},
		{"content null", req(`{"role":"user","content":null}`), []Rule{RuleShape}},

		// roles
		{"role tool", req(`{"role":"tool","content":"x"}`), []Rule{RuleRole}},
		{"role missing", req(`{"content":"x"}`), []Rule{RuleRole}},
		{"role not a string", req(`{"role":1,"content":"x"}`), []Rule{RuleRole}},

		// empty content
		{"no messages at all", req(), []Rule{RuleEmpty}},
		{"empty string content", req(`{"role":"user","content":""}`), []Rule{RuleEmpty}},
		{"empty array content", req(`{"role":"user","content":[]}`), []Rule{RuleEmpty}},
		{"empty assistant before the end", req(u0, `{"role":"assistant","content":[]}`, u0), []Rule{RuleEmpty}},
		{"empty system message", req(u0, `{"role":"system","content":""}`), []Rule{RuleEmpty}},
		{"whitespace string", req(`{"role":"user","content":" \n\t"}`), []Rule{RuleEmpty}},
		{"whitespace escapes", req(`{"role":"user","content":"\u0020\n\u3000"}`), []Rule{RuleEmpty}},
		{"whitespace blocks", req(`{"role":"user","content":[{"type":"text","text":" "},{"type":"text","text":"\n"}]}`), []Rule{RuleEmpty}},
		{"empty text block", req(`{"role":"user","content":[{"type":"text","text":""},{"type":"text","text":"x"}]}`), []Rule{RuleEmpty}},
		{"prefill trailing space", req(u0, `{"role":"assistant","content":"Sure, "}`), []Rule{RuleEmpty}},
		{"prefill trailing newline block", req(u0, `{"role":"assistant","content":[{"type":"text","text":"a\n"}]}`), []Rule{RuleEmpty}},

		// blocks
		{"block not an object", req(`{"role":"user","content":["hi"]}`), []Rule{RuleBlock}},
		{"block without type", req(`{"role":"user","content":[{"text":"hi"}]}`), []Rule{RuleBlock}},
		{"text not a string", req(`{"role":"user","content":[{"type":"text","text":1}]}`), []Rule{RuleBlock}},
		{"tool_use in user message", req(`{"role":"user","content":[{"type":"tool_use","id":"a","name":"X","input":{}}]}`), []Rule{RuleBlock}},
		{"tool_use without input", req(u0, `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"X"}]}`, u0), []Rule{RuleBlock}},
		{"tool_use input not an object", req(u0, `{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"X","input":"ls"}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}`), []Rule{RuleBlock}},
		{"tool_result in assistant message", req(u0, `{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"a","content":"x"}]}`), []Rule{RuleBlock}},
		{"tool_result without id", req(`{"role":"user","content":[{"type":"tool_result","content":"x"}]}`), []Rule{RuleBlock}},
		{"tool_result content number", req(u0, aUse, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":5}]}`), []Rule{RuleBlock}},

		// tool ids
		{"bad tool id", req(u0, `{"role":"assistant","content":[{"type":"tool_use","id":"a.b","name":"X","input":{}}]}`,
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a.b"}]}`), []Rule{RuleToolID}},
		{"duplicate tool id", req(u0, aUse, uRes, aUse, uRes), []Rule{RuleToolID}},

		// pairing
		{"result missing", req(u0, aUse, u0), []Rule{RuleToolPairing}},
		{"result message missing", req(u0, aUse, aText, u0), []Rule{RuleToolPairing}},
		{"tool_use in last message", req(u0, aUse), []Rule{RuleToolPairing}},
		{"orphan result", req(u0, uRes), []Rule{RuleToolPairing}},
		{"result after a later message", req(u0, aUse, u0, uRes), []Rule{RuleToolPairing, RuleToolPairing}},
		{"duplicate result", req(u0, aUse, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a"},{"type":"tool_result","tool_use_id":"toolu_1","content":"b"}]}`), []Rule{RuleToolPairing}},
		{"result after text", req(u0, aUse, `{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool_result","tool_use_id":"toolu_1","content":"a"}]}`), []Rule{RuleToolPairing}},
		{"system message between use and result", req(u0, aUse, sys1, uRes), []Rule{RuleToolPairing, RuleToolPairing}},
		{"result for another id", req(u0, aUse, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"a"}]}`), []Rule{RuleToolPairing, RuleToolPairing}},

		// cache_control
		{"five markers", `{"model":"m","system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}],"tools":[{"name":"X","cache_control":{"type":"ephemeral"}}],"messages":[` +
			`{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}},{"type":"text","text":"c","cache_control":{"type":"ephemeral"}}]}]}`,
			[]Rule{RuleCacheControl}},
		{"marker not an object", req(`{"role":"user","content":[{"type":"text","text":"a","cache_control":"ephemeral"}]}`), []Rule{RuleCacheControl}},
		{"marker without type", `{"model":"m","tools":[{"name":"X","cache_control":{}}],"messages":[` + u0 + `]}`, []Rule{RuleCacheControl}},
		{"marker on thinking", req(u0, `{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"c2ln","cache_control":{"type":"ephemeral"}},{"type":"text","text":"x"}]}`, u0), []Rule{RuleCacheControl}},

		// thinking
		{"thinking without signature", req(u0, `{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"x"}]}`, u0), []Rule{RuleThinking}},
		{"thinking with empty signature", req(u0, `{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":""},{"type":"text","text":"x"}]}`, u0), []Rule{RuleThinking}},
		{"thinking signature not a string", req(u0, `{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":null},{"type":"text","text":"x"}]}`, u0), []Rule{RuleThinking}},
		{"thinking text not a string", req(u0, `{"role":"assistant","content":[{"type":"thinking","thinking":1,"signature":"c2ln"},{"type":"text","text":"x"}]}`, u0), []Rule{RuleThinking}},
		{"redacted without data", req(u0, `{"role":"assistant","content":[{"type":"redacted_thinking"},{"type":"text","text":"x"}]}`, u0), []Rule{RuleThinking}},
		{"thinking in user message", req(`{"role":"user","content":[{"type":"thinking","thinking":"t","signature":"c2ln"},{"type":"text","text":"x"}]}`), []Rule{RuleThinking}},
		{"same signature, other text", req(u0, `{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"c2ln"},{"type":"text","text":"x"}]}`, u0,
			`{"role":"assistant","content":[{"type":"thinking","thinking":"T","signature":"c2ln"},{"type":"text","text":"x"}]}`, u0), []Rule{RuleThinking}},

		// several problems at once are all listed
		{"many", req(`{"role":"bot","content":""}`, aUse, aText), []Rule{RuleRole, RuleEmpty, RuleToolPairing}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Request([]byte(tc.body))
			if d := cmp.Diff(tc.want, rulesOf(t, err)); d != "" {
				t.Errorf("rules (-want +got):\n%s\nerror: %v", d, err)
			}
		})
	}
}

func TestRequestClaudeCodeCapture(t *testing.T) {
	body, err := os.ReadFile("../../anthropic/testdata/claude-code-2.1.197-first.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := Request(body); err != nil {
		t.Fatal(err)
	}
}

func TestErrorText(t *testing.T) {
	err := Request([]byte(req(u0, aUse, u0)))
	want := "validate: messages.1.content.1: [tool-pairing] tool_use id \"toolu_1\" was found without a tool_result block in the next message"
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
	err = Request([]byte(req(`{"role":"bot","content":""}`)))
	want = "validate: 2 problems:\n\tmessages.0: [role] role must be user, assistant or system, not \"bot\"\n\tmessages.0: [empty] all messages must have non-empty content except for the optional final assistant message"
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

func TestProblemLimit(t *testing.T) {
	msgs := make([]string, 80)
	for i := range msgs {
		msgs[i] = `{"role":"bot","content":"x"}`
	}
	var e *Error
	if !errors.As(Request([]byte(req(msgs...))), &e) {
		t.Fatal("no *Error")
	}
	if len(e.Problems) != maxProblems || e.Omitted != 80-maxProblems {
		t.Errorf("%d problems, %d omitted", len(e.Problems), e.Omitted)
	}
	if !strings.HasSuffix(e.Error(), "(and 30 more)") {
		t.Errorf("error text ends %q", e.Error()[len(e.Error())-40:])
	}
}
