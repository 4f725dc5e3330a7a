package anthropic

import (
	"errors"
	"os"
	"testing"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

func TestParseClaudeCodeCapture(t *testing.T) {
	body, err := os.ReadFile("testdata/claude-code-2.1.197-first.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	if c.Model != "claude-opus-4-8" || !c.Stream {
		t.Errorf("model %q stream %v", c.Model, c.Stream)
	}
	if c.CacheMarkers != 3 {
		t.Errorf("CacheMarkers = %d, want 3", c.CacheMarkers)
	}
	if len(c.Messages) != 2 || c.Messages[1].Role != conversation.RoleSystem || !c.Messages[1].ContentString {
		t.Fatalf("messages: %+v", c.Messages)
	}
	if got := c.String(c.Messages[0].Blocks[1].Text); got != "say hi" {
		t.Errorf("second block text %q", got)
	}
	if c.Thinking.Value.IsZero() || c.ContextManagement.Value.IsZero() || c.Metadata.Value.IsZero() {
		t.Error("top-level members not found")
	}
}

func TestParseBlocks(t *testing.T) {
	body := []byte(`{"model":"m","messages":[
	 {"role":"user","content":"hi"},
	 {"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"c2ln"},{"type":"text","text":"ok"},
	   {"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}},{"type":"tool_use","id":"toolu_2","name":"Read","input":{}}]},
	 {"role":"user","content":[{"tool_use_id":"toolu_2","type":"tool_result","content":[{"type":"text","text":"file"},{"type":"image","source":{}}],"cache_control":{"type":"ephemeral"}},
	   {"type":"tool_result","tool_use_id":"toolu_\u0031","content":"out","is_error":true},{"type":"mystery","x":[1]}]}
	]}`)
	c, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	u := c.Messages[2]
	r0, r1 := u.Blocks[0], u.Blocks[1]
	if r0.Kind != conversation.ToolResult || c.ToolName(&r0) != "Read" || r0.Call != [2]int{1, 3} {
		t.Errorf("result 0: kind %v name %q call %v", r0.Kind, c.ToolName(&r0), r0.Call)
	}
	if len(r0.Parts) != 2 || r0.Parts[0].Kind != conversation.Text || r0.Parts[1].Kind != conversation.Image {
		t.Errorf("result 0 parts %+v", r0.Parts)
	}
	if c.ToolName(&r1) != "Bash" || !r1.IsError || len(r1.Parts) != 1 || c.String(r1.Parts[0].Text) != "out" {
		t.Errorf("result 1: name %q err %v parts %+v", c.ToolName(&r1), r1.IsError, r1.Parts)
	}
	if u.Blocks[2].Kind != conversation.Opaque || u.Blocks[2].Type != "mystery" {
		t.Errorf("unknown block: %+v", u.Blocks[2])
	}
	if c.CacheMarkers != 1 || r0.CacheControl.IsZero() {
		t.Errorf("markers %d, cc %v", c.CacheMarkers, r0.CacheControl)
	}
	a := c.Messages[1]
	if a.Blocks[0].Kind != conversation.Thinking || c.String(a.Blocks[0].Signature) != "c2ln" {
		t.Errorf("thinking: %+v", a.Blocks[0])
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		body  string
		shape bool
	}{
		{`{"messages":[}`, false},
		{`{"messages":[]} x`, false},
		{`[1]`, true},
		{`{"model":"x"}`, true},
		{`{"messages":{}}`, true},
		{`{"messages":[1]}`, true},
		{`{"messages":[{"role":"user"}]}`, true},
		{`{"model":1,"messages":[]}`, true},
	} {
		_, err := Parse([]byte(tc.body))
		var se *jsonscan.SyntaxError
		switch {
		case err == nil:
			t.Errorf("%s: no error", tc.body)
		case tc.shape && !errors.Is(err, ErrShape):
			t.Errorf("%s: err %v, want ErrShape", tc.body, err)
		case !tc.shape && !errors.As(err, &se):
			t.Errorf("%s: err %v, want a syntax error", tc.body, err)
		}
	}
}
