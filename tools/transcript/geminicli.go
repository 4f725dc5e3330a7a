package transcript

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Gemini CLI chat recordings (~/.gemini/tmp/<project>/chats/
// session-<time>-<id>.jsonl, Gemini CLI 0.61; older versions wrote one
// JSON object, session-*.json). One record a line, read the way the CLI
// itself loads them (packages/core chatRecordingService):
//
//   - a metadata record (sessionId and projectHash; the session id is
//     Session.ID and ClientSessionID);
//   - message records (a string "id"): type "user" or "gemini" with
//     "content" (a string, a part or an array of parts), a gemini record's
//     "toolCalls" [{id, name, args, result}], "tokens" {input, output,
//     cached, thoughts, tool, total} and "model"; types info, error and
//     warning are the CLI's own notes, never sent. A record whose id is
//     already in the history replaces that message where it stands (the
//     CLI writes a gemini record once when the answer ends and again when
//     its tool calls are done);
//   - {"$set": {...}}: a metadata patch; a "messages" member replaces the
//     whole history (the session's opening context, and every time the
//     CLI rewrites its history: chat compression, masking of old tool
//     output);
//   - {"$rewindTo": id}: the history from that message on is dropped.
//
// A request is sent before every gemini message: its history is the
// messages before it. The contents of a request are the messages as the
// CLI's live history holds them (what it sent while the session was
// recorded, not what a later --resume rebuilds):
//
//   - a user message is one user content of its parts (a string content
//     is one text part);
//   - a gemini message is one model content: its text (one text part)
//     and a functionCall part per tool call, {"id","args","name"} in the
//     order the CLI's SDK writes them; when the recorded content already
//     holds functionCall parts, those parts are the content instead;
//   - the tool results are the user message the CLI records after the
//     calls (functionResponse parts); a gemini message with results and no
//     such message after it (older recordings) gets one made from
//     toolCalls[].result. In --acp mode the CLI records the calls in a
//     gemini record of their own, no answer (see message): a model content
//     then takes the calls its results answer from there. A result given
//     twice for one call (a history the CLI resumed) is kept once
//     (Repairs.DuplicateResult);
//   - call ids lose the "<tool name>__" prefix the CLI stores them with,
//     as the CLI strips it before sending (a functionResponse so stripped
//     is written {"name","response","id"}, as the CLI rebuilds it);
//   - thought parts are left out, and consecutive contents of one role
//     are merged, as the CLI does before sending;
//   - the recording does not keep thought signatures, so the first
//     functionCall of each model content carries the CLI's own stand-in,
//     "skip_thought_signature_validator" (what the CLI sends for a history
//     it resumed from disk), unless its part holds a signature.
//
// Usage comes from the gemini record's tokens: input is the prompt
// (cached included), output the answer, thoughts the thinking (billed as
// output). Lines that are not JSON objects are counted in
// Stats.Malformed, records of no known shape in Stats.Ignored; nothing is
// fatal.

// GeminiCLI is the Format of Gemini CLI chat recordings.
const GeminiCLI Format = Codex + 1

// SyntheticThoughtSignature is the thought signature the Gemini CLI puts
// on a function call whose own signature it does not have (a resumed
// history); Gemini models accept it in place of a signature.
const SyntheticThoughtSignature = "skip_thought_signature_validator"

// GeminiMessage is one message of a Gemini CLI history.
type GeminiMessage struct {
	// ID is the record's id.
	ID string
	// Role is "user" or "model".
	Role string
	// Parts are the message's parts as the request carries them, each
	// compact JSON.
	Parts [][]byte
	// Results are the functionResponse parts made from toolCalls[].result
	// of a gemini message (see above), nil if there are none.
	Results [][]byte
	// Line is the 1-based line of the record; Time its timestamp.
	Line int
	Time time.Time
}

// GeminiTurn is one request of a Gemini CLI session.
type GeminiTurn struct {
	// Start and End bound the request's history: Messages[Start:End].
	Start, End int
	// Model is the model the gemini message names.
	Model string
	// Usage is what the API reported for the answer, nil if not recorded.
	Usage *Usage
	// Reset marks a request whose history is not the previous one's with
	// messages appended (the CLI rewrote or rewound its history).
	Reset bool
	// Line and Time are those of the answer's record.
	Line int
	Time time.Time
}

// GeminiSession is what a Gemini CLI session's requests are built from.
type GeminiSession struct {
	ProjectHash string
	// Messages holds every history the session had, one after the other:
	// a rewritten history is appended whole and later turns point into it.
	Messages []GeminiMessage
	Turns    []GeminiTurn
}

// IsGeminiCLI reports whether a file is a Gemini CLI chat recording: its
// first record is a metadata record (an object with "sessionId" and
// "projectHash" members).
func IsGeminiCLI(path string, data []byte) bool {
	first := bytes.TrimSpace(data)
	if !strings.EqualFold(filepath.Ext(path), ".json") {
		eachLine(data, func(_ int, line []byte) bool {
			first = line
			return false
		})
	}
	root, err := jsonscan.Root(first)
	if err != nil || jsonscan.KindOf(first, root) != jsonscan.Object {
		return false
	}
	return jsonscan.KindOf(first, member(first, "sessionId")) == jsonscan.String &&
		jsonscan.KindOf(first, member(first, "projectHash")) == jsonscan.String
}

// maxGeminiMessages caps GeminiSession.Messages. A rewritten history is
// stored again whole, so a file that rewrites a long history over and over
// could grow it with the square of its length; once it holds that many
// (and at most one history more), the records left are counted in
// Stats.Ignored. Real sessions stay far below it.
const maxGeminiMessages = 1 << 20

type geminiParser struct {
	s          *Session
	gs         *GeminiSession
	start      int  // start of the current history in gs.Messages
	dirty      bool // the current history was rewritten since the last turn
	line       int
	calls      map[string][]byte // call id as sent -> its latest toolCalls record
	containers map[string]bool   // ids of tool-call records that are no answer
}

// ParseGeminiCLI reads a Gemini CLI chat recording held in data; path
// names the file. It never fails (see the comment at the top of this
// file).
func ParseGeminiCLI(data []byte, path string) *Session {
	gs := &GeminiSession{}
	s := &Session{ID: baseName(path), Path: path, Format: GeminiCLI, Gemini: gs}
	p := &geminiParser{s: s, gs: gs, calls: map[string][]byte{}, containers: map[string]bool{}}
	if strings.EqualFold(filepath.Ext(path), ".json") {
		p.legacy(bytes.TrimSpace(data))
	} else {
		eachLine(data, func(lineNo int, line []byte) bool {
			s.Stats.Lines++
			p.line = lineNo
			p.record(line)
			return true
		})
	}
	for _, t := range gs.Turns {
		if t.Model != "" {
			s.Model = t.Model
			break
		}
	}
	return s
}

// legacy reads the one JSON object older versions wrote: its messages
// are read as if recorded one by one.
func (p *geminiParser) legacy(data []byte) {
	st := &p.s.Stats
	st.Lines++
	p.line = 1
	root, err := jsonscan.Root(data)
	if err != nil || jsonscan.KindOf(data, root) != jsonscan.Object {
		st.Malformed++
		return
	}
	if id := str(data, member(data, "sessionId")); id != "" {
		p.s.ID, p.s.ClientSessionID = id, id
	}
	p.gs.ProjectHash = str(data, member(data, "projectHash"))
	msgs := member(data, "messages")
	if jsonscan.KindOf(data, msgs) != jsonscan.Array {
		return
	}
	it := jsonscan.Elements(data, msgs)
	for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
		if len(p.gs.Messages) >= maxGeminiMessages {
			st.Ignored++
			continue
		}
		if mb := v.Bytes(data); jsonscan.KindOf(data, v) == jsonscan.Object && jsonscan.KindOf(mb, member(mb, "id")) == jsonscan.String {
			p.message(mb, true)
		} else {
			st.Repairs.BadBlock++
		}
	}
}

