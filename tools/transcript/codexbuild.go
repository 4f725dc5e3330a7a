package transcript

import (
	"crypto/sha1"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// DefaultCodexModel is the model a Codex request names when neither the
// options nor the rollout name one.
const DefaultCodexModel = "gpt-5.1-codex"

// codexBuilder writes the requests of a Codex rollout as Codex CLI 0.169.0
// sends them over HTTP (research/WIRE.md §1.4, captures/codex-first):
// top-level keys model, stream, input, tools, tool_choice,
// parallel_tool_calls, reasoning, store, include, prompt_cache_key,
// client_metadata; no instructions key: the base instructions travel as
// the first input item, a developer message with an id; then the
// recorded items of the current history, byte for byte; tools from the
// profile (Profile.ResponsesTools, by default the 9 tools Codex 0.169.0
// sent in the capture); reasoning {"effort":E,"summary":"auto"} (effort
// left out when the turn names none); store false; include
// ["reasoning.encrypted_content"]; prompt_cache_key the thread id.
//
// What differs from the real client: the rollout records the base
// instructions Codex was configured with, and Codex may trim them before
// sending (0.169.0 left out its planning section when the plan tool was
// off); the developer message's id is derived from the text here (Codex
// uses a UUIDv5 whose namespace is not recorded); client_metadata holds
// only the ids a rollout records (turn_id, thread_id, root_turn_id,
// x-codex-window-id, session_id), not the installation id or the turn
// metadata header copy; rollouts of Codex 0.9x and older were sent with
// an "instructions" key by those versions, and are rebuilt in the 0.169.0
// layout all the same.
type codexBuilder struct {
	cx    *CodexSession
	id    string
	model string // BuildOptions.Model
	dev   []byte // the base instructions item, nil if none
	tools []byte
}

func newCodexBuilder(s *Session, p *Profile, model string) *codexBuilder {
	b := &codexBuilder{cx: s.Codex, id: s.ClientSessionID, model: model}
	if b.id == "" {
		b.id = s.ID
	}
	if t := s.Codex.Instructions; t != "" {
		b.dev = []byte(`{"type":"message","id":"msg_`)
		b.dev = append(b.dev, textUUID(t)...)
		b.dev = append(b.dev, `","role":"developer","content":[{"type":"input_text","text":`...)
		b.dev = jsonscan.AppendQuote(b.dev, t)
		b.dev = append(b.dev, `}]}`...)
	}
	if len(p.ResponsesTools) > 0 {
		b.tools = compact(p.ResponsesTools)
	}
	return b
}

// textUUID returns a stable UUID-shaped id (version 5 layout) for a text.
func textUUID(t string) string {
	h := sha1.Sum([]byte(t))
	return uuidShaped(h[:16], 5)
}

func (b *codexBuilder) modelFor(t *CodexTurn) string {
	switch {
	case b.model != "":
		return b.model
	case t.Model != "":
		return t.Model
	}
	return DefaultCodexModel
}

func (b *codexBuilder) request(k int) *Request {
	t := &b.cx.Turns[k]
	r := &Request{Index: k, Message: -1, First: t.Start, Usage: t.Usage, Model: b.modelFor(t), Reset: t.Reset}
	r.Body, r.Stable = b.build(t, r.Model)
	return r
}

func (b *codexBuilder) build(t *CodexTurn, model string) ([]byte, int) {
	size := len(b.dev) + len(b.tools) + 512
	for i := t.Start; i < t.End; i++ {
		size += len(b.cx.Items[i].Raw) + 1
	}
	body := make([]byte, 0, size)
	body = append(body, `{"model":`...)
	body = jsonscan.AppendQuote(body, model)
	body = append(body, `,"stream":true,"input":[`...)
	n := 0
	if b.dev != nil {
		body = append(body, b.dev...)
		n++
	}
	for i := t.Start; i < t.End; i++ {
		if n > 0 {
			body = append(body, ',')
		}
		body = append(body, b.cx.Items[i].Raw...)
		n++
	}
	stable := len(body)
	body = append(body, ']')
	if b.tools != nil {
		body = append(body, `,"tools":`...)
		body = append(body, b.tools...)
		body = append(body, `,"tool_choice":"auto","parallel_tool_calls":true`...)
	}
	body = append(body, `,"reasoning":{`...)
	if t.Effort != "" {
		body = append(body, `"effort":`...)
		body = jsonscan.AppendQuote(body, t.Effort)
		body = append(body, ',')
	}
	body = append(body, `"summary":"auto"},"store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":`...)
	body = jsonscan.AppendQuote(body, b.id)
	body = append(body, `,"client_metadata":{`...)
	if t.TurnID != "" {
		body = append(body, `"turn_id":`...)
		body = jsonscan.AppendQuote(body, t.TurnID)
		body = append(body, ',')
	}
	body = append(body, `"thread_id":`...)
	body = jsonscan.AppendQuote(body, b.id)
	if t.TurnID != "" {
		body = append(body, `,"root_turn_id":`...)
		body = jsonscan.AppendQuote(body, t.TurnID)
	}
	body = append(body, `,"x-codex-window-id":`...)
	body = jsonscan.AppendQuote(body, b.id+":0")
	body = append(body, `,"session_id":`...)
	body = jsonscan.AppendQuote(body, b.id)
	body = append(body, `}}`...)
	return body, stable
}
