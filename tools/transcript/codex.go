package transcript

import (
	"bytes"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Codex CLI rollouts (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl): one
// record a line, {"timestamp", "type", "payload"}. What ParseCodex reads:
//
//   - session_meta: the thread id (Session.ID, ClientSessionID and the
//     prompt_cache_key of every request), base_instructions (a string, or
//     {"text": ...} since 0.9x) and cli_version;
//   - turn_context: the model, the reasoning effort (payload "effort", or
//     collaboration_mode.settings.reasoning_effort) and turn_id of the
//     requests that follow;
//   - response_item: one Responses API item, kept as the payload's bytes
//     (compacted; Codex writes them compact already) without the
//     "internal_chat_message_metadata_passthrough" member, which Codex
//     records but sends only to its built-in openai provider. Items are
//     either input (messages of role user, developer or system, and
//     *_output items) or output (assistant messages, reasoning and every
//     *_call item): the model wrote them. ghost_snapshot items (Codex's
//     undo records, which it leaves out of requests) are ignored;
//   - compacted: a request that just produced one assistant message and
//     nothing else is marked as the compaction request itself
//     (CodexTurn.Compaction); the history is replaced by
//     payload.replacement_history
//     when it has one, else by one user message holding payload.message
//     (the summary), as older Codex versions rebuilt it; the request
//     after it starts a new history (CodexTurn.Reset);
//   - event_msg with payload.type token_count: the API's usage for the
//     request just answered (info.last_token_usage), recognized by its
//     info.total_token_usage changing; repeats of the same totals and
//     events with info null are ignored.
//
// A request (CodexTurn) is a run of consecutive output items, the answer
// of one POST /v1/responses: its input is every item of the history
// before the run. The run ends at the token_count event that reports its
// usage, or at the next input item (Codex 0.169 writes a tool's output
// before the usage event; that usage is then attached to the request it
// follows, if that one has none yet). Every other record type is counted
// in Stats.Ignored; lines that are not JSON objects in Stats.Malformed,
// items that are not objects with a "type" in Repairs.BadBlock; nothing
// is fatal.

// Codex is the Format of Codex CLI rollouts.
const Codex Format = SWEAgent + 1

// CodexItem is one Responses API item of a rollout's history.
type CodexItem struct {
	Type string // the item's "type"
	Role string // a message item's "role"
	// Raw is the item as recorded, compact, without Codex's internal
	// metadata member (see above).
	Raw []byte
	// Line is the 1-based line of the record (0 for items of a
	// compaction's replacement history: they carry the compacted line).
	Line int
	// Output is set for what the model wrote: assistant messages,
	// reasoning and *_call items.
	Output bool
}

// CodexTurn is one request of a rollout.
type CodexTurn struct {
	// Start and End bound the request's input: Items[Start:End]. Start is
	// the start of the current history (0, or where the last compaction
	// put its replacement history).
	Start, End int
	// Out is the end of the output items the request produced:
	// Items[End:Out].
	Out int
	// Model, Effort and TurnID come from the turn_context before it.
	Model, Effort, TurnID string
	// Usage is the API's usage for the request (input_tokens less
	// cached_input_tokens as InputTokens, cached_input_tokens as
	// CacheReadInputTokens, output_tokens), nil if none was recorded.
	Usage *Usage
	// Reset marks the first request after a compaction.
	Reset bool
	// Line is the line of the request's first output item.
	Line int
	// Compaction marks the request Codex sent to compact the history
	// itself (local compaction): its answer, an assistant message, is the
	// summary, and a compacted record follows it at once. The rollout
	// does not record the compaction prompt Codex appended to that
	// request's input, so the rebuilt request lacks it.
	Compaction bool
}

// CodexSession is what a Codex session's requests are built from.
type CodexSession struct {
	// Instructions are the base instructions from session_meta.
	Instructions string
	CLIVersion   string
	Items        []CodexItem
	Turns        []CodexTurn
}

type codexParser struct {
	s        *Session
	cx       *CodexSession
	start    int    // start of the current history in Items
	run      int    // index of the first item of the open output run, -1 if none
	runLine  int    // its line
	reset    bool   // a compaction since the last request
	lastTot  []byte // total_token_usage of the last token_count
	model    string // from the last turn_context
	effort   string
	turnID   string
	usageFor int // index in Turns of the last request, while it has no usage; -1 otherwise
}

// ParseCodex reads a Codex CLI rollout held in data. path names the file
// (Session.Path, and Session.ID when no session_meta names the thread).
// It never fails (see the comment at the top of this file).
func ParseCodex(data []byte, path string) *Session {
	cx := &CodexSession{}
	s := &Session{ID: baseName(path), Path: path, Format: Codex, Codex: cx}
	p := &codexParser{s: s, cx: cx, run: -1, usageFor: -1}
	eachLine(data, func(lineNo int, line []byte) bool {
		s.Stats.Lines++
		p.line(lineNo, line)
		return true
	})
	p.closeRun(nil)
	for _, t := range cx.Turns {
		if t.Model != "" {
			s.Model = t.Model
			break
		}
	}
	return s
}

func (p *codexParser) line(lineNo int, line []byte) {
	st := &p.s.Stats
	root, err := jsonscan.Root(line)
	if err != nil || jsonscan.KindOf(line, root) != jsonscan.Object {
		st.Malformed++
		return
	}
	typ := str(line, member(line, "type"))
	pl := member(line, "payload")
	if jsonscan.KindOf(line, pl) != jsonscan.Object {
		st.Ignored++
		return
	}
	payload := pl.Bytes(line)
	switch typ {
	case "session_meta":
		if id := str(payload, member(payload, "id")); id != "" {
			p.s.ID, p.s.ClientSessionID = id, id
		}
		bi := member(payload, "base_instructions")
		switch jsonscan.KindOf(payload, bi) {
		case jsonscan.String:
			p.cx.Instructions = str(payload, bi)
		case jsonscan.Object:
			b := bi.Bytes(payload)
			p.cx.Instructions = str(b, member(b, "text"))
		}
		p.cx.CLIVersion = str(payload, member(payload, "cli_version"))
	case "turn_context":
		if m := str(payload, member(payload, "model")); m != "" {
			p.model = m
		}
		p.effort = str(payload, member(payload, "effort"))
		if p.effort == "" {
			if cm := member(payload, "collaboration_mode"); jsonscan.KindOf(payload, cm) == jsonscan.Object {
				if set, err := jsonscan.Lookup(payload, cm, "settings"); err == nil && jsonscan.KindOf(payload, set) == jsonscan.Object {
					if e, err := jsonscan.Lookup(payload, set, "reasoning_effort"); err == nil {
						p.effort = str(payload, e)
					}
				}
			}
		}
		p.turnID = str(payload, member(payload, "turn_id"))
	case "response_item":
		p.item(lineNo, payload)
	case "compacted":
		p.compacted(lineNo, payload)
	case "event_msg":
		if str(payload, member(payload, "type")) != "token_count" {
			st.Ignored++
			return
		}
		p.tokenCount(payload)
	default:
		st.Ignored++
	}
}

// item adds one response_item payload to the history.
func (p *codexParser) item(lineNo int, payload []byte) {
	if str(payload, member(payload, "type")) == "ghost_snapshot" {
		p.s.Stats.Ignored++ // Codex's own undo record, never sent
		return
	}
	it, ok := newCodexItem(payload, &p.s.Stats)
	if !ok {
		return
	}
	it.Line = lineNo
	if it.Output {
		if p.run < 0 {
			p.run, p.runLine = len(p.cx.Items), lineNo
		}
	} else {
		p.closeRun(nil) // the usage that follows, if any, is this request's
	}
	p.cx.Items = append(p.cx.Items, it)
}

// newCodexItem wraps an item object; ok is false (and the item counted
// as a bad block) when it is not an object with a string type.
func newCodexItem(raw []byte, st *Stats) (CodexItem, bool) {
	typ := str(raw, member(raw, "type"))
	if typ == "" {
		st.Repairs.BadBlock++
		return CodexItem{}, false
	}
	raw = compact(raw)
	if r, ok := withoutMember(raw, "internal_chat_message_metadata_passthrough"); ok {
		raw = r
	}
	it := CodexItem{Type: typ, Raw: raw}
	switch {
	case typ == "message":
		it.Role = str(raw, member(raw, "role"))
		it.Output = it.Role == "assistant"
	case typ == "reasoning", hasSuffix(typ, "_call"):
		it.Output = true
	}
	return it, true
}

func hasSuffix(s, suf string) bool {
	return len(s) >= len(suf) && s[len(s)-len(suf):] == suf
}

// closeRun ends the open output run, if any, as a request.
func (p *codexParser) closeRun(u *Usage) {
	if p.run < 0 {
		return
	}
	t := CodexTurn{Start: p.start, End: p.run, Out: len(p.cx.Items), Model: p.model, Effort: p.effort,
		TurnID: p.turnID, Usage: u, Reset: p.reset && len(p.cx.Turns) > 0, Line: p.runLine}
	p.cx.Turns = append(p.cx.Turns, t)
	p.run, p.reset = -1, false
	p.usageFor = -1
	if u == nil {
		p.usageFor = len(p.cx.Turns) - 1
	}
}

func (p *codexParser) compacted(lineNo int, payload []byte) {
	p.closeRun(nil)
	if n := len(p.cx.Turns); n > 0 {
		if t := &p.cx.Turns[n-1]; t.Out == len(p.cx.Items) && t.Out == t.End+1 &&
			p.cx.Items[t.End].Type == "message" && p.cx.Items[t.End].Role == "assistant" {
			t.Compaction = true
		}
	}
	p.usageFor = -1
	st := &p.s.Stats
	st.Resets++
	p.start = len(p.cx.Items)
	p.reset = true
	rh := member(payload, "replacement_history")
	if jsonscan.KindOf(payload, rh) == jsonscan.Array {
		it := jsonscan.Elements(payload, rh)
		for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
			if jsonscan.KindOf(payload, v) != jsonscan.Object {
				st.Repairs.BadBlock++
				continue
			}
			ci, ok := newCodexItem(v.Bytes(payload), st)
			if ok {
				ci.Line = lineNo
				ci.Output = false // history now, whoever wrote it
				p.cx.Items = append(p.cx.Items, ci)
			}
		}
		return
	}
	msg := member(payload, "message")
	if jsonscan.KindOf(payload, msg) != jsonscan.String || msg.Len() == 2 {
		return
	}
	raw := []byte(`{"type":"message","role":"user","content":[{"type":"input_text","text":`)
	raw = append(raw, compact(msg.Bytes(payload))...)
	raw = append(raw, `}]}`...)
	p.cx.Items = append(p.cx.Items, CodexItem{Type: "message", Role: "user", Raw: raw, Line: lineNo})
}

