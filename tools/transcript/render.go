package transcript

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Protocols a Builder can write a session's requests in
// (BuildOptions.Protocol).
const (
	// ProtoAnthropic is the Messages API as Claude Code sends it (the
	// default for every format but Codex).
	ProtoAnthropic = "anthropic"
	// ProtoResponses is the Responses API (POST /v1/responses), the
	// native protocol of Codex sessions.
	ProtoResponses = "responses"
	// ProtoChat is Chat Completions (POST /v1/chat/completions) as
	// opencode sends it.
	ProtoChat = "chat"
)

// An oaiRenderer writes a session of Anthropic-shaped messages (Claude
// Code, SWE-agent, tools/sessiongen) as OpenAI requests, so that the
// same sessions, and the same generators, exercise every protocol.
//
// Responses (the layout Codex CLI 0.169.0 and opencode use): keys model,
// stream, input, tools, tool_choice, parallel_tool_calls, reasoning,
// store, include, prompt_cache_key. The system prompt (the profile's
// system blocks, or the session's own, joined by blank lines) is the
// first input item, a developer message. A user message becomes its
// tool_result blocks as function_call_output items (call_id = the
// tool_use id; output the result's string content as recorded, or an
// array of input_text / input_image parts), then one user message item
// holding its other blocks (text as input_text, images as input_image
// with a data: URL). An assistant message becomes, in block order:
// thinking as a reasoning item (summary_text = the thinking text,
// encrypted_content = the signature), redacted thinking as a reasoning
// item with only encrypted_content, runs of text blocks as one assistant
// message item of output_text parts, and tool_use as a function_call
// (call_id and name as recorded, arguments the input object encoded as a
// JSON string).
//
// Chat (the layout opencode 1.18 uses): keys model, max_tokens, messages,
// tools, tool_choice, stream, stream_options {"include_usage": true}. The
// system prompt is a role "system" message first. A user message becomes
// one role "tool" message per tool_result (tool_call_id, content a
// string: a string result as recorded, the text parts of an array result
// joined by newlines, images as "[image]"), then a user message (a string
// content for a single text block, else text and image_url parts). An
// assistant message becomes one message: content the text blocks joined
// ("" when there is none), reasoning_content the thinking texts joined
// (when there are some), tool_calls the tool_use blocks. Reasoning items
// at the end of an assistant turn (thinking with nothing after it) are
// left out: the API rejects a reasoning item that no output follows.
//
// Tools are the profile's Anthropic tool schemas converted: name,
// description and input_schema (as parameters, bytes kept) in the
// protocol's function-tool shape. Other block types (documents,
// server-tool blocks) have no equivalent and are left out. Strings are
// copied as the transcript's raw JSON string bytes wherever the value is
// the same string; new strings are quoted as JSON.stringify does. Nothing
// moves between turns, so request k+1 repeats request k up to the end of
// its history (Request.Stable).
type oaiRenderer struct {
	s     *Session
	proto string
	model func(ai int) string
	head  []byte // the system item or message, with its separator
	tail  []byte // from the end of the history to the end
	asst  []int
	start []int
	cache [][]byte // per message: its items, comma-joined (nil: none rendered yet)
}

func newOAIRenderer(b *Builder, proto string) (*oaiRenderer, error) {
	r := &oaiRenderer{s: b.s, proto: proto, asst: b.asst, start: b.start, cache: make([][]byte, len(b.s.Messages))}
	r.model = func(ai int) string {
		if b.model != "" {
			return b.model
		}
		if m := b.s.Messages[ai].Model; m != "" {
			return m
		}
		if b.s.Model != "" {
			return b.s.Model
		}
		return b.p.Model
	}
	sys := b.p.joinedSystem()
	tools, err := convertTools(b.p.Tools, proto)
	if err != nil {
		return nil, err
	}
	id := b.s.ClientSessionID
	if id == "" {
		id = b.s.ID
	}
	switch proto {
	case ProtoResponses:
		if sys != "" {
			r.head = []byte(`{"type":"message","role":"developer","content":[{"type":"input_text","text":`)
			r.head = jsonscan.AppendQuote(r.head, sys)
			r.head = append(r.head, `}]}`...)
		}
		t := []byte(`]`)
		if tools != nil {
			t = append(t, `,"tools":`...)
			t = append(t, tools...)
			t = append(t, `,"tool_choice":"auto","parallel_tool_calls":true`...)
		}
		t = append(t, `,"reasoning":{"summary":"auto"},"store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":`...)
		t = jsonscan.AppendQuote(t, id)
		r.tail = append(t, '}')
	case ProtoChat:
		if sys != "" {
			r.head = []byte(`{"role":"system","content":`)
			r.head = jsonscan.AppendQuote(r.head, sys)
			r.head = append(r.head, '}')
		}
		t := []byte(`]`)
		if tools != nil {
			t = append(t, `,"tools":`...)
			t = append(t, tools...)
			t = append(t, `,"tool_choice":"auto"`...)
		}
		r.tail = append(t, `,"stream":true,"stream_options":{"include_usage":true}}`...)
	default:
		return nil, fmt.Errorf("transcript: unknown protocol %q", proto)
	}
	return r, nil
}

