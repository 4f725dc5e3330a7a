package compress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/splice"
	"github.com/ctxguard/ctxguard/tools/validate"
)

// call is one tool round in a synthetic request: the assistant's
// tool_use and the user's tool_result. Content is a string, or a []any of
// content blocks for array content.
type call struct {
	tool    string
	content any
	isError bool
}

// reqBody builds a Claude Code-shaped Messages request (streaming, three
// system blocks, a tool list, a system message at messages[1], one
// assistant/user pair per call, the moving cache marker on the last
// block) with encoding/json, which escapes like Claude Code does apart from
// HTML characters (SetEscapeHTML false matches JavaScript).
func reqBody(t testing.TB, calls ...call) []byte {
	t.Helper()
	msgs := []any{
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "<system-reminder>context</system-reminder>"},
			map[string]any{"type": "text", "text": "fix the failing test"},
		}},
		map[string]any{"role": "system", "content": "You are Claude Code. " + strings.Repeat("Be careful. ", 20)},
	}
	for i, c := range calls {
		id := fmt.Sprintf("toolu_%04d", i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "text", "text": "Running " + c.tool},
				map[string]any{"type": "tool_use", "id": id, "name": c.tool, "input": map[string]any{"command": "x"}},
			}},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "tool_result", "tool_use_id": id, "content": c.content, "is_error": c.isError},
			}},
		)
	}
	last := msgs[len(msgs)-1].(map[string]any)["content"].([]any)
	last[len(last)-1].(map[string]any)["cache_control"] = map[string]any{"type": "ephemeral"}
	req := map[string]any{
		"model":      "claude-opus-4-8",
		"max_tokens": 32000,
		"stream":     true,
		"system": []any{
			map[string]any{"type": "text", "text": "You are Claude Code."},
			map[string]any{"type": "text", "text": "Tools guide", "cache_control": map[string]any{"type": "ephemeral"}},
			map[string]any{"type": "text", "text": "Env", "cache_control": map[string]any{"type": "ephemeral"}},
		},
		"tools": []any{
			map[string]any{"name": "Bash", "description": "Run a command", "input_schema": map[string]any{"type": "object"}},
			map[string]any{"name": "Read", "description": "Read a file", "input_schema": map[string]any{"type": "object"}},
		},
		"messages": msgs,
		"thinking": map[string]any{"type": "adaptive"},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func mustNew(t testing.TB, cfg Config) *Pass {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func parse(t testing.TB, body []byte) *conversation.Conversation {
	t.Helper()
	c, err := anthropic.Parse(body)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, body)
	}
	return c
}

// runPass runs p alone on body and returns its edits and the spliced body.
func runPass(t testing.TB, p *Pass, body []byte) ([]splice.Edit, []byte) {
	t.Helper()
	c := parse(t, body)
	edits, err := p.Run(&pipeline.Request{Conv: c})
	if err != nil {
		t.Fatal(err)
	}
	var set splice.Set
	for _, e := range edits {
		if err := set.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	out, err := set.Apply(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Rewrite(body, out, validate.Options{}); err != nil {
		t.Fatalf("validate.Rewrite: %v", err)
	}
	return edits, out
}

func readFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/real/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// textSpans returns the Text spans of every text part of every tool
// result, and the Span of every image part.
func textSpans(c *conversation.Conversation) (texts, images []conversation.Span) {
	for _, m := range c.Messages {
		for _, b := range m.Blocks {
			if b.Kind != conversation.ToolResult {
				continue
			}
			for _, p := range b.Parts {
				switch p.Kind {
				case conversation.Text:
					texts = append(texts, p.Text)
				case conversation.Image:
					images = append(images, p.Span)
				}
			}
		}
	}
	return texts, images
}

// allOff returns a config with every rule switched off but the pass on.
func allOff() Config {
	c := Defaults()
	c.ANSI.Enabled = false
	c.CarriageReturns.Enabled = false
	c.Base64.Enabled = false
	c.Images.Replace = false
	c.HTML.Enabled = false
	c.Snapshot.Enabled = false
	c.LineClip.Enabled = false
	c.HeadLines.Enabled = false
	c.Cap.Enabled = false
	return c
}