func (p *codexParser) tokenCount(payload []byte) {
	info := member(payload, "info")
	if jsonscan.KindOf(payload, info) != jsonscan.Object {
		return
	}
	ib := info.Bytes(payload)
	tot := member(ib, "total_token_usage")
	if jsonscan.KindOf(ib, tot) != jsonscan.Object {
		return
	}
	if t := tot.Bytes(ib); bytes.Equal(t, p.lastTot) {
		return // the same usage reported again
	} else {
		p.lastTot = append(p.lastTot[:0], t...)
	}
	u := codexUsage(ib, member(ib, "last_token_usage"))
	switch {
	case p.run >= 0:
		p.closeRun(u)
	case p.usageFor >= 0:
		p.cx.Turns[p.usageFor].Usage = u
		p.usageFor = -1
	}
}

// codexUsage converts OpenAI usage (input_tokens includes the cached
// ones) into a Usage.
func codexUsage(raw []byte, sp jsonscan.Span) *Usage {
	if jsonscan.KindOf(raw, sp) != jsonscan.Object {
		return nil
	}
	u := parseUsage(raw, sp)
	c := min(intMember(raw, sp, "cached_input_tokens"), u.InputTokens)
	return &Usage{InputTokens: u.InputTokens - c, CacheReadInputTokens: c, OutputTokens: u.OutputTokens}
}