func (p *geminiParser) record(line []byte) {
	st := &p.s.Stats
	if len(p.gs.Messages) >= maxGeminiMessages {
		st.Ignored++ // see maxGeminiMessages
		return
	}
	root, err := jsonscan.Root(line)
	if err != nil || jsonscan.KindOf(line, root) != jsonscan.Object {
		st.Malformed++
		return
	}
	switch {
	case jsonscan.KindOf(line, member(line, "$rewindTo")) == jsonscan.String:
		p.rewind(str(line, member(line, "$rewindTo")))
	case jsonscan.KindOf(line, member(line, "id")) == jsonscan.String:
		p.message(line, true)
	case jsonscan.KindOf(line, member(line, "$set")) == jsonscan.Object:
		set := member(line, "$set").Bytes(line)
		if msgs := member(set, "messages"); jsonscan.KindOf(set, msgs) == jsonscan.Array {
			p.replace(set, msgs)
		}
	case jsonscan.KindOf(line, member(line, "sessionId")) == jsonscan.String:
		if id := str(line, member(line, "sessionId")); id != "" {
			p.s.ID, p.s.ClientSessionID = id, id
		}
		p.gs.ProjectHash = str(line, member(line, "projectHash"))
	default:
		st.Ignored++
	}
}

// current returns the index in Messages of the message with id in the
// current history, or -1.
func (p *geminiParser) current(id string) int {
	for i := len(p.gs.Messages) - 1; i >= p.start; i-- {
		if p.gs.Messages[i].ID == id {
			return i
		}
	}
	return -1
}

