package conversation_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
)

// One exchange in the three protocols: a user asks, the assistant thinks,
// says a word and calls two tools, one result is a string and the other
// (an error, in the Anthropic one) holds a text part and an image, and
// the assistant answers. The texts carry escapes (\n, \", \u00e9) that
// the accessors must decode, or keep, as their contracts say.
const (
	anthropicBody = `{"model":"claude-sonnet-4-5","stream":true,"system":"be brief","messages":[` +
		`{"role":"user","content":"find the caf\u00e9\nplease"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"look \"here\"","signature":"c2ln"},{"type":"text","text":"Looking."},` +
		`{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls \u00e9"}},` +
		`{"type":"tool_use","id":"toolu_2","name":"Read","input":{"path":"/a"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.go\nb.go"},` +
		`{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":[{"type":"text","text":"line 1"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}]}]},` +
		`{"role":"assistant","content":"Done."}]}`

	chatBody = `{"model":"gpt-5","stream":true,"messages":[` +
		`{"role":"system","content":"be brief"},` +
		`{"role":"user","content":"find the caf\u00e9\nplease"},` +
		`{"role":"assistant","reasoning_content":"look \"here\"","content":"Looking.","tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls \\u00e9\"}"}},` +
		`{"id":"call_2","type":"function","function":{"name":"Read","arguments":"{\"path\":\"/a\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"a.go\nb.go"},` +
		`{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"line 1"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}]},` +
		`{"role":"assistant","content":"Done."}]}`

	responsesBody = `{"model":"gpt-5-codex","stream":true,"instructions":"be brief","input":[` +
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"find the caf\u00e9\nplease"}]},` +
		`{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"ZW5j"},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Looking."}]},` +
		`{"type":"function_call","call_id":"call_1","name":"Bash","arguments":"{\"command\":\"ls \\u00e9\"}"},` +
		`{"type":"custom_tool_call","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch\n*** End Patch"},` +
		`{"type":"function_call_output","call_id":"call_1","output":"a.go\nb.go"},` +
		`{"type":"custom_tool_call_output","call_id":"call_2","output":[{"type":"input_text","text":"line 1"},{"type":"input_image","image_url":"data:image/png;base64,iVBO"}]},` +
		`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}]}`
)

// protocols are the adapters whose parses the accessors are checked on.
var protocols = []struct {
	name  string
	parse func([]byte) (*conversation.Conversation, error)
	body  string
}{
	{"anthropic", anthropic.Parse, anthropicBody},
	{"chat", chat.Parse, chatBody},
	{"responses", responses.Parse, responsesBody},
}

// blockView is what the accessors say about one block.
type blockView struct {
	Kind    string
	Text    string // String(Text): text and thinking
	Name    string // ToolName
	ID      string // String(ID)
	Input   string // Input's span in Input's bytes
	Result  string // ResultText
	Call    [2]int // a result's call, else zero
	IsError bool
}

type messageView struct {
	Role   string
	Blocks []blockView
}

// view reads c through its accessors.
func view(t *testing.T, c *conversation.Conversation) []messageView {
	t.Helper()
	var out []messageView
	for mi := range c.Messages {
		m := &c.Messages[mi]
		mv := messageView{Role: m.Role.String()}
		for bi := range m.Blocks {
			b := &m.Blocks[bi]
			bv := blockView{Kind: b.Kind.String(), Text: c.String(b.Text)}
			switch b.Kind {
			case conversation.ToolCall:
				bv.Name, bv.ID = c.ToolName(b), c.String(b.ID)
				in, sp := c.Input(b)
				bv.Input = string(sp.Bytes(in))
			case conversation.ToolResult:
				bv.Name, bv.ID, bv.Call, bv.IsError = c.ToolName(b), c.String(b.ID), b.Call, b.IsError
				text, err := c.ResultText(b)
				if err != nil {
					t.Fatalf("message %d block %d: ResultText: %v", mi, bi, err)
				}
				bv.Result = string(text)
			}
			mv.Blocks = append(mv.Blocks, bv)
		}
		out = append(out, mv)
	}
	return out
}

