package responses

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
)

// q quotes s as a JSON string.
func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Round is one tool round of a synthetic Codex session: a reasoning item
// (when Reasoning is set), the call, its output, and, when Text is set,
// an assistant message and a user message after it.
type Round struct {
	Kind      string // "function" (default), "custom", "shell"
	Reasoning bool
	Args      string // function_call arguments (JSON) or custom input
	Output    any    // a string, or []any of parts
	Text      string
}

// Session builds a Responses request body the way Codex sends one: the
// developer instructions, the user's prompt, then the rounds, with
// prompt_cache_key, store false and encrypted reasoning included. extra
// are more items appended at the end (raw JSON).
func Session(rounds []Round, extra ...string) []byte {
	items := []string{
		`{"type":"message","id":"msg_dev","role":"developer","content":[{"type":"input_text","text":` + q("You are Codex. "+strings.Repeat("Be careful. ", 40)) + `}]}`,
		`{"type":"message","id":"msg_user","role":"user","content":[{"type":"input_text","text":"fix the failing build"}]}`,
	}
	for i, r := range rounds {
		id := fmt.Sprintf("call_%04d", i)
		if r.Reasoning {
			items = append(items, fmt.Sprintf(`{"type":"reasoning","id":"rs_%04d","summary":[{"type":"summary_text","text":"**Plan** run it"}],"content":null,"encrypted_content":"gAAAAB%s"}`, i, strings.Repeat("x", 40)))
		}
		out, _ := json.Marshal(r.Output)
		switch r.Kind {
		case "custom":
			items = append(items,
				`{"type":"custom_tool_call","status":"completed","id":"ctc_`+id+`","call_id":"`+id+`","name":"apply_patch","input":`+q(r.Args)+`}`,
				`{"type":"custom_tool_call_output","call_id":"`+id+`","output":`+string(out)+`}`)
		case "shell":
			items = append(items,
				`{"type":"local_shell_call","id":"lsc_`+id+`","call_id":"`+id+`","status":"completed","action":{"type":"exec","command":["ls","-la"],"env":{}}}`,
				`{"type":"local_shell_call_output","call_id":"`+id+`","output":`+string(out)+`}`)
		default:
			args := r.Args
			if args == "" {
				args = `{"cmd": "make test", "yield_time_ms": 2000}`
			}
			items = append(items,
				`{"type":"function_call","status":"completed","id":"fc_`+id+`","name":"exec_command","arguments":`+q(args)+`,"call_id":"`+id+`"}`,
				`{"type":"function_call_output","id":"fco_`+id+`","call_id":"`+id+`","output":`+string(out)+`}`)
		}
		if r.Text != "" {
			items = append(items,
				`{"type":"message","status":"completed","id":"msg_a`+id+`","role":"assistant","content":[{"type":"output_text","text":`+q(r.Text)+`,"annotations":[],"logprobs":[]}]}`,
				`{"type":"message","id":"msg_u`+id+`","role":"user","content":[{"type":"input_text","text":"go on"}]}`)
		}
	}
	items = append(items, extra...)
	return []byte(`{"model":"gpt-5.1-codex","stream":true,"input":[` + strings.Join(items, ",") +
		`],"tools":[{"type":"function","name":"exec_command","parameters":{"type":"object"}}],"tool_choice":"auto","parallel_tool_calls":true,` +
		`"reasoning":{"summary":"auto"},"store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"thread-1","client_metadata":{"x":1.50}}`)
}

// Dump renders a Conversation as lines a test can compare: one per
// message and block, with what each block locates.
func Dump(c *conversation.Conversation) []string {
	out := []string{fmt.Sprintf("model=%q stream=%v continued=%v system=%v tools=%v list=%v session=%q",
		c.Model, c.Stream, c.Continued, !c.System.IsZero(), !c.Tools.IsZero(), !c.List.IsZero(), c.Dialect.SessionID(c))}
	for mi, m := range c.Messages {
		out = append(out, fmt.Sprintf("%d %s string=%v", mi, m.Role, m.ContentString))
		for _, b := range m.Blocks {
			s := fmt.Sprintf("  %s %s", b.Kind, b.Type)
			if !b.ID.IsZero() {
				s += " id=" + c.String(b.ID)
			}
			if !b.Name.IsZero() {
				s += " name=" + c.String(b.Name)
			}
			if b.Call[0] >= 0 {
				s += fmt.Sprintf(" call=%v", b.Call)
			}
			if !b.Input.IsZero() {
				s += fmt.Sprintf(" input=%s encoded=%v", short(string(c.Bytes(b.Input))), b.InputEncoded)
			}
			if !b.Text.IsZero() {
				s += " text=" + short(string(c.Bytes(b.Text)))
			}
			if !b.Content.IsZero() {
				s += " content=" + short(string(c.Bytes(b.Content)))
			}
			for _, p := range b.Parts {
				s += " part:" + p.Kind.String()
				if !p.Text.IsZero() {
					s += "=" + short(string(c.Bytes(p.Text)))
				}
			}
			out = append(out, s)
		}
	}
	return out
}

// short shortens s for a dump.
func short(s string) string {
	if len(s) > 40 {
		return s[:30] + fmt.Sprintf("…(%d)", len(s))
	}
	return s
}
