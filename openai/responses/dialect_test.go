package responses

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/conversation"
)

func TestAppendText(t *testing.T) {
	d := &dialect{}
	tests := []struct {
		role  conversation.Role
		extra string
		want  string
	}{
		{conversation.RoleAssistant, "", `{"type":"output_text","text":"hi"}`},
		{conversation.RoleUser, "", `{"type":"input_text","text":"hi"}`},
		{conversation.RoleDeveloper, "", `{"type":"input_text","text":"hi"}`},
		{conversation.RoleTool, `"detail":"low"`, `{"type":"input_text","text":"hi","detail":"low"}`},
	}
	for _, tt := range tests {
		if got := string(d.AppendText(nil, tt.role, []byte(`"hi"`), []byte(tt.extra))); got != tt.want {
			t.Errorf("AppendText(%v) = %s, want %s", tt.role, got, tt.want)
		}
	}
}

// TestReplaceMessage: a message rewritten from its kept blocks keeps its
// message items whole, drops a reasoning item whose call goes, keeps one
// whose successor stays, and wraps new text in a message item of the
// message's role.
func TestReplaceMessage(t *testing.T) {
	body := `{"input":[{"role":"user","content":"go"},` +
		`{"type":"reasoning","id":"rs_1","encrypted_content":"A"},{"type":"function_call","name":"sh","arguments":"{}","call_id":"c1"},` +
		`{"type":"reasoning","id":"rs_2","encrypted_content":"B"},{"type":"message","id":"m1","role":"assistant","content":[{"type":"output_text","text":"a"},{"type":"output_text","text":"b"}]},` +
		`{"type":"web_search_call","id":"ws_1"},{"type":"reasoning","id":"rs_3","encrypted_content":"C"},{"type":"function_call","name":"sh","arguments":"{}","call_id":"c2"},` +
		`{"type":"function_call_output","call_id":"c1","output":"x"},{"type":"function_call_output","call_id":"c2","output":"y"}]}`
	c, err := Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	m := &c.Messages[1]
	var kept []string
	var blocks [][]byte
	for i := range m.Blocks {
		b := &m.Blocks[i]
		if b.Kind == conversation.ToolCall {
			continue
		}
		k := c.Dialect.KeptBlock(c, m, b)
		if k != nil {
			blocks = append(blocks, k)
			kept = append(kept, string(k))
		}
	}
	want := []string{
		`{"type":"reasoning","id":"rs_2","encrypted_content":"B"}`,
		`{"type":"message","id":"m1","role":"assistant","content":[{"type":"output_text","text":"a"},{"type":"output_text","text":"b"}]}`,
		``,
		`{"type":"web_search_call","id":"ws_1"}`,
	}
	if diff := cmp.Diff(want, kept); diff != "" {
		t.Errorf("kept blocks (-want +got):\n%s", diff)
	}
	blocks = append(blocks, c.Dialect.AppendText(nil, conversation.RoleAssistant, []byte(`"note"`), nil))
	sp, repl := c.Dialect.ReplaceMessage(c, 1, blocks)
	if sp != m.Span {
		t.Errorf("span %v, want the message's %v", sp, m.Span)
	}
	wantRepl := want[0] + "," + want[1] + "," + want[3] + `,{"type":"message","role":"assistant","content":[{"type":"output_text","text":"note"}]}`
	if string(repl) != wantRepl {
		t.Errorf("ReplaceMessage =\n%s\nwant\n%s", repl, wantRepl)
	}
	// The tool side becomes a user message.
	_, repl = c.Dialect.ReplaceMessage(c, 2, [][]byte{c.Dialect.AppendText(nil, conversation.RoleTool, []byte(`"n"`), nil)})
	if want := `{"type":"message","role":"user","content":[{"type":"input_text","text":"n"}]}`; string(repl) != want {
		t.Errorf("tool side: %s", repl)
	}
	// A string input becomes an array.
	c2, _ := Parse([]byte(`{"input":"hello"}`))
	m2 := &c2.Messages[0]
	sp, repl = c2.Dialect.ReplaceMessage(c2, 0, [][]byte{c2.Dialect.KeptBlock(c2, m2, &m2.Blocks[0])})
	if got := string(c2.Body[:sp.Start]) + string(repl) + string(c2.Body[sp.End:]); got != `{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]}]}` || Validate([]byte(got)) != nil {
		t.Errorf("string input rewritten to %s", got)
	}
}

func TestImage(t *testing.T) {
	tests := []struct {
		part string
		want conversation.ImageInfo
		ok   bool
	}{
		{`{"type":"input_image","image_url":"data:image/png;base64,AAAABBBB==","detail":"auto"}`, conversation.ImageInfo{Inline: true, Media: "image/png", Base64: 8}, true},
		{`{"type":"input_image","image_url":"https://x/y.png"}`, conversation.ImageInfo{URL: "https://x/y.png"}, true},
		{`{"type":"input_image","file_id":"file_1"}`, conversation.ImageInfo{URL: "file file_1"}, true},
		{`{"type":"input_image","image_url":"data:image/png,raw"}`, conversation.ImageInfo{}, false},
		{`{"type":"input_text","text":"x"}`, conversation.ImageInfo{}, false},
		{`{"type":"input_image"}`, conversation.ImageInfo{}, false},
	}
	for _, tt := range tests {
		body := `{"input":[{"type":"function_call_output","call_id":"c","output":[` + tt.part + `]}]}`
		c, err := Parse([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := c.Dialect.Image(c, c.Messages[0].Blocks[0].Parts[0].Span)
		if ok != tt.ok || got != tt.want {
			t.Errorf("Image(%s) = %+v %v, want %+v %v", tt.part, got, ok, tt.want, tt.ok)
		}
	}
}

func TestDialectRest(t *testing.T) {
	c, err := Parse([]byte(`{"input":[],"prompt_cache_key":"t-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Dialect
	if d.CacheMarker(c) != nil {
		t.Error("CacheMarker is not nil")
	}
	if e, h := d.Settings(c, conversation.DropInvalidThinking); e != nil || h != nil {
		t.Error("Settings is not empty")
	}
	if got := d.SessionID(c); got != "t-1" {
		t.Errorf("SessionID = %q", got)
	}
	c2, _ := Parse([]byte(`{"input":[],"prompt_cache_key":` + q(strings.Repeat("k", 600)) + `}`))
	if got := c2.Dialect.SessionID(c2); got != "" {
		t.Errorf("SessionID of a huge key = %q", got)
	}
}
