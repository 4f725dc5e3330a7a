package validate

import (
	"bytes"
	"errors"
	"hash/maphash"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

type (
	span  = jsonscan.Span
	conv  = conversation.Conversation
	msg   = conversation.Message
	block = conversation.Block
)

// maxMarkers is the API's limit on cache_control markers per request.
const maxMarkers = 4

func parse(body []byte) (c *conv, err error) {
	// Parse is documented never to panic; a panic here would be a bug in
	// the adapter, which a validator must report rather than crash on.
	defer func() {
		if v := recover(); v != nil {
			c, err = nil, errors.New("anthropic.Parse panicked: "+toString(v))
		}
	}()
	return anthropic.Parse(body)
}

func toString(v any) string {
	if e, ok := v.(error); ok {
		return e.Error()
	}
	if s, ok := v.(string); ok {
		return s
	}
	return "non-string panic value"
}

func mpath(i int) string { return "messages." + strconv.Itoa(i) }

func bpath(i, j int) string { return mpath(i) + ".content." + strconv.Itoa(j) }

// checkRequest adds the problems of body to ps and returns its parse, or
// nil when it does not parse.
func checkRequest(body []byte, ps *problems) *conv {
	c, err := parse(body)
	if err != nil {
		var se *jsonscan.SyntaxError
		if errors.As(err, &se) {
			ps.add(RuleJSON, "", "%v", err)
		} else {
			ps.add(RuleShape, "", "%v", err)
		}
		return nil
	}
	r := reqChecker{c: c, b: body, ps: ps, seed: maphash.MakeSeed()}
	r.topLevel()
	r.messages()
	r.pairing()
	if c.CacheMarkers > maxMarkers {
		ps.add(RuleCacheControl, "", "%d cache_control markers; the API allows at most %d", c.CacheMarkers, maxMarkers)
	}
	return c
}

type reqChecker struct {
	c    *conv
	b    []byte
	ps   *problems
	seed maphash.Seed
}

func (r *reqChecker) kind(s span) jsonscan.Kind { return jsonscan.KindOf(r.b, s) }

func (r *reqChecker) topLevel() {
	b := r.b
	if r.c.Model == "" {
		r.ps.add(RuleShape, "model", "model is missing or empty")
	}
	for _, m := range rootMembers(r.c) {
		k, v := m.key, m.val
		switch {
		case jsonscan.KeyIs(b, k, "max_tokens"):
			if !positiveInt(v.Bytes(b)) {
				r.ps.add(RuleShape, "max_tokens", "max_tokens must be a positive integer, not %s", short(v.Bytes(b)))
			}
		case jsonscan.KeyIs(b, k, "stream"):
			if r.kind(v) != jsonscan.Bool {
				r.ps.add(RuleShape, "stream", "stream must be a boolean")
			}
		case jsonscan.KeyIs(b, k, "system"):
			r.system(v)
		case jsonscan.KeyIs(b, k, "tools"):
			r.tools(v)
		}
	}
	if len(r.c.Messages) == 0 {
		r.ps.add(RuleEmpty, "messages", "messages is empty")
	}
}

func positiveInt(v []byte) bool {
	if len(v) == 0 || len(v) > 18 || v[0] < '1' || v[0] > '9' {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// short quotes a value for a message, cut to a readable length.
func short(v []byte) string {
	if len(v) > 40 {
		return string(v[:37]) + "..."
	}
	return string(v)
}

func (r *reqChecker) system(v span) {
	switch r.kind(v) {
	case jsonscan.String:
		return
	case jsonscan.Array:
	default:
		r.ps.add(RuleShape, "system", "system must be a string or an array of text blocks")
		return
	}
	it := jsonscan.Elements(r.b, v)
	i := 0
	for e, ok := it.NextElement(); ok; e, ok = it.NextElement() {
		p := "system." + strconv.Itoa(i)
		i++
		if r.kind(e) != jsonscan.Object {
			r.ps.add(RuleShape, p, "system block is not an object")
			continue
		}
		typ, _ := jsonscan.Lookup(r.b, e, "type")
		if !jsonscan.StringIs(r.b, typ, "text") {
			r.ps.add(RuleShape, p, "system block type must be \"text\"")
			continue
		}
		text, err := jsonscan.Lookup(r.b, e, "text")
		switch {
		case err != nil || r.kind(text) != jsonscan.String:
			r.ps.add(RuleShape, p, "system text block without a string text")
		case text.Len() == 2:
			r.ps.add(RuleEmpty, p, "system: text content blocks must be non-empty")
		}
		r.marker(e, p)
	}
}

func (r *reqChecker) tools(v span) {
	if r.kind(v) != jsonscan.Array {
		r.ps.add(RuleShape, "tools", "tools must be an array")
		return
	}
	it := jsonscan.Elements(r.b, v)
	i := 0
	for e, ok := it.NextElement(); ok; e, ok = it.NextElement() {
		p := "tools." + strconv.Itoa(i)
		i++
		if r.kind(e) != jsonscan.Object {
			r.ps.add(RuleShape, p, "tool is not an object")
			continue
		}
		if name, err := jsonscan.Lookup(r.b, e, "name"); err != nil || r.kind(name) != jsonscan.String {
			r.ps.add(RuleShape, p, "tool without a string name")
		}
		r.marker(e, p)
	}
}

// marker checks the cache_control member of the object obj, if any.
func (r *reqChecker) marker(obj span, path string) {
	cc, err := jsonscan.Lookup(r.b, obj, "cache_control")
	if err != nil {
		return
	}
	switch r.kind(cc) {
	case jsonscan.Null:
	case jsonscan.Object:
		if t, err := jsonscan.Lookup(r.b, cc, "type"); err != nil || r.kind(t) != jsonscan.String {
			r.ps.add(RuleCacheControl, path, "cache_control without a string type")
		}
	default:
		r.ps.add(RuleCacheControl, path, "cache_control must be an object")
	}
}

func (r *reqChecker) messages() {
	msgs := r.c.Messages
	last := len(msgs) - 1
	ids := map[string]string{}   // tool_use id -> path
	sigs := map[uint64][2]span{} // signature hash -> signature, thinking
	for i := range msgs {
		m := &msgs[i]
		p := mpath(i)
		if m.Role != conversation.RoleUser && m.Role != conversation.RoleAssistant && m.Role != conversation.RoleSystem {
			role, err := jsonscan.Lookup(r.b, m.Span, "role")
			if err != nil {
				r.ps.add(RuleRole, p, "message without a role")
			} else {
				r.ps.add(RuleRole, p, "role must be user, assistant or system, not %s", short(role.Bytes(r.b)))
			}
		}
		prefill := i == last && m.Role == conversation.RoleAssistant
		switch r.kind(m.Content) {
		case jsonscan.String:
			r.stringContent(m, p, prefill)
			continue
		case jsonscan.Array:
		default:
			r.ps.add(RuleShape, p+".content", "content must be a string or an array")
			continue
		}
		if len(m.Blocks) == 0 {
			if !prefill {
				r.ps.add(RuleEmpty, p, "all messages must have non-empty content except for the optional final assistant message")
			}
			continue
		}
		allText, allBlank := true, true
		for j := range m.Blocks {
			blk := &m.Blocks[j]
			bp := bpath(i, j)
			if blk.Type != "text" || blk.Kind != conversation.Text {
				allText = false
			} else if allBlank && !jsonscan.Blank(blk.Text.Bytes(r.b)) {
				allBlank = false
			}
			r.block(m, blk, bp, ids, sigs)
		}
		if allText && allBlank && !prefill {
			r.ps.add(RuleEmpty, p, "text content blocks must contain non-whitespace text")
		}
		if prefill {
			lb := &m.Blocks[len(m.Blocks)-1]
			if lb.Kind == conversation.Text && endsBlank(lb.Text.Bytes(r.b)) {
				r.ps.add(RuleEmpty, bpath(i, len(m.Blocks)-1), "final assistant content cannot end with trailing whitespace")
			}
		}
	}
}

func (r *reqChecker) stringContent(m *msg, p string, prefill bool) {
	s := m.Content.Bytes(r.b)
	switch {
	case prefill:
		if endsBlank(s) {
			r.ps.add(RuleEmpty, p+".content", "final assistant content cannot end with trailing whitespace")
		}
	case len(s) == 2:
		r.ps.add(RuleEmpty, p, "all messages must have non-empty content except for the optional final assistant message")
	case jsonscan.Blank(s):
		r.ps.add(RuleEmpty, p, "text content blocks must contain non-whitespace text")
	}
}

var idOK = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	return
}()

func validID(q []byte) bool {
	raw := q[1 : len(q)-1]
	if len(raw) == 0 {
		return false
	}
	for _, c := range raw {
		if !idOK[c] {
			return false
		}
	}
	return true
}

func (r *reqChecker) block(m *msg, blk *block, p string, ids map[string]string, sigs map[uint64][2]span) {
	b := r.b
	if r.kind(blk.Span) != jsonscan.Object {
		r.ps.add(RuleBlock, p, "content block is not an object")
		return
	}
	if blk.Type == "" {
		r.ps.add(RuleBlock, p, "content block without a string type")
		return
	}
	asst := m.Role == conversation.RoleAssistant
	switch blk.Type {
	case "text":
		if blk.Kind != conversation.Text {
			r.ps.add(RuleBlock, p, "text block without a string text")
		} else if blk.Text.Len() == 2 {
			r.ps.add(RuleEmpty, p, "text content blocks must be non-empty")
		}
	case "tool_use":
		if !asst {
			r.ps.add(RuleBlock, p, "tool_use block in a %s message", m.Role)
		}
		if blk.Kind != conversation.ToolCall {
			r.ps.add(RuleBlock, p, "tool_use block needs a string id, a string name and an input")
			return
		}
		if r.kind(blk.Input) != jsonscan.Object {
			r.ps.add(RuleBlock, p, "tool_use input must be an object")
		}
		id := blk.ID.Bytes(b)
		if !validID(id) {
			r.ps.add(RuleToolID, p, "tool_use id %s does not match ^[a-zA-Z0-9_-]+$", short(id))
		}
		if prev, dup := ids[string(id)]; dup {
			r.ps.add(RuleToolID, p, "tool_use ids must be unique: %s already used at %s", short(id), prev)
		} else {
			ids[string(id)] = p
		}
	case "tool_result":
		if m.Role != conversation.RoleUser {
			r.ps.add(RuleBlock, p, "tool_result block in a %s message", m.Role)
		}
		if blk.Kind != conversation.ToolResult {
			r.ps.add(RuleBlock, p, "tool_result block needs a string tool_use_id")
			return
		}
		if !blk.Content.IsZero() {
			if k := r.kind(blk.Content); k != jsonscan.String && k != jsonscan.Array {
				r.ps.add(RuleBlock, p, "tool_result content must be a string or an array")
			}
		}
	case "thinking", "redacted_thinking":
		if !asst {
			r.ps.add(RuleThinking, p, "%s block in a %s message", blk.Type, m.Role)
		}
		if !blk.CacheControl.IsZero() {
			r.ps.add(RuleCacheControl, p, "%s blocks cannot carry cache_control", blk.Type)
		}
		field := "data"
		if blk.Type == "thinking" {
			field = "signature"
			if th, err := jsonscan.Lookup(b, blk.Span, "thinking"); err != nil || r.kind(th) != jsonscan.String {
				r.ps.add(RuleThinking, p, "thinking block without a string thinking")
			}
		}
		sig, err := jsonscan.Lookup(b, blk.Span, field)
		if err != nil || r.kind(sig) != jsonscan.String || sig.Len() == 2 {
			r.ps.add(RuleThinking, p, "%s block without a non-empty string %s", blk.Type, field)
			return
		}
		if blk.Type == "thinking" && blk.Kind == conversation.Thinking {
			h := maphash.Bytes(r.seed, sig.Bytes(b))
			if prev, ok := sigs[h]; ok && bytes.Equal(prev[0].Bytes(b), sig.Bytes(b)) {
				if !bytes.Equal(prev[1].Bytes(b), blk.Text.Bytes(b)) {
					r.ps.add(RuleThinking, p, "thinking text differs from another thinking block with the same signature: one of them was edited")
				}
			} else if !ok {
				sigs[h] = [2]span{sig, blk.Text}
			}
		}
		return
	}
	if !blk.CacheControl.IsZero() {
		r.marker(blk.Span, p)
	}
}

// pairing checks that tool rounds are complete: message i's tool_use ids
// are answered once each in message i+1 (a user message), and each
// tool_result of message i answers a tool_use of message i-1.
func (r *reqChecker) pairing() {
	b := r.b
	msgs := r.c.Messages
	uses := map[string]bool{}    // tool_use ids of the previous message -> answered
	answered := map[string]int{} // tool_use_id -> count in this message
	prevUses := false
	for i := range msgs {
		m := &msgs[i]
		if m.Role == conversation.RoleUser {
			clear(answered)
			other, told := -1, false // first non-tool_result block
			for j := range m.Blocks {
				blk := &m.Blocks[j]
				if blk.Kind != conversation.ToolResult {
					if other < 0 {
						other = j
					}
					continue
				}
				if other >= 0 && !told {
					r.ps.add(RuleToolPairing, bpath(i, j), "tool_result blocks must come first in a user message (block %d is not one)", other)
					told = true
				}
				id := string(blk.ID.Bytes(b))
				answered[id]++
				switch {
				case !prevUses || !has(uses, id):
					r.ps.add(RuleToolPairing, bpath(i, j), "unexpected tool_use_id %s in tool_result: each tool_result must have a corresponding tool_use in the previous message", short(blk.ID.Bytes(b)))
				case answered[id] == 2:
					r.ps.add(RuleToolPairing, bpath(i, j), "more than one tool_result for tool_use id %s", short(blk.ID.Bytes(b)))
				}
			}
			if prevUses {
				r.unanswered(i-1, uses, answered)
			}
		} else if prevUses {
			r.ps.add(RuleToolPairing, mpath(i-1), "tool_use ids were found without tool_result blocks immediately after: the next message (messages.%d) has role %s, not user", i, m.Role)
		}
		clear(uses)
		prevUses = false
		if m.Role == conversation.RoleAssistant {
			for j := range m.Blocks {
				if blk := &m.Blocks[j]; blk.Kind == conversation.ToolCall {
					uses[string(blk.ID.Bytes(b))] = false
					prevUses = true
				}
			}
		}
	}
	if prevUses {
		r.ps.add(RuleToolPairing, mpath(len(msgs)-1), "tool_use ids were found without tool_result blocks immediately after: it is the last message")
	}
}

func has(m map[string]bool, k string) bool { _, ok := m[k]; return ok }

// unanswered reports the tool_use ids of message i that the next message
// does not answer, in block order.
func (r *reqChecker) unanswered(i int, uses map[string]bool, answered map[string]int) {
	m := &r.c.Messages[i]
	for j := range m.Blocks {
		blk := &m.Blocks[j]
		if blk.Kind == conversation.ToolCall && answered[string(blk.ID.Bytes(r.b))] == 0 {
			r.ps.add(RuleToolPairing, bpath(i, j), "tool_use id %s was found without a tool_result block in the next message", short(blk.ID.Bytes(r.b)))
		}
	}
}

// endsBlank reports whether the JSON string literal q ends with a
// whitespace character.
func endsBlank(q []byte) bool {
	s, err := jsonscan.Unquote(q)
	if err != nil || s == "" {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(s)
	return unicode.IsSpace(r)
}
