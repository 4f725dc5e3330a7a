package validate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// The sessions in testdata/sessions are real Claude Code transcripts from
// M-Thisness/M-Claude (folder Archives/), CC0 1.0.

type apiMsg struct {
	Role    string
	Content json.RawMessage
}

// loadSession rebuilds the API messages of a Claude Code transcript the
// way Claude Code sends them: assistant lines sharing message.id merged
// into one message, consecutive user messages merged with their
// tool_result blocks first, subagent and synthetic (client-made error)
// messages left out. It skips lines that are not valid JSON (the owner
// redacted some by hand) and reports how many. If a skipped line broke a
// tool round, the session is cut before it.
func loadSession(t testing.TB, path string) (msgs []apiMsg, skipped int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lastID string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var rec struct {
			Type        string
			IsSidechain bool
			Message     *struct {
				ID      string
				Role    string
				Model   string
				Content json.RawMessage
			}
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			skipped++
			continue
		}
		m := rec.Message
		if (rec.Type != "user" && rec.Type != "assistant") || rec.IsSidechain || m == nil || m.Model == "<synthetic>" || len(m.Content) == 0 {
			continue
		}
		n := len(msgs)
		switch {
		case n > 0 && m.Role == "assistant" && msgs[n-1].Role == "assistant" && m.ID != "" && m.ID == lastID:
			msgs[n-1].Content = concat(t, msgs[n-1].Content, m.Content)
		case n > 0 && m.Role == "user" && msgs[n-1].Role == "user":
			msgs[n-1].Content = concat(t, msgs[n-1].Content, m.Content)
		default:
			msgs = append(msgs, apiMsg{Role: m.Role, Content: m.Content})
		}
		lastID = m.ID
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cutBrokenRound(t, msgs), skipped
}

type wireBlock struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	ToolUseID string `json:"tool_use_id"`
}

// blocksOf returns content as an array of blocks (a string becomes a text
// block).
func blocksOf(t testing.TB, content json.RawMessage) []json.RawMessage {
	var s string
	if json.Unmarshal(content, &s) == nil {
		b, err := json.Marshal(map[string]string{"type": "text", "text": s})
		if err != nil {
			t.Fatal(err)
		}
		return []json.RawMessage{b}
	}
	var bs []json.RawMessage
	if err := json.Unmarshal(content, &bs); err != nil {
		t.Fatal(err)
	}
	return bs
}

func typeOf(b json.RawMessage) wireBlock {
	var w wireBlock
	json.Unmarshal(b, &w)
	return w
}

// concat joins two contents into one array, tool_result blocks first.
func concat(t testing.TB, a, b json.RawMessage) json.RawMessage {
	all := append(blocksOf(t, a), blocksOf(t, b)...)
	slices.SortStableFunc(all, func(x, y json.RawMessage) int {
		rx, ry := typeOf(x).Type == "tool_result", typeOf(y).Type == "tool_result"
		switch {
		case rx && !ry:
			return -1
		case ry && !rx:
			return 1
		}
		return 0
	})
	out, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// cutBrokenRound cuts the messages before the first assistant message
// whose tool calls are not all answered by the next message.
func cutBrokenRound(t testing.TB, msgs []apiMsg) []apiMsg {
	for i, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		var uses []string
		for _, b := range blocksOf(t, m.Content) {
			if w := typeOf(b); w.Type == "tool_use" {
				uses = append(uses, w.ID)
			}
		}
		if len(uses) == 0 {
			continue
		}
		answered := map[string]bool{}
		if i+1 < len(msgs) && msgs[i+1].Role == "user" {
			for _, b := range blocksOf(t, msgs[i+1].Content) {
				if w := typeOf(b); w.Type == "tool_result" {
					answered[w.ToolUseID] = true
				}
			}
		}
		for _, id := range uses {
			if !answered[id] && i+1 < len(msgs) {
				t.Logf("cutting the session at message %d: tool_use %s lost its result", i, id)
				return msgs[:i]
			}
		}
	}
	return msgs
}

const marker = `"cache_control":{"type":"ephemeral"}`

// template is the captured Claude Code request whose top level (system,
// tools, thinking, metadata, ...) the rebuilt requests reuse.
func template(t testing.TB) (body []byte, msgs jsonscan.Span) {
	body, err := os.ReadFile("../../anthropic/testdata/claude-code-2.1.197-first.json")
	if err != nil {
		t.Fatal(err)
	}
	root, err := jsonscan.Root(body)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err = jsonscan.Lookup(body, root, "messages")
	if err != nil {
		t.Fatal(err)
	}
	return body, msgs
}