// TestAccessors: the neutral model reads the same exchange alike in every
// protocol: decoded texts, tool names (a result's from its call), ids,
// inputs (Anthropic's as sent; OpenAI's arguments decoded from their
// string; a custom tool's free-form input as its JSON string), result
// texts (a string decoded; an array's text parts decoded and other parts
// raw, one per line).
func TestAccessors(t *testing.T) {
	user := messageView{Role: "user", Blocks: []blockView{{Kind: "text", Text: "find the café\nplease"}}}
	done := messageView{Role: "assistant", Blocks: []blockView{{Kind: "text", Text: "Done."}}}
	bash := blockView{Kind: "tool_call", Name: "Bash", Input: `{"command":"ls \u00e9"}`}
	imageResult := func(image string) string { return "line 1\n" + image }
	want := map[string][]messageView{
		"anthropic": {
			user,
			{Role: "assistant", Blocks: []blockView{
				{Kind: "thinking", Text: `look "here"`},
				{Kind: "text", Text: "Looking."},
				withID(bash, "toolu_1"),
				{Kind: "tool_call", Name: "Read", ID: "toolu_2", Input: `{"path":"/a"}`},
			}},
			{Role: "user", Blocks: []blockView{
				{Kind: "tool_result", Name: "Bash", ID: "toolu_1", Result: "a.go\nb.go", Call: [2]int{1, 2}},
				{Kind: "tool_result", Name: "Read", ID: "toolu_2", Call: [2]int{1, 3}, IsError: true,
					Result: imageResult(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}`)},
			}},
			done,
		},
		"chat": {
			{Role: "system", Blocks: []blockView{{Kind: "text", Text: "be brief"}}},
			user,
			{Role: "assistant", Blocks: []blockView{
				{Kind: "opaque"}, // reasoning_content: never interpreted
				{Kind: "text", Text: "Looking."},
				withID(bash, "call_1"),
				{Kind: "tool_call", Name: "Read", ID: "call_2", Input: `{"path":"/a"}`},
			}},
			{Role: "tool", Blocks: []blockView{
				{Kind: "tool_result", Name: "Bash", ID: "call_1", Result: "a.go\nb.go", Call: [2]int{2, 2}},
				{Kind: "tool_result", Name: "Read", ID: "call_2", Call: [2]int{2, 3},
					Result: imageResult(`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}`)},
			}},
			done,
		},
		"responses": {
			user,
			{Role: "assistant", Blocks: []blockView{
				{Kind: "opaque"}, // the reasoning item
				{Kind: "text", Text: "Looking."},
				withID(bash, "call_1"),
				{Kind: "tool_call", Name: "apply_patch", ID: "call_2", Input: `"*** Begin Patch\n*** End Patch"`},
			}},
			{Role: "tool", Blocks: []blockView{
				{Kind: "tool_result", Name: "Bash", ID: "call_1", Result: "a.go\nb.go", Call: [2]int{1, 2}},
				{Kind: "tool_result", Name: "apply_patch", ID: "call_2", Call: [2]int{1, 3},
					Result: imageResult(`{"type":"input_image","image_url":"data:image/png;base64,iVBO"}`)},
			}},
			done,
		},
	}
	eachProtocol(t, func(t *testing.T, name string, c *conversation.Conversation) {
		if d := cmp.Diff(want[name], view(t, c)); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
		if got, want := c.LastAssistant(), len(c.Messages)-1; got != want {
			t.Errorf("LastAssistant() = %d, want %d", got, want)
		}
		if !c.Stream || c.Model == "" {
			t.Errorf("stream %v, model %q", c.Stream, c.Model)
		}
	})
}

// eachProtocol runs f on each protocol's parse of the exchange.
func eachProtocol(t *testing.T, f func(t *testing.T, name string, c *conversation.Conversation)) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			c, err := p.parse([]byte(p.body))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release()
			f(t, p.name, c)
		})
	}
}

func withID(b blockView, id string) blockView { b.ID = id; return b }

// TestAppendTranscript: messages [a, b] as searchable text: a role line
// per message, texts and thinking decoded, a call with its input, a
// result with its decoded text, anything else raw; appended to what dst
// held.
func TestAppendTranscript(t *testing.T) {
	want := map[string]string{
		"anthropic": "=== user ===\nfind the café\nplease\n" +
			"=== assistant ===\nlook \"here\"\nLooking.\n" +
			"[tool call Bash toolu_1] {\"command\":\"ls \\u00e9\"}\n" +
			"[tool call Read toolu_2] {\"path\":\"/a\"}\n" +
			"=== user ===\n[tool result toolu_1]\na.go\nb.go\n[tool result toolu_2]\nline 1\n" +
			`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}}` + "\n",
		"chat": "=== user ===\nfind the café\nplease\n" +
			"=== assistant ===\n" + `"reasoning_content":"look \"here\""` + "\nLooking.\n" +
			"[tool call Bash call_1] {\"command\":\"ls \\u00e9\"}\n" +
			"[tool call Read call_2] {\"path\":\"/a\"}\n" +
			"=== tool ===\n[tool result call_1]\na.go\nb.go\n[tool result call_2]\nline 1\n" +
			`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}}` + "\n",
		"responses": "=== user ===\nfind the café\nplease\n" +
			"=== assistant ===\n" + `{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"ZW5j"}` + "\nLooking.\n" +
			"[tool call Bash call_1] {\"command\":\"ls \\u00e9\"}\n" +
			"[tool call apply_patch call_2] \"*** Begin Patch\\n*** End Patch\"\n" +
			"=== tool ===\n[tool result call_1]\na.go\nb.go\n[tool result call_2]\nline 1\n" +
			`{"type":"input_image","image_url":"data:image/png;base64,iVBO"}` + "\n",
	}
	eachProtocol(t, func(t *testing.T, name string, c *conversation.Conversation) {
		// The first user message to the tool results.
		a := 0
		for c.Messages[a].Role != conversation.RoleUser {
			a++
		}
		got, err := c.AppendTranscript([]byte("kept|"), a, a+2)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff("kept|"+want[name], string(got)); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
		// One message alone.
		last := len(c.Messages) - 1
		got, err = c.AppendTranscript(nil, last, last)
		if err != nil || string(got) != "=== assistant ===\nDone.\n" {
			t.Errorf("the last message alone: %q, %v", got, err)
		}
	})
}

// TestStringAndInput: String decodes any JSON string the body holds and
// is "" for an absent span or a value that is not a string; Input of
// arguments that do not decode to JSON is nil with a zero span, and the
// transcript then shows the arguments as sent.
func TestStringAndInput(t *testing.T) {
	body := []byte(`{"model":"gpt-5","max_tokens":7,"messages":[{"role":"user","content":"\ud83d\ude80 \t\\ \/"},` +
		`{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"Bash","arguments":"not json"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":[]}]}`)
	c, err := chat.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if got := c.String(c.Messages[0].Blocks[0].Text); got != "🚀 \t\\ /" {
		t.Errorf("String of escapes = %q", got)
	}
	if got := c.String(conversation.Span{}); got != "" {
		t.Errorf("String of the zero span = %q", got)
	}
	seven := bytes.Index(body, []byte("7"))
	if got := c.String(conversation.Span{Start: seven, End: seven + 1}); got != "" {
		t.Errorf("String of a number = %q", got)
	}
	call := &c.Messages[1].Blocks[0]
	if in, sp := c.Input(call); in != nil || !sp.IsZero() {
		t.Errorf("Input of arguments that are not JSON: %q, %v", in, sp)
	}
	tr, err := c.AppendTranscript(nil, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := "=== assistant ===\n[tool call Bash c1] \"not json\"\n=== tool ===\n[tool result c1]\n\n"; string(tr) != want {
		t.Errorf("transcript:\n%q\nwant\n%q", tr, want)
	}
	if text, err := c.ResultText(&c.Messages[2].Blocks[0]); err != nil || len(text) != 0 {
		t.Errorf("ResultText of an empty array: %q, %v", text, err)
	}
	// Bytes aliases the body.
	sp := c.Messages[0].Span
	if b := c.Bytes(sp); &b[0] != &body[sp.Start] || len(b) != sp.Len() {
		t.Error("Bytes does not alias the body")
	}
}

func TestLastAssistant(t *testing.T) {
	for _, tc := range []struct {
		messages string
		want     int
	}{
		{`{"role":"user","content":"a"}`, -1},
		{`{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"user","content":"c"}`, 1},
		{`{"role":"assistant","content":"a"},{"role":"assistant","content":"b"}`, 1},
	} {
		c, err := anthropic.Parse([]byte(`{"model":"m","messages":[` + tc.messages + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.LastAssistant(); got != tc.want {
			t.Errorf("%s: LastAssistant() = %d, want %d", tc.messages, got, tc.want)
		}
		c.Release()
	}
}

func TestNames(t *testing.T) {
	for r, want := range map[conversation.Role]string{
		conversation.RoleOther: "other", conversation.RoleUser: "user", conversation.RoleAssistant: "assistant",
		conversation.RoleSystem: "system", conversation.RoleDeveloper: "developer", conversation.RoleTool: "tool",
		conversation.Role(200): "other",
	} {
		if got := r.String(); got != want {
			t.Errorf("Role(%d).String() = %q, want %q", r, got, want)
		}
	}
	for k, want := range map[conversation.Kind]string{
		conversation.Opaque: "opaque", conversation.Text: "text", conversation.ToolCall: "tool_call",
		conversation.ToolResult: "tool_result", conversation.Thinking: "thinking",
		conversation.RedactedThinking: "redacted_thinking", conversation.Image: "image", conversation.Document: "document",
		conversation.Kind(200): "kind(200)",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

// TestFootprint: the arrays' bytes, not the body's: none without
// messages, more for more blocks and parts.
func TestFootprint(t *testing.T) {
	var empty conversation.Conversation
	if n := empty.Footprint(); n != 0 {
		t.Errorf("no messages: %d", n)
	}
	small, err := anthropic.Parse([]byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 10_000) + `"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer small.Release()
	full, err := anthropic.Parse([]byte(anthropicBody))
	if err != nil {
		t.Fatal(err)
	}
	defer full.Release()
	if a, b := small.Footprint(), full.Footprint(); a <= 0 || b <= a || a >= len(small.Body) {
		t.Errorf("footprints: one message of a 10 KB body %d, four messages of nine blocks %d", a, b)
	}
}

// TestRelease: Release runs what the adapter set once, however often it
// is called, and is a no-op without one; it never touches the body. A
// released parse's memory serves the next parse, which reads exactly as
// a parse into fresh memory, and a parse still held is untouched.
func TestRelease(t *testing.T) {
	var c conversation.Conversation
	c.Release() // no adapter: nothing to do
	n := 0
	c.OnRelease(func() { n++ })
	c.Release()
	c.Release()
	if n != 1 {
		t.Errorf("the release function ran %d times", n)
	}
	ignore := []cmp.Option{cmpopts.IgnoreUnexported(conversation.Conversation{}), cmpopts.IgnoreFields(conversation.Conversation{}, "Dialect"), cmpopts.EquateEmpty()}
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			body := []byte(p.body)
			orig := bytes.Clone(body)
			held, err := p.parse(body)
			if err != nil {
				t.Fatal(err)
			}
			if &held.Body[0] != &body[0] {
				t.Error("the conversation copied the body")
			}
			heldView, heldConv := view(t, held), *held
			heldConv.Messages = cloneMessages(held.Messages)
			heldSession := held.Dialect.SessionID(held)
			for range 3 {
				// A larger request, released: its memory goes back to
				// the adapter.
				big, err := p.parse([]byte(strings.Replace(p.body, "Done.", strings.Repeat("Done. ", 5000), 1)))
				if err != nil {
					t.Fatal(err)
				}
				big.Release()
				again, err := p.parse(body)
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(&heldConv, again, ignore...); d != "" {
					t.Fatalf("a parse into released memory differs (-fresh +reused):\n%s", d)
				}
				if got := again.Dialect.SessionID(again); got != heldSession {
					t.Errorf("session id %q, want %q", got, heldSession)
				}
				again.Release()
			}
			if d := cmp.Diff(heldView, view(t, held)); d != "" {
				t.Errorf("a held parse changed while others were released (-before +after):\n%s", d)
			}
			held.Release()
			if !bytes.Equal(body, orig) {
				t.Error("the body changed")
			}
		})
	}
}

// cloneMessages copies messages deeply, so a comparison does not read
// memory an adapter may reuse.
func cloneMessages(ms []conversation.Message) []conversation.Message {
	out := make([]conversation.Message, len(ms))
	for i, m := range ms {
		out[i] = m
		out[i].Blocks = make([]conversation.Block, len(m.Blocks))
		for j, b := range m.Blocks {
			out[i].Blocks[j] = b
			out[i].Blocks[j].Parts = append([]conversation.Part(nil), b.Parts...)
		}
	}
	return out
}