// sent reports whether message i is part of a request already built.
func (p *geminiParser) sent(i int) bool {
	n := len(p.gs.Turns)
	return n > 0 && p.gs.Turns[n-1].Start == p.start && p.gs.Turns[n-1].End > i
}

// fork starts a new copy of the current history, so that requests built
// already keep theirs; keep is how many of its messages the copy takes.
func (p *geminiParser) fork(keep int) {
	cur := p.gs.Messages[p.start : p.start+keep]
	p.start = len(p.gs.Messages)
	p.gs.Messages = append(p.gs.Messages, cur...)
	p.dirty = true
}

// message reads a message record; turns tells whether a new gemini
// record is an answer (a request was sent for it) rather than part of a
// history rewritten at once.
//
// The CLI also writes records that hold tool calls and are no answer of
// their own: a gemini record whose first write already has toolCalls and
// no tokens (Gemini CLI 0.61 in --acp mode keeps every call of the
// session in one such record, re-written as calls complete). Their calls
// are indexed, and a model content takes from the index the calls the
// user record after it answers.
func (p *geminiParser) message(raw []byte, turns bool) {
	typ := str(raw, member(raw, "type"))
	if typ != "user" && typ != "gemini" {
		p.s.Stats.Ignored++ // info, error, warning: the CLI's own notes
		return
	}
	id := str(raw, member(raw, "id"))
	tc := member(raw, "toolCalls")
	hasCalls := jsonscan.KindOf(raw, tc) == jsonscan.Array && tc.Len() > 2
	if hasCalls {
		p.indexCalls(raw, tc)
	}
	if p.containers[id] || typ == "gemini" && hasCalls && member(raw, "tokens").IsZero() && p.current(id) < 0 {
		p.containers[id] = true
		p.s.Stats.Merged++
		return
	}
	m := p.newMessage(raw, typ)
	if m.Role == "user" {
		p.answer(&m)
	}
	if i := p.current(m.ID); i >= 0 {
		p.s.Stats.Merged++
		if p.sent(i) {
			p.fork(len(p.gs.Messages) - p.start)
			i = p.current(m.ID)
		}
		p.gs.Messages[i] = m
		return
	}
	if typ == "gemini" && turns {
		p.turn(raw)
	}
	p.gs.Messages = append(p.gs.Messages, m)
}

func (p *geminiParser) indexCalls(raw []byte, tc jsonscan.Span) {
	it := jsonscan.Elements(raw, tc)
	for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
		if cb := v.Bytes(raw); jsonscan.KindOf(raw, v) == jsonscan.Object {
			if id, _ := strippedID(cb); id != "" {
				p.calls[id] = cb
			}
		}
	}
}