// buildRequest puts msgs into the template, with Claude Code's moving cache
// marker on the last block of the last message.
func buildRequest(t testing.TB, msgs []apiMsg) []byte {
	tmpl, sp := template(t)
	var b bytes.Buffer
	b.Write(tmpl[:sp.Start])
	b.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		content := []byte(m.Content)
		if i == len(msgs)-1 {
			if content[0] == '"' {
				content = []byte(`[{"type":"text","text":` + string(content) + `,` + marker + `}]`)
			} else {
				end := bytes.LastIndexByte(content, '}')
				content = []byte(string(content[:end]) + `,` + marker + string(content[end:]))
			}
		}
		role, _ := json.Marshal(m.Role)
		b.WriteString(`{"role":` + string(role) + `,"content":`)
		b.Write(content)
		b.WriteByte('}')
	}
	b.WriteByte(']')
	b.Write(tmpl[sp.End:])
	return b.Bytes()
}

// stream is the sequence of requests the client sent: request k holds the
// messages before assistant message k, and a final one all messages when
// the session ends with the user.
func stream(t testing.TB, msgs []apiMsg) [][]byte {
	var out [][]byte
	for i, m := range msgs {
		if m.Role == "assistant" && i > 0 {
			out = append(out, buildRequest(t, msgs[:i]))
		}
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == "user" {
		out = append(out, buildRequest(t, msgs))
	}
	return out
}

func sessionFiles(t testing.TB) []string {
	files, err := filepath.Glob("testdata/sessions/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no sessions: %v", err)
	}
	return files
}

// TestSessionStreams checks that every request rebuilt from the real
// sessions is valid, and is a valid rewrite of itself.
func TestSessionStreams(t *testing.T) {
	total := 0
	for _, f := range sessionFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			msgs, skipped := loadSession(t, f)
			reqs := stream(t, msgs)
			t.Logf("%d messages, %d requests, %d invalid lines skipped", len(msgs), len(reqs), skipped)
			if len(reqs) < 3 {
				t.Fatalf("only %d requests", len(reqs))
			}
			total += len(reqs)
			for k, body := range reqs {
				if err := Request(body); err != nil {
					t.Errorf("request %d: %v", k, err)
				}
				if err := Rewrite(body, body, Options{}); err != nil {
					t.Errorf("request %d against itself: %v", k, err)
				}
			}
		})
	}
	t.Logf("%d requests in all", total)
}

// xform describes a rewrite of a request's messages, applied by rebuilding
// the messages array from the original bytes.
type xform struct {
	dropMsg   map[int]bool
	dropBlock map[[2]int]bool
	content   map[int]string    // new content value of a message
	block     map[[2]int]string // new bytes of a block
}

func newXform() *xform {
	return &xform{dropMsg: map[int]bool{}, dropBlock: map[[2]int]bool{}, content: map[int]string{}, block: map[[2]int]string{}}
}

