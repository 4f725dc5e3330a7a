package transcript

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

type span = jsonscan.Span

// ccSession is a session being assembled from JSONL records.
type ccSession struct {
	s            *Session
	pendingGap   int  // malformed lines since the last message record
	pendingReset bool // a compaction boundary since the last message record
}

type ccParser struct {
	path            string
	opt             Options
	byKey           map[string]*ccSession
	order           []*ccSession
	cur             *ccSession
	orphanMalformed int // malformed lines before any session existed
}

// ParseClaudeCode reads a Claude Code JSONL transcript held in data. path
// names the file (for Session.Path and IDs when records carry none). It
// never fails: malformed lines are counted in the Stats of the session
// they occurred in (the session of the preceding record). It returns the
// main session, then one session per subagent, leaving out sessions
// without messages unless none has any (so the counts stay visible).
func ParseClaudeCode(data []byte, path string, opt Options) []*Session {
	p := &ccParser{path: path, opt: opt, byKey: map[string]*ccSession{}}
	eachLine(data, func(lineNo int, line []byte) bool {
		p.line(lineNo, line)
		return true
	})
	var out, empty []*Session
	for _, cs := range p.order {
		normalize(cs.s)
		for i := range cs.s.Messages {
			if m := &cs.s.Messages[i]; m.Role == Assistant && m.Model != "" {
				cs.s.Model = m.Model
				break
			}
		}
		if len(cs.s.Messages) > 0 {
			out = append(out, cs.s)
		} else {
			empty = append(empty, cs.s)
		}
	}
	if len(out) == 0 && len(empty) > 0 {
		out = empty[:1]
	}
	return out
}

// session returns the session for a record, creating it on first use.
func (p *ccParser) session(side bool, agentID, sessionID string) *ccSession {
	key := ""
	if side {
		key = "agent:" + agentID
	}
	if cs := p.byKey[key]; cs != nil {
		if cs.s.ClientSessionID == "" && sessionID != "" {
			cs.s.ClientSessionID = sessionID
			if !side {
				cs.s.ID = sessionID
			}
		}
		return cs
	}
	s := &Session{Path: p.path, Format: ClaudeCode, ClientSessionID: sessionID}
	if side {
		s.Sidechain = true
		parent := sessionID
		if parent == "" {
			parent = baseName(p.path)
		}
		s.Parent = parent
		s.ID = parent + "/agent-" + agentID
	} else {
		s.ID = sessionID
		if s.ID == "" {
			s.ID = baseName(p.path)
		}
	}
	cs := &ccSession{s: s}
	if p.orphanMalformed > 0 {
		s.Stats.Malformed += p.orphanMalformed
		s.Stats.Lines += p.orphanMalformed
		cs.pendingGap += p.orphanMalformed
		p.orphanMalformed = 0
	}
	p.byKey[key] = cs
	p.order = append(p.order, cs)
	return cs
}

func (p *ccParser) line(lineNo int, line []byte) {
	root, err := jsonscan.Root(line)
	if err != nil || jsonscan.KindOf(line, root) != jsonscan.Object {
		if p.cur == nil {
			p.orphanMalformed++
			return
		}
		p.cur.s.Stats.Lines++
		p.cur.s.Stats.Malformed++
		p.cur.pendingGap++
		return
	}
	var (
		typ, subtype, sessionID, agentID string
		side, apiErr                     bool
		msg                              span
	)
	it := jsonscan.Members(line, root)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		switch {
		case jsonscan.KeyIs(line, k, "type"):
			typ = str(line, v)
		case jsonscan.KeyIs(line, k, "subtype"):
			subtype = str(line, v)
		case jsonscan.KeyIs(line, k, "sessionId"):
			sessionID = str(line, v)
		case jsonscan.KeyIs(line, k, "agentId"):
			agentID = str(line, v)
		case jsonscan.KeyIs(line, k, "isSidechain"):
			side = string(v.Bytes(line)) == "true"
		case jsonscan.KeyIs(line, k, "isApiErrorMessage"):
			apiErr = string(v.Bytes(line)) == "true"
		case jsonscan.KeyIs(line, k, "message"):
			msg = v
		}
	}
	if side && p.opt.SkipSidechains {
		cs := p.session(false, "", "")
		cs.s.Stats.Lines++
		cs.s.Stats.Sidechain++
		return
	}
	cs := p.session(side, agentID, sessionID)
	p.cur = cs
	st := &cs.s.Stats
	st.Lines++
	switch typ {
	case "user", "assistant":
	case "system":
		if subtype == "compact_boundary" {
			cs.pendingReset = true
			st.Resets++
			return
		}
		st.Ignored++
		return
	default:
		st.Ignored++
		return
	}
	if jsonscan.KindOf(line, msg) != jsonscan.Object {
		st.Ignored++
		return
	}
	raw := msg.Bytes(line)
	content := member(raw, "content")
	repairsBefore := st.Repairs.Total()
	var last *Message
	if n := len(cs.s.Messages); n > 0 && !cs.pendingReset {
		last = &cs.s.Messages[n-1]
	}
	if typ == "assistant" {
		model := str(raw, member(raw, "model"))
		if model == "<synthetic>" || apiErr {
			st.Synthetic++
			return
		}
		id := str(raw, member(raw, "id"))
		usage := parseUsage(raw, member(raw, "usage"))
		blocks := contentBlocks(raw, content, st)
		if last != nil && last.Role == Assistant && id != "" && last.ID == id {
			last.Blocks = append(last.Blocks, blocks...)
			if usage != nil {
				last.Usage = usage
			}
			if last.Model == "" {
				last.Model = model
			}
			last.Gaps += cs.pendingGap
			st.Merged++
		} else {
			cs.s.Messages = append(cs.s.Messages, Message{Role: Assistant, Blocks: blocks, ID: id, Model: model,
				Usage: usage, Line: lineNo, Reset: cs.pendingReset, Gaps: cs.pendingGap})
		}
	} else {
		blocks := contentBlocks(raw, content, st)
		if last != nil && last.Role == User {
			last.Blocks = append(last.Blocks, blocks...)
			last.Gaps += cs.pendingGap
			st.Merged++
		} else {
			cs.s.Messages = append(cs.s.Messages, Message{Role: User, Blocks: blocks, Line: lineNo,
				Reset: cs.pendingReset, Gaps: cs.pendingGap})
		}
	}
	if st.Repairs.Total() != repairsBefore {
		cs.s.Messages[len(cs.s.Messages)-1].Repaired = true
	}
	cs.pendingGap, cs.pendingReset = 0, false
}