// answer completes the pairing of a user message m with the model
// message before it: a functionResponse whose call that model content
// lacks gets the call from the index (when the CLI recorded it apart), and
// a second functionResponse for one call since that model message is
// removed (Repairs.DuplicateResult: a history the CLI resumed holds each
// result twice).
func (p *geminiParser) answer(m *GeminiMessage) {
	answered := map[string]bool{}
	model := -1
	for i := len(p.gs.Messages) - 1; i >= p.start; i-- {
		if p.gs.Messages[i].Role == "model" {
			model = i
			break
		}
		for _, pt := range p.gs.Messages[i].Parts {
			if fr := member(pt, "functionResponse"); !fr.IsZero() {
				answered[str(pt[fr.Start:fr.End], member(pt[fr.Start:fr.End], "id"))] = true
			}
		}
	}
	called := map[string]bool{}
	if model >= 0 {
		for _, pt := range p.gs.Messages[model].Parts {
			if fc := member(pt, "functionCall"); !fc.IsZero() {
				called[str(pt[fc.Start:fc.End], member(pt[fc.Start:fc.End], "id"))] = true
			}
		}
	}
	kept := m.Parts[:0]
	added := false
	for _, pt := range m.Parts {
		fr := member(pt, "functionResponse")
		if fr.IsZero() {
			kept = append(kept, pt)
			continue
		}
		id := str(pt[fr.Start:fr.End], member(pt[fr.Start:fr.End], "id"))
		if answered[id] {
			p.s.Stats.Repairs.DuplicateResult++
			continue
		}
		answered[id] = true
		kept = append(kept, pt)
		if model < 0 || called[id] || p.sent(model) {
			continue
		}
		if cb := p.callFor(id); cb != nil {
			mm := &p.gs.Messages[model]
			mm.Parts = append(mm.Parts, functionCallPart(cb, rawMember(cb, "name")))
			called[id] = true
			added = true
		}
	}
	m.Parts = kept
	if added {
		signFirstCall(p.gs.Messages[model].Parts)
	}
}

// callFor returns the indexed call whose id, stripped as sent, is id;
// nil if there is none.
func (p *geminiParser) callFor(id string) []byte {
	cb := p.calls[id]
	if cb == nil || rawMember(cb, "name") == nil {
		return nil
	}
	return cb
}

// turn records the request that produced the gemini record raw.
func (p *geminiParser) turn(raw []byte) {
	t := GeminiTurn{Start: p.start, End: len(p.gs.Messages), Model: str(raw, member(raw, "model")), Line: p.line}
	t.Time = recordTime(raw, member(raw, "timestamp"))
	t.Usage = geminiUsage(raw, member(raw, "tokens"))
	if p.dirty && len(p.gs.Turns) > 0 {
		t.Reset = !p.extends(p.gs.Turns[len(p.gs.Turns)-1], t)
	}
	p.dirty = false
	p.gs.Turns = append(p.gs.Turns, t)
}

// extends reports whether turn t's history is prev's with messages
// appended.
func (p *geminiParser) extends(prev, t GeminiTurn) bool {
	if t.End-t.Start < prev.End-prev.Start {
		return false
	}
	for i := range prev.End - prev.Start {
		a, b := &p.gs.Messages[prev.Start+i], &p.gs.Messages[t.Start+i]
		if a.Role != b.Role || !slices.EqualFunc(a.Parts, b.Parts, bytes.Equal) || !slices.EqualFunc(a.Results, b.Results, bytes.Equal) {
			return false
		}
	}
	return true
}

func (p *geminiParser) rewind(id string) {
	i := p.current(id)
	if i < 0 {
		i = p.start // the CLI clears the history when the id is unknown
	}
	switch {
	case i >= len(p.gs.Messages):
	case p.sent(i):
		p.fork(i - p.start)
	default:
		// No request holds what goes: drop it where it is.
		p.gs.Messages = p.gs.Messages[:i]
		p.dirty = true
	}
}

