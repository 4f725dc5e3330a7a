package transcript

import (
	"bytes"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// ProtoGemini is Gemini's generateContent API (POST
// /v1beta/models/{model}:streamGenerateContent?alt=sse), as the Gemini
// CLI sends it: the native protocol of Gemini CLI sessions.
const ProtoGemini = "gemini"

// geminiGenerationConfig is the generationConfig Gemini CLI 0.61.0 sent
// in every captured request, to Pro and Flash models alike.
const geminiGenerationConfig = `{"temperature":1,"topP":0.95,"topK":64,"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"HIGH"}}`

// A geminiWriter writes request bodies in the layout Gemini CLI 0.61.0
// sends (tools/transcript/testdata/gemini-cli): top-level keys contents,
// systemInstruction ({"parts":[{"text":...}],"role":"user"}), tools
// ([{"functionDeclarations":[...]}]) and generationConfig; each content
// {"parts":[...],"role":...} with parts first; consecutive contents of
// one role merged into one, and contents without parts left out, as the
// CLI does before sending. The model is not in the body: it is part of
// the URL (Request.Model).
type geminiWriter struct {
	tail []byte // from the end of contents to the end of the body
}

func newGeminiWriter(system string, tools []byte) *geminiWriter {
	t := []byte(`]`)
	if system != "" {
		t = append(t, `,"systemInstruction":{"parts":[{"text":`...)
		t = jsonscan.AppendQuote(t, system)
		t = append(t, `}],"role":"user"}`...)
	}
	if len(tools) > 0 {
		t = append(t, `,"tools":`...)
		t = append(t, tools...)
	}
	t = append(t, `,"generationConfig":`...)
	t = append(t, geminiGenerationConfig...)
	return &geminiWriter{tail: append(t, '}')}
}

// geminiPath is the path the Gemini CLI sends a model's requests to.
func geminiPath(model string) string {
	return "/v1beta/models/" + model + ":streamGenerateContent"
}

// geminiContent is one content to write: its role and its parts,
// comma-joined (empty: none).
type geminiContent struct {
	role  string
	parts []byte
}

// body writes a request of the contents. Stable is the end of the last
// part written: the next request of the same history repeats the body up
// to there (it appends parts to the last content, or closes it and adds
// contents).
func (w *geminiWriter) body(contents []geminiContent) (body []byte, stable int) {
	size := len(w.tail) + 16
	for _, c := range contents {
		size += len(c.parts) + 24
	}
	body = make([]byte, 0, size)
	body = append(body, `{"contents":[`...)
	role := ""
	for _, c := range contents {
		if len(c.parts) == 0 {
			continue
		}
		switch {
		case c.role == role:
			body = append(body, ',')
		case role != "":
			body = appendRole(body, role)
			body = append(body, `,{"parts":[`...)
		default:
			body = append(body, `{"parts":[`...)
		}
		body = append(body, c.parts...)
		role = c.role
	}
	stable = len(body)
	if role != "" {
		body = appendRole(body, role)
	}
	return append(body, w.tail...), stable
}

func appendRole(dst []byte, role string) []byte {
	dst = append(dst, `],"role":`...)
	dst = jsonscan.AppendQuote(dst, role)
	return append(dst, '}')
}

func joinParts(parts [][]byte) []byte {
	return bytes.Join(parts, []byte{','})
}

// geminiCLIBuilder writes the requests of a Gemini CLI session (see
// geminicli.go for the contents) with the system instruction and tools
// of the profile (Profile.GeminiSystem, Profile.GeminiTools: by default
// those Gemini CLI 0.61.0 sent).
type geminiCLIBuilder struct {
	gs    *GeminiSession
	w     *geminiWriter
	model string // BuildOptions.Model
	def   string // Profile.GeminiModel
	cache [][]geminiContent
}

func newGeminiCLIBuilder(s *Session, p *Profile, model string) *geminiCLIBuilder {
	return &geminiCLIBuilder{
		gs:    s.Gemini,
		w:     newGeminiWriter(p.GeminiSystem, compact(p.GeminiTools)),
		model: model,
		def:   p.GeminiModel,
		cache: make([][]geminiContent, len(s.Gemini.Messages)),
	}
}

func (b *geminiCLIBuilder) request(k int) *Request {
	t := &b.gs.Turns[k]
	r := &Request{Index: k, Message: -1, First: t.Start, Usage: t.Usage, Reset: t.Reset, Time: t.Time, Model: b.model}
	if r.Model == "" {
		r.Model = t.Model
	}
	if r.Model == "" {
		r.Model = b.def
	}
	r.Path = geminiPath(r.Model)
	var contents []geminiContent
	for i := t.Start; i < t.End; i++ {
		contents = append(contents, b.contents(i, i+1 < t.End)...)
	}
	r.Body, r.Stable = b.w.body(contents)
	return r
}

// contents returns message i as contents: the message, and for a model
// message whose tool results the history does not hold as the next
// message, a user content of its recorded results. more tells whether a
// message follows i in the request.
func (b *geminiCLIBuilder) contents(i int, more bool) []geminiContent {
	m := &b.gs.Messages[i]
	own := geminiContent{role: m.Role, parts: nil}
	if c := b.cache[i]; c != nil {
		own = c[0]
	} else {
		own.parts = joinParts(m.Parts)
		b.cache[i] = []geminiContent{own}
	}
	if len(m.Results) == 0 {
		return []geminiContent{own}
	}
	if more {
		next := &b.gs.Messages[i+1]
		if next.Role == "user" && hasFunctionResponse(next.Parts) {
			return []geminiContent{own}
		}
	}
	return []geminiContent{own, {role: "user", parts: joinParts(m.Results)}}
}

func hasFunctionResponse(parts [][]byte) bool {
	for _, p := range parts {
		if !member(p, "functionResponse").IsZero() {
			return true
		}
	}
	return false
}

// A geminiRenderer writes a session of Anthropic-shaped messages (Claude
// Code, SWE-agent, tools/sessiongen) as Gemini CLI requests (the layout
// of geminiWriter):
//
//   - the system instruction is the profile's system blocks (or the
//     session's own prompt), joined by blank lines; the tools are the
//     profile's Anthropic tools as one functionDeclarations list (name,
//     description, input_schema as parametersJsonSchema, bytes kept), as
//     the CLI declares its own;
//   - a user message becomes one user content: a functionResponse part
//     per tool_result ({"name","response","id"}, name that of the call
//     it answers; response {"output": text}, or {"error": text} for an
//     is_error result; the text a string result as recorded, or the text
//     parts of an array result joined by newlines), the images of array
//     results as inlineData parts after them, then the message's text
//     (text parts) and images (inlineData for base64 data, fileData for a
//     URL);
//   - an assistant message becomes one model content: text parts and a
//     functionCall part per tool_use ({"id","args","name"}, args the
//     input object); the first functionCall carries the thought
//     signature a history without Gemini signatures needs,
//     SyntheticThoughtSignature. Thinking blocks are left out: their
//     signatures belong to another model family, and the CLI drops
//     thought parts from its history itself.
//
// Strings are copied as the transcript's raw JSON string bytes wherever
// the value is the same string. The model is BuildOptions.Model, else
// Profile.GeminiModel: the transcripts' Claude model names mean nothing
// to the Gemini API.
type geminiRenderer struct {
	s     *Session
	w     *geminiWriter
	model string
	asst  []int
	start []int
	names map[string][]byte // tool_use id -> raw name string
	cache [][]byte
}

func newGeminiRenderer(b *Builder) (*geminiRenderer, error) {
	sys := b.p.joinedSystem()
	tools, err := convertTools(b.p.Tools, ProtoGemini)
	if err != nil {
		return nil, err
	}
	r := &geminiRenderer{s: b.s, w: newGeminiWriter(sys, tools), model: b.model, asst: b.asst, start: b.start,
		names: map[string][]byte{}, cache: make([][]byte, len(b.s.Messages))}
	if r.model == "" {
		r.model = b.p.GeminiModel
	}
	for i := range b.s.Messages {
		for _, blk := range b.s.Messages[i].Blocks {
			if blk.Type == "tool_use" {
				r.names[blk.ID] = rawMember(blk.Raw, "name")
			}
		}
	}
	return r, nil
}

func (r *geminiRenderer) request(k int) *Request {
	ai := r.asst[k]
	first := r.start[ai]
	req := &Request{Index: k, Message: ai, First: first, Usage: r.s.Messages[ai].Usage, Model: r.model, Time: r.s.Messages[ai].Time}
	req.Reset = k > 0 && r.start[r.asst[k-1]] != first
	req.Path = geminiPath(req.Model)
	contents := make([]geminiContent, 0, ai-first)
	for i := first; i < ai; i++ {
		role := "user"
		if r.s.Messages[i].Role == Assistant {
			role = "model"
		}
		contents = append(contents, geminiContent{role: role, parts: r.rendered(i)})
	}
	req.Body, req.Stable = r.w.body(contents)
	return req
}

func (r *geminiRenderer) rendered(i int) []byte {
	return renderedOnce(r.cache, i, func() [][]byte {
		m := &r.s.Messages[i]
		if m.Role == Assistant {
			return r.modelParts(m)
		}
		return r.user(m)
	})
}

func (r *geminiRenderer) user(m *Message) [][]byte {
	var responses, rest [][]byte
	for _, b := range m.Blocks {
		switch b.Type {
		case "tool_result":
			p, images := r.functionResponse(b)
			responses = append(responses, p)
			responses = append(responses, images...)
		case "text":
			if t := rawMember(b.Raw, "text"); t != nil {
				rest = append(rest, textPart(t))
			}
		case "image":
			if p := geminiImage(b.Raw); p != nil {
				rest = append(rest, p)
			}
		}
	}
	return append(responses, rest...)
}

// functionResponse writes a tool_result block as a functionResponse part,
// and the images of an array result as parts of their own.
func (r *geminiRenderer) functionResponse(b Block) ([]byte, [][]byte) {
	content := member(b.Raw, "content")
	var out []byte
	var images [][]byte
	switch jsonscan.KindOf(b.Raw, content) {
	case jsonscan.String:
		out = content.Bytes(b.Raw)
	case jsonscan.Array:
		text := ""
		n := 0
		it := jsonscan.Elements(b.Raw, content)
		for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
			pb := v.Bytes(b.Raw)
			switch str(pb, member(pb, "type")) {
			case "text":
				if n > 0 {
					text += "\n"
				}
				text += str(pb, member(pb, "text"))
				n++
			case "image":
				if p := geminiImage(pb); p != nil {
					images = append(images, p)
				}
			}
		}
		out = jsonscan.AppendQuote(nil, text)
	default:
		out = []byte(`""`)
	}
	key := `{"output":`
	if isTrue(b.Raw, member(b.Raw, "is_error")) {
		key = `{"error":`
	}
	name := r.names[b.ID]
	if name == nil {
		name = []byte(`"unknown"`)
	}
	p := []byte(`{"functionResponse":{"name":`)
	p = append(p, name...)
	p = append(p, `,"response":`...)
	p = append(p, key...)
	p = append(p, out...)
	p = append(p, `},"id":`...)
	p = append(p, orEmpty(rawMember(b.Raw, "tool_use_id"))...)
	return append(p, '}', '}'), images
}