func (x *xform) apply(t testing.TB, c *conversation.Conversation) []byte {
	b := c.Body
	arr, err := jsonscan.Lookup(b, c.Root, "messages")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.Write(b[:arr.Start])
	out.WriteByte('[')
	first := true
	for i := range c.Messages {
		m := &c.Messages[i]
		if x.dropMsg[i] {
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		out.Write(b[m.Span.Start:m.Content.Start])
		switch {
		case x.content[i] != "":
			out.WriteString(x.content[i])
		case m.ContentString:
			out.Write(m.Content.Bytes(b))
		default:
			out.WriteByte('[')
			bf := true
			for j := range m.Blocks {
				if x.dropBlock[[2]int{i, j}] {
					continue
				}
				if !bf {
					out.WriteByte(',')
				}
				bf = false
				if r, ok := x.block[[2]int{i, j}]; ok {
					out.WriteString(r)
				} else {
					out.Write(m.Blocks[j].Span.Bytes(b))
				}
			}
			out.WriteByte(']')
		}
		out.Write(b[m.Content.End:m.Span.End])
	}
	out.WriteByte(']')
	out.Write(b[arr.End:])
	return out.Bytes()
}

// tail is the first message of the current turn.
func tail(c *conversation.Conversation) int {
	if i := c.LastAssistant(); i >= 0 {
		return i
	}
	return len(c.Messages) - 1
}

// withMarker returns block bytes with a cache_control marker added last.
func withMarker(blk []byte) string {
	end := bytes.LastIndexByte(blk, '}')
	return string(blk[:end]) + "," + marker + string(blk[end:])
}

// Variants of a request. Each returns the rewritten body, or nil when the
// request has nothing to apply it to.

// clearResults replaces every tool result before the current turn with a
// stub, as threshold clearing does.
func clearResults(t testing.TB, c *conversation.Conversation) []byte {
	x := newXform()
	for i := range tail(c) {
		for j, blk := range c.Messages[i].Blocks {
			if blk.Kind == conversation.ToolResult && !blk.Content.IsZero() {
				x.block[[2]int{i, j}] = string(c.Body[blk.Span.Start:blk.Content.Start]) + `"[result cleared]"` + string(c.Body[blk.Content.End:blk.Span.End])
			}
		}
	}
	if len(x.block) == 0 {
		return nil
	}
	return x.apply(t, c)
}

// dropThinking removes thinking from every assistant message but the
// latest, leaving a replacement text where nothing else was left.
func dropThinking(t testing.TB, c *conversation.Conversation) []byte {
	x := newXform()
	last := c.LastAssistant()
	for i := range c.Messages {
		m := &c.Messages[i]
		if m.Role != conversation.RoleAssistant || i == last {
			continue
		}
		n := 0
		for j, blk := range m.Blocks {
			if blk.Kind == conversation.Thinking || blk.Kind == conversation.RedactedThinking {
				x.dropBlock[[2]int{i, j}] = true
				n++
			}
		}
		if n > 0 && n == len(m.Blocks) {
			x.content[i] = `[{"type":"text","text":"[thinking removed]"}]`
		}
	}
	if len(x.dropBlock) == 0 {
		return nil
	}
	return x.apply(t, c)
}

// firstRound finds the oldest tool round before the current turn: an
// assistant message with tool calls and the user message answering it.
func firstRound(c *conversation.Conversation) (asst int, ok bool) {
	for i := 0; i+1 < tail(c); i++ {
		m := &c.Messages[i]
		if m.Role != conversation.RoleAssistant {
			continue
		}
		for _, blk := range m.Blocks {
			if blk.Kind == conversation.ToolCall {
				return i, true
			}
		}
	}
	return 0, false
}

// trimRound removes the oldest tool round: the assistant message whole,
// and the results from the next message (the message too if nothing else
// is in it), as tool-round trimming does.
func trimRound(t testing.TB, c *conversation.Conversation) []byte {
	a, ok := firstRound(c)
	if !ok {
		return nil
	}
	x := newXform()
	x.dropMsg[a] = true
	u := &c.Messages[a+1]
	others := 0
	for j, blk := range u.Blocks {
		if blk.Kind == conversation.ToolResult {
			x.dropBlock[[2]int{a + 1, j}] = true
		} else {
			others++
		}
	}
	if others == 0 {
		x.dropMsg[a+1] = true
	}
	return x.apply(t, c)
}

// dropResult removes the oldest round's results but keeps its tool calls.
func dropResult(t testing.TB, c *conversation.Conversation) []byte {
	a, ok := firstRound(c)
	if !ok {
		return nil
	}
	x := newXform()
	u := &c.Messages[a+1]
	others := 0
	for j, blk := range u.Blocks {
		if blk.Kind == conversation.ToolResult {
			x.dropBlock[[2]int{a + 1, j}] = true
		} else {
			others++
		}
	}
	if others == 0 {
		x.dropMsg[a+1] = true
	}
	return x.apply(t, c)
}

// alterThinking changes one byte of the first non-empty thinking text and
// keeps its signature.
func alterThinking(t testing.TB, c *conversation.Conversation) []byte {
	for i := range c.Messages {
		for j, blk := range c.Messages[i].Blocks {
			if blk.Kind == conversation.Thinking && blk.Text.Len() > 2 {
				x := newXform()
				b := c.Body
				x.block[[2]int{i, j}] = string(b[blk.Span.Start:blk.Text.Start+1]) + "X" + string(b[blk.Text.Start+2:blk.Span.End])
				return x.apply(t, c)
			}
		}
	}
	return nil
}

// fifthMarker adds markers to text and tool_result blocks until there are
// five.
func fifthMarker(t testing.TB, c *conversation.Conversation) []byte {
	x := newXform()
	n := c.CacheMarkers
	for i := range c.Messages {
		m := &c.Messages[i]
		if m.ContentString {
			continue
		}
		for j, blk := range m.Blocks {
			if n < 5 && blk.CacheControl.IsZero() && (blk.Kind == conversation.Text || blk.Kind == conversation.ToolResult) {
				x.block[[2]int{i, j}] = withMarker(blk.Span.Bytes(c.Body))
				n++
			}
		}
	}
	if n < 5 {
		return nil
	}
	return x.apply(t, c)
}

// withUnknownField adds an unknown field to the first text block of an
// array content, with the given value.
func withUnknownField(t testing.TB, c *conversation.Conversation, value string) []byte {
	for i := range c.Messages {
		m := &c.Messages[i]
		if m.ContentString {
			continue
		}
		for j, blk := range m.Blocks {
			if blk.Kind == conversation.Text {
				x := newXform()
				bb := blk.Span.Bytes(c.Body)
				end := bytes.LastIndexByte(bb, '}')
				x.block[[2]int{i, j}] = string(bb[:end]) + `,"x_client_note":"` + value + `"` + string(bb[end:])
				return x.apply(t, c)
			}
		}
	}
	return nil
}

func parseOK(t testing.TB, body []byte) *conversation.Conversation {
	t.Helper()
	c, err := anthropic.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSessionRewrites runs allowed and broken rewrites of every rebuilt
// request through Rewrite.
func TestSessionRewrites(t *testing.T) {
	all := Options{AllowInputEdits: true, AllowThinkingRemoval: true, AllowMessageRemoval: true, AllowCacheMarkers: true, AllowTopLevel: []string{"thinking", "context_management"}}
	allowed := []struct {
		name string
		fn   func(testing.TB, *conversation.Conversation) []byte
		opts Options
	}{
		{"clear results", clearResults, Options{}},
		{"drop thinking", dropThinking, Options{AllowThinkingRemoval: true}},
		{"trim round", trimRound, Options{AllowMessageRemoval: true}},
	}
	broken := []struct {
		name string
		fn   func(testing.TB, *conversation.Conversation) []byte
		want Rule
	}{
		{"drop result", dropResult, RuleHalfRound},
		{"alter thinking", alterThinking, RuleThinkingChanged},
		{"fifth marker", fifthMarker, RuleCacheControl},
	}
	counts := map[string]int{}
	for _, f := range sessionFiles(t) {
		msgs, _ := loadSession(t, f)
		for k, body := range stream(t, msgs) {
			c := parseOK(t, body)
			for _, v := range allowed {
				rw := v.fn(t, c)
				if rw == nil {
					continue
				}
				counts[v.name]++
				if err := Rewrite(body, rw, v.opts); err != nil {
					t.Errorf("%s request %d, %s: %v", filepath.Base(f), k, v.name, err)
				}
				// Each allowed change needs its option (clearing needs none).
				if v.opts.AllowThinkingRemoval || v.opts.AllowMessageRemoval {
					if err := Rewrite(body, rw, Options{}); err == nil {
						t.Errorf("%s request %d, %s: accepted without options", filepath.Base(f), k, v.name)
					}
				}
			}
			for _, v := range broken {
				rw := v.fn(t, c)
				if rw == nil {
					continue
				}
				counts[v.name]++
				err := Rewrite(body, rw, all)
				if !slices.Contains(rulesOf(t, err), v.want) {
					t.Errorf("%s request %d, %s: want a %s problem, got %v", filepath.Base(f), k, v.name, v.want, err)
				}
			}
			// A byte changed in an unknown field, at the top level and in
			// a block.
			tl := bytes.Replace(body, []byte(`"effort":"high"`), []byte(`"effort":"higH"`), 1)
			if err := Rewrite(body, tl, all); !slices.Contains(rulesOf(t, err), RuleTopLevel) {
				t.Errorf("%s request %d, top-level unknown field: got %v", filepath.Base(f), k, err)
			}
			counts["unknown top-level field"]++
			if orig := withUnknownField(t, c, "abc"); orig != nil {
				rw := withUnknownField(t, c, "abd")
				if err := Rewrite(orig, rw, all); !slices.Contains(rulesOf(t, err), RuleBlockChanged) {
					t.Errorf("%s request %d, unknown block field: got %v", filepath.Base(f), k, err)
				}
				counts["unknown block field"]++
			}
		}
	}
	t.Logf("variants checked: %v", counts)
	for _, name := range []string{"clear results", "drop thinking", "trim round", "drop result", "alter thinking", "fifth marker", "unknown block field"} {
		if counts[name] == 0 {
			t.Errorf("variant %q never applied", name)
		}
	}
}
