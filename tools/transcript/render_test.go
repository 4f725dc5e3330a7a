package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/openai/responses"
)

// checkRendered checks every request of s written as proto: valid JSON,
// valid by the protocol's rules (the Responses adapter's Validate; for
// Chat, every tool call answered by a tool message right after its
// assistant message), and request k+1 repeating request k up to Stable.
func checkRendered(t *testing.T, s *Session, proto string) {
	t.Helper()
	b, err := NewBuilder(s, BuildOptions{Protocol: proto})
	if err != nil {
		t.Fatal(err)
	}
	var prev *Request
	for k := range b.Len() {
		r, err := b.Request(k)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonscan.Valid(r.Body) {
			t.Fatalf("%s %s request %d is not valid JSON", s.ID, proto, k)
		}
		switch proto {
		case ProtoResponses:
			if err := responses.Validate(r.Body); err != nil {
				t.Fatalf("%s request %d: %v", s.ID, k, err)
			}
		case ProtoChat:
			if err := checkChat(r.Body); err != nil {
				t.Fatalf("%s request %d: %v", s.ID, k, err)
			}
		case ProtoGemini:
			if err := checkGemini(r.Body); err != nil {
				t.Fatalf("%s request %d: %v", s.ID, k, err)
			}
		}
		if prev != nil && !r.Reset && !bytes.HasPrefix(r.Body, prev.Body[:prev.Stable]) {
			t.Fatalf("%s %s request %d does not repeat request %d", s.ID, proto, k, k-1)
		}
		prev = r
	}
}

// checkChat checks Chat Completions tool pairing: the tool_calls of an
// assistant message are answered, each once, by the tool messages that
// follow it, and no tool message answers anything else.
func checkChat(body []byte) error {
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	open := map[string]bool{}
	for i, m := range req.Messages {
		switch m.Role {
		case "tool":
			if !open[m.ToolCallID] {
				return fmt.Errorf("message %d answers no open call %q", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
			continue
		case "assistant":
			for _, c := range m.ToolCalls {
				if !json.Valid([]byte(c.Function.Arguments)) {
					return fmt.Errorf("message %d: arguments %q are not JSON", i, c.Function.Arguments)
				}
			}
		}
		if len(open) > 0 {
			return fmt.Errorf("message %d: calls %v unanswered", i, open)
		}
		for _, c := range m.ToolCalls {
			open[c.ID] = true
		}
	}
	return nil
}

func TestRenderTestdata(t *testing.T) {
	for _, f := range testdataFiles(t) {
		ss, err := LoadFile(f, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ss {
			for _, proto := range []string{ProtoResponses, ProtoChat, ProtoGemini} {
				t.Run(filepath.Base(f)+"/"+proto, func(t *testing.T) { checkRendered(t, s, proto) })
			}
		}
	}
}

// The golden files hold the last request of a small real session in
// both OpenAI protocols, byte for byte.
func TestRenderGolden(t *testing.T) {
	ss, err := LoadFile("testdata/claude-code/de0891f0-8f37-4cb1-b2bc-04c278fd5ae2.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, proto := range []string{ProtoResponses, ProtoChat, ProtoGemini} {
		b, err := NewBuilder(ss[0], BuildOptions{Protocol: proto})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := b.Request(b.Len() - 1)
		golden(t, filepath.Join("testdata", "golden", "de0891f0."+proto+".last.json"), r.Body)
	}
}

func TestRenderBlocks(t *testing.T) {
	jl := strings.Join([]string{
		`{"type":"user","sessionId":"S","message":{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO"}},{"type":"text","text":"look \u00e9"}]}}`,
		`{"type":"assistant","message":{"id":"m1","model":"gpt-5.2","role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"SIG"},{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command": "ls"}}]}}`,
		`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j"}}]}]}}`,
		`{"type":"assistant","message":{"id":"m2","model":"gpt-5.2","role":"assistant","content":[{"type":"text","text":"done"}]}}`,
	}, "\n")
	s := ParseClaudeCode([]byte(jl), "x.jsonl", Options{})[0]
	p := DefaultProfile()
	p.System = [3]string{"SYS", "", ""}
	p.Tools = json.RawMessage(`[{"name":"Bash","description":"run","input_schema":{"type":"object"}}]`)
	want := map[string]string{
		ProtoResponses: `{"model":"gpt-5.2","stream":true,"input":[` +
			`{"type":"message","role":"developer","content":[{"type":"input_text","text":"SYS"}]},` +
			`{"type":"message","role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,iVBO"},{"type":"input_text","text":"look \u00e9"}]},` +
			`{"type":"reasoning","summary":[{"type":"summary_text","text":"hmm"}],"encrypted_content":"SIG"},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]},` +
			`{"type":"function_call","call_id":"t1","name":"Bash","arguments":"{\"command\":\"ls\"}"},` +
			`{"type":"function_call_output","call_id":"t1","output":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:image/jpeg;base64,/9j"}]}],` +
			`"tools":[{"type":"function","name":"Bash","description":"run","strict":false,"parameters":{"type":"object"}}],"tool_choice":"auto","parallel_tool_calls":true,` +
			`"reasoning":{"summary":"auto"},"store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"S"}`,
		ProtoChat: `{"model":"gpt-5.2","max_tokens":64000,"messages":[` +
			`{"role":"system","content":"SYS"},` +
			`{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO"}},{"type":"text","text":"look \u00e9"}]},` +
			`{"role":"assistant","content":"ok","reasoning_content":"hmm","tool_calls":[{"id":"t1","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls\"}"}}]},` +
			`{"role":"tool","tool_call_id":"t1","content":"a\n[image]"}],` +
			`"tools":[{"type":"function","function":{"name":"Bash","description":"run","parameters":{"type":"object"}}}],"tool_choice":"auto",` +
			`"stream":true,"stream_options":{"include_usage":true}}`,
		ProtoGemini: `{"contents":[` +
			`{"parts":[{"inlineData":{"mimeType":"image/png","data":"iVBO"}},{"text":"look \u00e9"}],"role":"user"},` +
			`{"parts":[{"text":"ok"},{"functionCall":{"id":"t1","args":{"command":"ls"},"name":"Bash"},"thoughtSignature":"skip_thought_signature_validator"}],"role":"model"},` +
			`{"parts":[{"functionResponse":{"name":"Bash","response":{"output":"a"},"id":"t1"}},{"inlineData":{"mimeType":"image/jpeg","data":"/9j"}}],"role":"user"}],` +
			`"systemInstruction":{"parts":[{"text":"SYS"}],"role":"user"},` +
			`"tools":[{"functionDeclarations":[{"name":"Bash","description":"run","parametersJsonSchema":{"type":"object"}}]}],` +
			`"generationConfig":{"temperature":1,"topP":0.95,"topK":64,"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"HIGH"}}}`,
	}
	for proto, w := range want {
		b, err := NewBuilder(s, BuildOptions{Profile: &p, Protocol: proto})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := b.Request(1)
		if d := cmp.Diff(w, string(r.Body)); d != "" {
			t.Errorf("%s (-want +got):\n%s", proto, d)
		}
		checkRendered(t, s, proto)
	}
	if _, err := NewBuilder(s, BuildOptions{Protocol: "smtp"}); err == nil {
		t.Error("unknown protocol accepted")
	}
	cx := ParseCodex([]byte(`{"type":"session_meta","payload":{"id":"x"}}`), "rollout-x.jsonl")
	if _, err := NewBuilder(cx, BuildOptions{Protocol: ProtoChat}); err == nil {
		t.Error("a Codex session written as chat")
	}
}