// geminiImage writes an Anthropic image block as an inlineData part
// (base64 data) or a fileData part (a URL); nil when it has neither.
func geminiImage(raw []byte) []byte {
	src := member(raw, "source")
	if jsonscan.KindOf(raw, src) != jsonscan.Object {
		return nil
	}
	sb := src.Bytes(raw)
	if str(sb, member(sb, "type")) == "url" {
		u := rawMember(sb, "url")
		if u == nil {
			return nil
		}
		p := []byte(`{"fileData":{"mimeType":`)
		p = append(p, orEmpty(rawMember(sb, "media_type"))...)
		p = append(p, `,"fileUri":`...)
		p = append(p, u...)
		return append(p, '}', '}')
	}
	data := rawMember(sb, "data")
	if data == nil || len(data) == 2 {
		return nil
	}
	p := []byte(`{"inlineData":{"mimeType":`)
	p = append(p, orEmpty(rawMember(sb, "media_type"))...)
	p = append(p, `,"data":`...)
	p = append(p, data...)
	return append(p, '}', '}')
}

func (r *geminiRenderer) modelParts(m *Message) [][]byte {
	var parts [][]byte
	signed := false
	for _, b := range m.Blocks {
		switch b.Type {
		case "text":
			if t := rawMember(b.Raw, "text"); t != nil {
				parts = append(parts, textPart(t))
			}
		case "tool_use":
			p := []byte(`{"functionCall":{"id":`)
			p = append(p, rawMember(b.Raw, "id")...)
			p = append(p, `,"args":`...)
			if in := member(b.Raw, "input"); jsonscan.KindOf(b.Raw, in) == jsonscan.Object {
				p = append(p, compact(in.Bytes(b.Raw))...)
			} else {
				p = append(p, `{}`...)
			}
			p = append(p, `,"name":`...)
			p = append(p, rawMember(b.Raw, "name")...)
			p = append(p, '}')
			if !signed {
				p = append(p, `,"thoughtSignature":`...)
				p = append(p, quote(SyntheticThoughtSignature)...)
				signed = true
			}
			parts = append(parts, append(p, '}'))
		}
	}
	return parts
}