// replace makes the message records of the array at msgs in raw the
// current history.
func (p *geminiParser) replace(raw []byte, msgs jsonscan.Span) {
	p.start = len(p.gs.Messages)
	p.dirty = true
	it := jsonscan.Elements(raw, msgs)
	for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
		mb := v.Bytes(raw)
		if jsonscan.KindOf(raw, v) != jsonscan.Object || jsonscan.KindOf(mb, member(mb, "id")) != jsonscan.String {
			p.s.Stats.Repairs.BadBlock++
			continue
		}
		p.message(mb, false)
	}
}

// newMessage converts a user or gemini record.
func (p *geminiParser) newMessage(raw []byte, typ string) GeminiMessage {
	m := GeminiMessage{ID: str(raw, member(raw, "id")), Line: p.line, Time: recordTime(raw, member(raw, "timestamp"))}
	m.Parts = contentParts(raw, member(raw, "content"))
	if typ == "user" {
		m.Role = "user"
		return m
	}
	m.Role = "model"
	calls := false
	for _, pt := range m.Parts {
		calls = calls || !member(pt, "functionCall").IsZero()
	}
	if tc := member(raw, "toolCalls"); !calls && jsonscan.KindOf(raw, tc) == jsonscan.Array {
		it := jsonscan.Elements(raw, tc)
		for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
			cb := v.Bytes(raw)
			name := rawMember(cb, "name")
			if jsonscan.KindOf(raw, v) != jsonscan.Object || name == nil {
				p.s.Stats.Repairs.BadBlock++
				continue
			}
			m.Parts = append(m.Parts, functionCallPart(cb, name))
			m.Results = append(m.Results, toolCallResults(cb, name)...)
		}
	}
	signFirstCall(m.Parts)
	return m
}

// contentParts returns a record's content as request parts: a string is
// one text part (none when empty), a part object one part, an array its
// parts (strings as text parts); thought parts and parts that are not
// objects are left out; ids are stripped (stripCallID).
func contentParts(raw []byte, content jsonscan.Span) [][]byte {
	var out [][]byte
	add := func(raw []byte, v jsonscan.Span) {
		switch jsonscan.KindOf(raw, v) {
		case jsonscan.String:
			if v.Len() > 2 {
				out = append(out, textPart(v.Bytes(raw)))
			}
		case jsonscan.Object:
			pt := compact(v.Bytes(raw))
			if isThought(pt) {
				return
			}
			if pt = sendPart(pt); pt != nil {
				out = append(out, pt)
			}
		}
	}
	switch jsonscan.KindOf(raw, content) {
	case jsonscan.Array:
		it := jsonscan.Elements(raw, content)
		for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
			add(raw, v)
		}
	default:
		add(raw, content)
	}
	return out
}

func textPart(rawString []byte) []byte {
	p := append([]byte(`{"text":`), rawString...)
	return append(p, '}')
}

func isThought(part []byte) bool {
	return isTrue(part, member(part, "thought"))
}

// sendPart returns part as the CLI sends it: a functionCall or
// functionResponse whose id carries the "<name>__" prefix rebuilt
// without it, an empty text member beside others removed; nil for a part
// that is only an empty text.
func sendPart(part []byte) []byte {
	if fc := member(part, "functionCall"); jsonscan.KindOf(part, fc) == jsonscan.Object {
		fb := fc.Bytes(part)
		if name := rawMember(fb, "name"); name != nil {
			part = replaceSpan(part, fc, functionCall(fb, name))
		}
	}
	if fr := member(part, "functionResponse"); jsonscan.KindOf(part, fr) == jsonscan.Object {
		fb := fr.Bytes(part)
		if id, ok := strippedID(fb); ok {
			out := []byte(`{"name":`)
			out = append(out, rawMember(fb, "name")...)
			if r := member(fb, "response"); !r.IsZero() {
				out = append(out, `,"response":`...)
				out = append(out, r.Bytes(fb)...)
			}
			out = append(out, `,"id":`...)
			out = jsonscan.AppendQuote(out, id)
			part = replaceSpan(part, fr, append(out, '}'))
		}
	}
	if t := member(part, "text"); jsonscan.KindOf(part, t) == jsonscan.String && t.Len() == 2 {
		if memberCount(part) == 1 {
			return nil
		}
		part, _ = withoutMember(part, "text")
	}
	return part
}