// contentBlocks turns a message's content (a string or an array of block
// objects) into blocks. Array elements that are not objects are dropped
// and counted as bad blocks.
func contentBlocks(raw []byte, content span, st *Stats) []Block {
	switch jsonscan.KindOf(raw, content) {
	case jsonscan.String:
		return []Block{textBlock(content.Bytes(raw))}
	case jsonscan.Array:
		var out []Block
		it := jsonscan.Elements(raw, content)
		for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
			if jsonscan.KindOf(raw, v) != jsonscan.Object {
				st.Repairs.BadBlock++
				continue
			}
			out = append(out, newBlock(compact(v.Bytes(raw)), st))
		}
		return out
	}
	return nil
}

// textBlock makes a text block from a raw JSON string, keeping its bytes.
func textBlock(rawString []byte) Block {
	s := compact(rawString)
	raw := make([]byte, 0, len(s)+24)
	raw = append(raw, `{"type":"text","text":`...)
	raw = append(raw, s...)
	raw = append(raw, '}')
	return Block{Type: "text", Raw: raw, plain: raw[len(raw)-1-len(s) : len(raw)-1]}
}

// newBlock wraps a compact block object, decoding what pairing and
// rendering need.
func newBlock(raw []byte, st *Stats) Block {
	if r, ok := withoutMember(raw, "cache_control"); ok {
		raw = r
		st.Repairs.CacheControl++
	}
	b := Block{Raw: raw}
	typ := member(raw, "type")
	b.Type = str(raw, typ)
	switch b.Type {
	case "tool_use":
		b.ID = str(raw, member(raw, "id"))
		b.bad = b.ID == "" || jsonscan.KindOf(raw, member(raw, "name")) != jsonscan.String || member(raw, "input").IsZero()
	case "tool_result":
		b.ID = str(raw, member(raw, "tool_use_id"))
		b.bad = b.ID == ""
	case "text":
		text := member(raw, "text")
		if jsonscan.KindOf(raw, text) == jsonscan.String && memberCount(raw) == 2 {
			b.plain = text.Bytes(raw)
		}
	case "thinking":
		if sig := member(raw, "signature"); bytes.HasPrefix(sig.Bytes(raw), []byte(`"[REDACTED`)) {
			b.Raw = replaceSpan(raw, sig, quote(redactedSignature(member(raw, "thinking").Bytes(raw))))
			st.Repairs.RedactedSignature++
		}
	}
	return b
}

// redactedSignature stands in for a thinking block's signature that the
// transcript's owner replaced by a redaction marker: every such block
// would otherwise share one signature, which the API (and the validator)
// read as one block whose text was edited, and which a signature cache
// (the thinking guard's, keyed by signature) would re-attribute to the
// model of every later request. The stand-in is a hash of the block's
// thinking text: distinct blocks get distinct signatures, as real ones
// are, and the same block the same one in every request.
func redactedSignature(thinking []byte) string {
	sum := sha256.Sum256(thinking)
	return "ctxguard-replay-redacted-" + hex.EncodeToString(sum[:16])
}

func memberCount(raw []byte) int {
	n := 0
	it := jsonscan.Members(raw, span{Start: 0, End: len(raw)})
	for _, _, ok := it.NextMember(); ok; _, _, ok = it.NextMember() {
		n++
	}
	return n
}

func parseUsage(raw []byte, u span) *Usage {
	if jsonscan.KindOf(raw, u) != jsonscan.Object {
		return nil
	}
	num := func(key string) int { return intMember(raw, u, key) }
	return &Usage{
		InputTokens:              num("input_tokens"),
		CacheCreationInputTokens: num("cache_creation_input_tokens"),
		CacheReadInputTokens:     num("cache_read_input_tokens"),
		OutputTokens:             num("output_tokens"),
	}
}

// intMember returns the non-negative number at member key of the object
// at obj in raw, or 0 when it is absent or not a number.
func intMember(raw []byte, obj span, key string) int {
	s, err := jsonscan.Lookup(raw, obj, key)
	if err != nil || jsonscan.KindOf(raw, s) != jsonscan.Number {
		return 0
	}
	n, err := strconv.Atoi(string(s.Bytes(raw)))
	if err != nil {
		f, err := strconv.ParseFloat(string(s.Bytes(raw)), 64)
		if err != nil || f < 0 || f > 1e12 {
			return 0
		}
		return int(f)
	}
	return max(n, 0)
}

// eachLine calls f with every non-empty line of data (trimmed) and its
// 1-based number, until f returns false.
func eachLine(data []byte, f func(lineNo int, line []byte) bool) {
	lineNo := 0
	for len(data) > 0 {
		var line []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			line, data = data, nil
		}
		lineNo++
		if line = bytes.TrimSpace(line); len(line) > 0 && !f(lineNo, line) {
			return
		}
	}
}