// request builds request k: the history before assistant message k.
func (r *oaiRenderer) request(k int, maxTokens int) *Request {
	ai := r.asst[k]
	first := r.start[ai]
	req := &Request{Index: k, Message: ai, First: first, Usage: r.s.Messages[ai].Usage, Model: r.model(ai), Time: r.s.Messages[ai].Time}
	req.Reset = k > 0 && r.start[r.asst[k-1]] != first
	body := []byte(`{"model":`)
	body = jsonscan.AppendQuote(body, req.Model)
	if r.proto == ProtoResponses {
		body = append(body, `,"stream":true,"input":[`...)
	} else {
		body = append(body, `,"max_tokens":`...)
		body = strconv.AppendInt(body, int64(maxTokens), 10)
		body = append(body, `,"messages":[`...)
	}
	n := 0
	if r.head != nil {
		body = append(body, r.head...)
		n++
	}
	for i := first; i < ai; i++ {
		items := r.rendered(i)
		if len(items) == 0 {
			continue
		}
		if n > 0 {
			body = append(body, ',')
		}
		body = append(body, items...)
		n++
	}
	req.Stable = len(body)
	req.Body = append(body, r.tail...)
	return req
}

func (r *oaiRenderer) rendered(i int) []byte {
	return renderedOnce(r.cache, i, func() [][]byte {
		m := &r.s.Messages[i]
		if m.Role == Assistant {
			return r.assistant(m)
		}
		return r.user(m)
	})
}

// renderedOnce returns cache[i], filling it first with the comma-joined
// items of message i (an empty, non-nil slice when there are none).
func renderedOnce(cache [][]byte, i int, items func() [][]byte) []byte {
	if cache[i] == nil {
		cache[i] = append([]byte{}, bytes.Join(items(), []byte{','})...)
	}
	return cache[i]
}

// joinedSystem returns the profile's system blocks joined by blank lines:
// the system prompt of protocols that have one text for it.
func (p *Profile) joinedSystem() string {
	sys := ""
	for _, t := range p.System {
		if t == "" {
			continue
		}
		if sys != "" {
			sys += "\n\n"
		}
		sys += t
	}
	return sys
}

// rawMember returns the raw bytes of a string member of a block, or nil.
func rawMember(raw []byte, key string) []byte {
	v := member(raw, key)
	if jsonscan.KindOf(raw, v) != jsonscan.String {
		return nil
	}
	return v.Bytes(raw)
}

func (r *oaiRenderer) user(m *Message) [][]byte {
	var items [][]byte
	var parts [][]byte
	var single []byte // the raw string of the only part, when it is text
	for _, b := range m.Blocks {
		switch b.Type {
		case "tool_result":
			items = append(items, r.toolResult(b))
		case "text":
			if t := rawMember(b.Raw, "text"); t != nil {
				parts = append(parts, r.textPart(t, false))
				single = t
			}
		case "image":
			if url := imageURL(b.Raw); url != "" {
				parts = append(parts, r.imagePart(url))
				single = nil
			}
		}
	}
	if len(parts) == 0 {
		return items
	}
	var msg []byte
	if r.proto == ProtoResponses {
		msg = []byte(`{"type":"message","role":"user","content":[`)
	} else {
		msg = []byte(`{"role":"user","content":`)
		if len(parts) == 1 && single != nil {
			msg = append(msg, single...)
			return append(items, append(msg, '}'))
		}
		msg = append(msg, '[')
	}
	for j, p := range parts {
		if j > 0 {
			msg = append(msg, ',')
		}
		msg = append(msg, p...)
	}
	return append(items, append(msg, ']', '}'))
}

func (r *oaiRenderer) textPart(rawText []byte, output bool) []byte {
	var p []byte
	switch {
	case r.proto == ProtoChat:
		p = []byte(`{"type":"text","text":`)
	case output:
		p = []byte(`{"type":"output_text","text":`)
	default:
		p = []byte(`{"type":"input_text","text":`)
	}
	p = append(p, rawText...)
	return append(p, '}')
}

func (r *oaiRenderer) imagePart(url string) []byte {
	if r.proto == ProtoChat {
		p := []byte(`{"type":"image_url","image_url":{"url":`)
		p = jsonscan.AppendQuote(p, url)
		return append(p, '}', '}')
	}
	p := []byte(`{"type":"input_image","image_url":`)
	p = jsonscan.AppendQuote(p, url)
	return append(p, '}')
}

