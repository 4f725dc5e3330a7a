package transcript

import (
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// A codexGemini writes a Codex rollout's requests as Gemini CLI requests
// (the layout of geminiWriter), so that real Codex sessions exercise the
// Gemini protocol too:
//
//   - the system instruction is the rollout's base instructions; the tools
//     are the profile's Responses tools (Profile.ResponsesTools) as one
//     functionDeclarations list: a function tool's parameters as
//     parametersJsonSchema, a custom (free-form) tool as one taking a
//     string "input"; other tools have no equivalent and are left out;
//   - message items: user and developer text (input_text) as user text
//     parts, assistant text (output_text) as model text parts;
//   - function_call, custom_tool_call and local_shell_call items as model
//     functionCall parts ({"id": call_id, "args", "name"}: a function's
//     arguments when they are a JSON object, else {"input": the string};
//     a custom tool's input as {"input": ...}; a shell call's action), the
//     first of each model content carrying SyntheticThoughtSignature;
//   - their *_output items as user functionResponse parts, named as the
//     call they answer, response {"output": the output string, or the
//     text parts of an array output joined by newlines, an image as
//     "[image]"};
//   - reasoning items and every other item are left out (Codex's
//     encrypted reasoning means nothing to Gemini).
//
// The model is BuildOptions.Model, else Profile.GeminiModel.
type codexGemini struct {
	cx    *CodexSession
	w     *geminiWriter
	model string
	names map[string][]byte // call_id -> raw name string
	cache []*geminiContent  // per item; nil until rendered
}

func newCodexGemini(s *Session, p *Profile, model string) *codexGemini {
	g := &codexGemini{cx: s.Codex, model: model, names: map[string][]byte{}, cache: make([]*geminiContent, len(s.Codex.Items))}
	if g.model == "" {
		g.model = p.GeminiModel
	}
	g.w = newGeminiWriter(s.Codex.Instructions, responsesToGemini(p.ResponsesTools))
	for _, it := range s.Codex.Items {
		if id := str(it.Raw, member(it.Raw, "call_id")); id != "" && it.Output {
			if name := rawMember(it.Raw, "name"); name != nil {
				g.names[id] = name
			} else if it.Type == "local_shell_call" {
				g.names[id] = []byte(`"local_shell"`)
			}
		}
	}
	return g
}

func (g *codexGemini) request(k int) *Request {
	t := &g.cx.Turns[k]
	r := &Request{Index: k, Message: -1, First: t.Start, Usage: t.Usage, Model: g.model, Reset: t.Reset, Time: t.Time}
	r.Path = geminiPath(r.Model)
	contents := make([]geminiContent, 0, t.End-t.Start)
	for i := t.Start; i < t.End; i++ {
		contents = append(contents, *g.item(i, t.Start))
	}
	r.Body, r.Stable = g.w.body(contents)
	return r
}

// item renders item i of a history that starts at start (an item
// belongs to one history: a compaction's replacement history is appended
// anew). A call is signed when no model part comes right before it.
func (g *codexGemini) item(i, start int) *geminiContent {
	if c := g.cache[i]; c != nil {
		return c
	}
	it := &g.cx.Items[i]
	raw := it.Raw
	c := &geminiContent{}
	switch it.Type {
	case "message":
		texts := [][]byte{}
		content := member(raw, "content")
		if jsonscan.KindOf(raw, content) == jsonscan.Array {
			el := jsonscan.Elements(raw, content)
			for v, ok := el.NextElement(); ok; v, ok = el.NextElement() {
				pb := v.Bytes(raw)
				if t := rawMember(pb, "text"); t != nil && len(t) > 2 {
					texts = append(texts, textPart(t))
				}
			}
		}
		c.role = "user"
		if str(raw, member(raw, "role")) == "assistant" {
			c.role = "model"
		}
		c.parts = joinParts(texts)
	case "function_call", "custom_tool_call", "local_shell_call":
		c.role = "model"
		p := []byte(`{"functionCall":{"id":`)
		p = append(p, orEmpty(rawMember(raw, "call_id"))...)
		p = append(p, `,"args":`...)
		p = append(p, codexArgs(it)...)
		p = append(p, `,"name":`...)
		name := g.names[str(raw, member(raw, "call_id"))]
		if name == nil {
			name = []byte(`"unknown"`)
		}
		p = append(p, name...)
		p = append(p, '}')
		if g.signs(i, start) {
			p = append(p, `,"thoughtSignature":`...)
			p = append(p, quote(SyntheticThoughtSignature)...)
		}
		c.parts = append(p, '}')
	case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
		c.role = "user"
		id := rawMember(raw, "call_id")
		name := g.names[str(raw, member(raw, "call_id"))]
		if name == nil {
			name = []byte(`"unknown"`)
		}
		p := []byte(`{"functionResponse":{"name":`)
		p = append(p, name...)
		p = append(p, `,"response":{"output":`...)
		out := member(raw, "output")
		switch jsonscan.KindOf(raw, out) {
		case jsonscan.String:
			p = append(p, out.Bytes(raw)...)
		case jsonscan.Array:
			p = jsonscan.AppendQuote(p, joinedText(raw, out))
		default:
			p = append(p, `""`...)
		}
		p = append(p, `},"id":`...)
		p = append(p, orEmpty(id)...)
		c.parts = append(p, '}', '}')
	}
	if c.parts == nil {
		c.parts = []byte{}
	}
	g.cache[i] = c
	return c
}

// signs reports whether the call at item i opens a model content: the
// item with parts before it (from start on) is not the model's.
func (g *codexGemini) signs(i, start int) bool {
	for j := i - 1; j >= start; j-- {
		it := &g.cx.Items[j]
		switch it.Type {
		case "function_call", "custom_tool_call", "local_shell_call":
			return false
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
			return true
		case "message":
			if len(g.item(j, start).parts) > 0 {
				return it.Role != "assistant"
			}
		}
	}
	return true
}

// codexArgs returns a call item's functionCall args: a function's
// arguments when they hold a JSON object, else {"input": string}; a
// custom tool's {"input": input}; a shell call's action.
func codexArgs(it *CodexItem) []byte {
	raw := it.Raw
	switch it.Type {
	case "function_call":
		a := member(raw, "arguments")
		if s := str(raw, a); s != "" {
			if root, err := jsonscan.Root([]byte(s)); err == nil && jsonscan.KindOf([]byte(s), root) == jsonscan.Object {
				return compact([]byte(s))
			}
		}
		return append(append([]byte(`{"input":`), orEmpty(rawMember(raw, "arguments"))...), '}')
	case "custom_tool_call":
		return append(append([]byte(`{"input":`), orEmpty(rawMember(raw, "input"))...), '}')
	}
	if a := member(raw, "action"); jsonscan.KindOf(raw, a) == jsonscan.Object {
		return a.Bytes(raw)
	}
	return []byte(`{}`)
}

// responsesToGemini writes Responses API tools as Gemini function
// declarations (see codexGemini); nil when none converts.
func responsesToGemini(tools []byte) []byte {
	if len(tools) == 0 {
		return nil
	}
	root, err := jsonscan.Root(tools)
	if err != nil || jsonscan.KindOf(tools, root) != jsonscan.Array {
		return nil
	}
	out := []byte(`[{"functionDeclarations":[`)
	n := 0
	el := jsonscan.Elements(tools, root)
	for v, ok := el.NextElement(); ok; v, ok = el.NextElement() {
		t := compact(v.Bytes(tools))
		name := rawMember(t, "name")
		if name == nil {
			continue
		}
		var params []byte
		switch str(t, member(t, "type")) {
		case "function":
			params = []byte(`{"type":"object","properties":{}}`)
			if s := member(t, "parameters"); jsonscan.KindOf(t, s) == jsonscan.Object {
				params = s.Bytes(t)
			}
		case "custom":
			params = []byte(`{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}`)
		default:
			continue
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = append(out, `{"name":`...)
		out = append(out, name...)
		out = append(out, `,"description":`...)
		out = append(out, orEmpty(rawMember(t, "description"))...)
		out = append(out, `,"parametersJsonSchema":`...)
		out = append(out, params...)
		out = append(out, '}')
	}
	if n == 0 {
		return nil
	}
	return append(out, `]}]`...)
}