// strippedID returns the id of a functionCall or functionResponse object
// without the "<name>__" prefix; ok is false when it has no such prefix.
func strippedID(obj []byte) (string, bool) {
	id := str(obj, member(obj, "id"))
	name := strings.TrimSpace(str(obj, member(obj, "name")))
	if name == "" {
		name = "generic_tool"
	}
	if rest, ok := strings.CutPrefix(id, name+"__"); ok {
		return rest, true
	}
	return id, false
}

// functionCall writes a functionCall object {"id","args","name"} (the
// order the CLI's SDK sends) from obj, a functionCall object or a
// toolCalls record, whose raw name string is name.
func functionCall(obj, name []byte) []byte {
	out := []byte(`{`)
	if jsonscan.KindOf(obj, member(obj, "id")) == jsonscan.String {
		id, _ := strippedID(obj)
		out = append(out, `"id":`...)
		out = jsonscan.AppendQuote(out, id)
		out = append(out, ',')
	}
	out = append(out, `"args":`...)
	if a := member(obj, "args"); jsonscan.KindOf(obj, a) == jsonscan.Object {
		out = append(out, a.Bytes(obj)...)
	} else {
		out = append(out, `{}`...)
	}
	out = append(out, `,"name":`...)
	out = append(out, name...)
	return append(out, '}')
}

func functionCallPart(call, name []byte) []byte {
	p := append([]byte(`{"functionCall":`), functionCall(call, name)...)
	return append(p, '}')
}

// toolCallResults returns the functionResponse parts of a toolCalls
// record's result: an array of parts as they are, a string as
// {"output": string}, an object as the part itself.
func toolCallResults(call, name []byte) [][]byte {
	r := member(call, "result")
	switch jsonscan.KindOf(call, r) {
	case jsonscan.Array:
		return contentParts(call, r)
	case jsonscan.String:
		id, _ := strippedID(call)
		p := []byte(`{"functionResponse":{"name":`)
		p = append(p, name...)
		p = append(p, `,"response":{"output":`...)
		p = append(p, r.Bytes(call)...)
		p = append(p, `},"id":`...)
		p = jsonscan.AppendQuote(p, id)
		return [][]byte{append(p, '}', '}')}
	case jsonscan.Object:
		return contentParts(call, r)
	}
	return nil
}

// signFirstCall gives the first functionCall part of a model content the
// CLI's stand-in signature when it has none.
func signFirstCall(parts [][]byte) {
	for i, pt := range parts {
		if member(pt, "functionCall").IsZero() {
			continue
		}
		if member(pt, "thoughtSignature").IsZero() {
			parts[i] = appendMember(pt, "thoughtSignature", quote(SyntheticThoughtSignature))
		}
		return
	}
}

// appendMember returns the compact object obj with key: value added as
// its last member.
func appendMember(obj []byte, key string, value []byte) []byte {
	out := make([]byte, 0, len(obj)+len(key)+len(value)+4)
	out = append(out, obj[:len(obj)-1]...)
	if len(obj) > 2 {
		out = append(out, ',')
	}
	out = jsonscan.AppendQuote(out, key)
	out = append(out, ':')
	out = append(out, value...)
	return append(out, '}')
}

// geminiUsage reads a gemini record's tokens.
func geminiUsage(raw []byte, tok jsonscan.Span) *Usage {
	if jsonscan.KindOf(raw, tok) != jsonscan.Object {
		return nil
	}
	in := intMember(raw, tok, "input")
	cached := min(intMember(raw, tok, "cached"), in)
	return &Usage{
		InputTokens:          in - cached,
		CacheReadInputTokens: cached,
		OutputTokens:         intMember(raw, tok, "output") + intMember(raw, tok, "thoughts"),
	}
}