// imageURL returns the URL of an Anthropic image block: a data: URL for
// base64 data, the source's url otherwise; "" when it has neither.
func imageURL(raw []byte) string {
	src := member(raw, "source")
	if jsonscan.KindOf(raw, src) != jsonscan.Object {
		return ""
	}
	sb := src.Bytes(raw)
	if str(sb, member(sb, "type")) == "url" {
		return str(sb, member(sb, "url"))
	}
	data := str(sb, member(sb, "data"))
	if data == "" {
		return ""
	}
	return "data:" + str(sb, member(sb, "media_type")) + ";base64," + data
}

func (r *oaiRenderer) toolResult(b Block) []byte {
	content := member(b.Raw, "content")
	var out []byte
	switch jsonscan.KindOf(b.Raw, content) {
	case jsonscan.String:
		out = content.Bytes(b.Raw)
	case jsonscan.Array:
		if r.proto == ProtoChat {
			out = jsonscan.AppendQuote(nil, joinedText(b.Raw, content))
			break
		}
		out = []byte{'['}
		it := jsonscan.Elements(b.Raw, content)
		n := 0
		for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
			pb := v.Bytes(b.Raw)
			var part []byte
			switch str(pb, member(pb, "type")) {
			case "text":
				if t := rawMember(pb, "text"); t != nil {
					part = r.textPart(t, false)
				}
			case "image":
				if url := imageURL(pb); url != "" {
					part = r.imagePart(url)
				}
			}
			if part == nil {
				continue
			}
			if n > 0 {
				out = append(out, ',')
			}
			out = append(out, part...)
			n++
		}
		out = append(out, ']')
	default:
		out = []byte(`""`)
	}
	idRaw := rawMember(b.Raw, "tool_use_id")
	var item []byte
	if r.proto == ProtoResponses {
		item = append([]byte(`{"type":"function_call_output","call_id":`), idRaw...)
		item = append(item, `,"output":`...)
	} else {
		item = append([]byte(`{"role":"tool","tool_call_id":`), idRaw...)
		item = append(item, `,"content":`...)
	}
	item = append(item, out...)
	return append(item, '}')
}

// joinedText joins the text parts of an array tool result (Anthropic's
// text, or a Responses output's input_text) with newlines, an image
// standing as "[image]".
func joinedText(raw []byte, arr jsonscan.Span) string {
	s := ""
	it := jsonscan.Elements(raw, arr)
	n := 0
	for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
		pb := v.Bytes(raw)
		var t string
		switch str(pb, member(pb, "type")) {
		case "text", "input_text":
			t = str(pb, member(pb, "text"))
		case "image", "input_image":
			t = "[image]"
		default:
			continue
		}
		if n > 0 {
			s += "\n"
		}
		s += t
		n++
	}
	return s
}

func (r *oaiRenderer) assistant(m *Message) [][]byte {
	if r.proto == ProtoChat {
		return [][]byte{r.chatAssistant(m)}
	}
	var items [][]byte
	var texts [][]byte
	flush := func() {
		if len(texts) == 0 {
			return
		}
		it := []byte(`{"type":"message","role":"assistant","content":[`)
		for j, t := range texts {
			if j > 0 {
				it = append(it, ',')
			}
			it = append(it, r.textPart(t, true)...)
		}
		items = append(items, append(it, ']', '}'))
		texts = nil
	}
	for _, b := range m.Blocks {
		switch b.Type {
		case "text":
			if t := rawMember(b.Raw, "text"); t != nil {
				texts = append(texts, t)
			}
			continue
		}
		flush()
		switch b.Type {
		case "thinking":
			it := []byte(`{"type":"reasoning","summary":[`)
			if t := rawMember(b.Raw, "thinking"); t != nil && len(t) > 2 {
				it = append(it, `{"type":"summary_text","text":`...)
				it = append(it, t...)
				it = append(it, '}')
			}
			it = append(it, `],"encrypted_content":`...)
			it = append(it, orEmpty(rawMember(b.Raw, "signature"))...)
			items = append(items, append(it, '}'))
		case "redacted_thinking":
			it := []byte(`{"type":"reasoning","summary":[],"encrypted_content":`)
			it = append(it, orEmpty(rawMember(b.Raw, "data"))...)
			items = append(items, append(it, '}'))
		case "tool_use":
			it := []byte(`{"type":"function_call","call_id":`)
			it = append(it, rawMember(b.Raw, "id")...)
			it = append(it, `,"name":`...)
			it = append(it, rawMember(b.Raw, "name")...)
			it = append(it, `,"arguments":`...)
			it = append(it, arguments(b.Raw)...)
			items = append(items, append(it, '}'))
		}
	}
	flush()
	// The API rejects a reasoning item that nothing the model produced
	// follows (an assistant turn of thinking alone): leave those out.
	for len(items) > 0 && bytes.HasPrefix(items[len(items)-1], []byte(`{"type":"reasoning"`)) {
		items = items[:len(items)-1]
	}
	return items
}

func orEmpty(raw []byte) []byte {
	if raw == nil {
		return []byte(`""`)
	}
	return raw
}

// arguments returns a tool_use block's input as a JSON string holding
// the input object's compact JSON.
func arguments(raw []byte) []byte {
	in := member(raw, "input")
	if in.IsZero() {
		return []byte(`"{}"`)
	}
	return jsonscan.AppendQuote(nil, string(compact(in.Bytes(raw))))
}

func (r *oaiRenderer) chatAssistant(m *Message) []byte {
	var text, think string
	var calls [][]byte
	for _, b := range m.Blocks {
		switch b.Type {
		case "text":
			text += str(b.Raw, member(b.Raw, "text"))
		case "thinking":
			think += str(b.Raw, member(b.Raw, "thinking"))
		case "tool_use":
			c := []byte(`{"id":`)
			c = append(c, rawMember(b.Raw, "id")...)
			c = append(c, `,"type":"function","function":{"name":`...)
			c = append(c, rawMember(b.Raw, "name")...)
			c = append(c, `,"arguments":`...)
			c = append(c, arguments(b.Raw)...)
			calls = append(calls, append(c, '}', '}'))
		}
	}
	msg := []byte(`{"role":"assistant","content":`)
	// A single text block keeps its recorded string bytes.
	if len(m.Blocks) > 0 && countType(m, "text") == 1 {
		for _, b := range m.Blocks {
			if b.Type == "text" {
				msg = append(msg, rawMember(b.Raw, "text")...)
			}
		}
	} else {
		msg = jsonscan.AppendQuote(msg, text)
	}
	if think != "" {
		msg = append(msg, `,"reasoning_content":`...)
		msg = jsonscan.AppendQuote(msg, think)
	}
	if len(calls) > 0 {
		msg = append(msg, `,"tool_calls":[`...)
		for j, c := range calls {
			if j > 0 {
				msg = append(msg, ',')
			}
			msg = append(msg, c...)
		}
		msg = append(msg, ']')
	}
	return append(msg, '}')
}

func countType(m *Message, typ string) int {
	n := 0
	for _, b := range m.Blocks {
		if b.Type == typ {
			n++
		}
	}
	return n
}

// convertTools writes Anthropic tool schemas ({name, description,
// input_schema}) as OpenAI function tools, or for ProtoGemini as one list
// of Gemini function declarations, [{"functionDeclarations":[{"name",
// "description","parametersJsonSchema"}]}] (nil when no tool has a
// name); nil for no tools.
func convertTools(tools []byte, proto string) ([]byte, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	root, err := jsonscan.Root(tools)
	if err != nil {
		return nil, err
	}
	out := []byte{'['}
	if proto == ProtoGemini {
		out = []byte(`[{"functionDeclarations":[`)
	}
	n := 0
	it := jsonscan.Elements(tools, root)
	for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
		if jsonscan.KindOf(tools, v) != jsonscan.Object {
			continue
		}
		t := compact(v.Bytes(tools))
		name := rawMember(t, "name")
		if name == nil {
			continue
		}
		desc := orEmpty(rawMember(t, "description"))
		params := []byte(`{"type":"object","properties":{}}`)
		if s := member(t, "input_schema"); jsonscan.KindOf(t, s) == jsonscan.Object {
			params = s.Bytes(t)
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		switch proto {
		case ProtoGemini:
			out = append(out, `{"name":`...)
			out = append(out, name...)
			out = append(out, `,"description":`...)
			out = append(out, desc...)
			out = append(out, `,"parametersJsonSchema":`...)
			out = append(out, params...)
			out = append(out, '}')
			continue
		case ProtoResponses:
			out = append(out, `{"type":"function","name":`...)
			out = append(out, name...)
			out = append(out, `,"description":`...)
			out = append(out, desc...)
			out = append(out, `,"strict":false,"parameters":`...)
			out = append(out, params...)
			out = append(out, '}')
			continue
		}
		out = append(out, `{"type":"function","function":{"name":`...)
		out = append(out, name...)
		out = append(out, `,"description":`...)
		out = append(out, desc...)
		out = append(out, `,"parameters":`...)
		out = append(out, params...)
		out = append(out, '}', '}')
	}
	if proto == ProtoGemini {
		if n == 0 {
			return nil, nil
		}
		return append(out, `]}]`...), nil
	}
	return append(out, ']'), nil
}
