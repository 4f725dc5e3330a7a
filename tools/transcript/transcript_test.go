package transcript

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/internal/shareddata"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/tools/validate"
)

var update = flag.Bool("update", false, "rewrite golden files")

// JSONL building helpers for hand-made transcripts.

func jsonl(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

func u(content string) string {
	return `{"type":"user","sessionId":"s1","isSidechain":false,"message":{"role":"user","content":` + content + `}}`
}

func a(id string, blocks ...string) string {
	return `{"type":"assistant","sessionId":"s1","isSidechain":false,"message":{"model":"claude-sonnet-4-5-20250929","id":"` + id +
		`","type":"message","role":"assistant","content":[` + strings.Join(blocks, ",") +
		`],"usage":{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":5}}}`
}

func txt(s string) string { return `{"type":"text","text":"` + s + `"}` }
func think(text, sig string) string {
	return `{"type":"thinking","thinking":"` + text + `","signature":"` + sig + `"}`
}
func tu(id string) string {
	return `{"type":"tool_use","id":"` + id + `","name":"Bash","input":{"command":"ls"}}`
}
func tr(id, out string) string {
	return `{"tool_use_id":"` + id + `","type":"tool_result","content":"` + out + `","is_error":false}`
}
func arr(blocks ...string) string { return "[" + strings.Join(blocks, ",") + "]" }
func str1(s string) string        { return `"` + s + `"` }

// shape renders the messages of s compactly: role[type:id ...].
func shape(s *Session) string {
	var parts []string
	for _, m := range s.Messages {
		var bs []string
		for _, b := range m.Blocks {
			x := b.Type
			if b.ID != "" {
				x += ":" + b.ID
			}
			bs = append(bs, x)
		}
		r := string(m.Role)
		if m.Reset {
			r = "|" + r
		}
		parts = append(parts, r+"["+strings.Join(bs, " ")+"]")
	}
	return strings.Join(parts, " ")
}

func parseOne(t *testing.T, data []byte) *Session {
	t.Helper()
	ss := ParseClaudeCode(data, "test.jsonl", Options{})
	if len(ss) != 1 {
		t.Fatalf("%d sessions", len(ss))
	}
	return ss[0]
}

func TestMergeAndSkip(t *testing.T) {
	data := jsonl(
		`{"type":"user","message":{"role":"user","content":"half a line`, // malformed (redacted by hand)
		`{"type":"summary","summary":"Fix the build","leafUuid":"x"}`,
		u(str1("fix the build")),
		`{"type":"assistant","sessionId":"s1","message":{"model":"claude-opus-4-5-20251101","id":"msg_1","role":"assistant","content":[{"type":"thinking","thinking":"look","signature":"c2ln"}],"usage":{"input_tokens":3,"cache_creation_input_tokens":7,"cache_read_input_tokens":20000,"output_tokens":1}}}`,
		`{"type":"assistant","sessionId":"s1","message":{"model":"claude-opus-4-5-20251101","id":"msg_1","role":"assistant","content":[{"type":"text","text":"Running it."}],"usage":{"input_tokens":3,"cache_creation_input_tokens":7,"cache_read_input_tokens":20000,"output_tokens":9}}}`,
		`not json at all`,
		`{"type":"assistant","sessionId":"s1","message":{"model":"claude-opus-4-5-20251101","id":"msg_1","role":"assistant","content":[`+tu("t1")+`],"usage":{"input_tokens":3,"cache_creation_input_tokens":7,"cache_read_input_tokens":20000,"output_tokens":120}}}`,
		u(arr(tr("t1", "ok"))),
		`{"type":"system","subtype":"api_error","sessionId":"s1"}`,
		`{"type":"assistant","sessionId":"s1","message":{"model":"<synthetic>","id":"x","role":"assistant","content":[{"type":"text","text":"Request timed out"}]}}`,
		a("msg_2", txt("Done.")),
		``,
		`[1,2]`,
	)
	s := parseOne(t, data)
	if got, want := shape(s), "user[text] assistant[thinking text tool_use:t1] user[tool_result:t1] assistant[text]"; got != want {
		t.Fatalf("shape\n got %s\nwant %s", got, want)
	}
	want := Stats{Lines: 12, Malformed: 3, Ignored: 2, Synthetic: 1, Merged: 2}
	if d := cmp.Diff(want, s.Stats); d != "" {
		t.Errorf("stats (-want +got):\n%s", d)
	}
	m := s.Messages[1]
	if d := cmp.Diff(&Usage{3, 7, 20000, 120}, m.Usage); d != "" {
		t.Errorf("usage is the last line's (-want +got):\n%s", d)
	}
	if m.Usage.Prompt() != 20010 {
		t.Errorf("Prompt() = %d", m.Usage.Prompt())
	}
	if s.Messages[0].Gaps != 1 || m.Gaps != 1 || s.Messages[2].Gaps != 0 {
		t.Errorf("gaps %d %d %d", s.Messages[0].Gaps, m.Gaps, s.Messages[2].Gaps)
	}
	if s.ID != "s1" || s.ClientSessionID != "s1" || s.Model != "claude-opus-4-5-20251101" || s.Format != ClaudeCode {
		t.Errorf("session %q %q %q %v", s.ID, s.ClientSessionID, s.Model, s.Format)
	}
	if m.ID != "msg_1" || m.Line != 4 {
		t.Errorf("message id %q line %d", m.ID, m.Line)
	}
	// The merged blocks are the transcript's bytes, in order.
	if got := string(m.Blocks[0].Raw); got != `{"type":"thinking","thinking":"look","signature":"c2ln"}` {
		t.Errorf("block bytes %s", got)
	}
}

func TestRepairs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		shape string
		want  Repairs
	}{
		{"clean", []string{u(str1("go")), a("m1", tu("t1")), u(arr(tr("t1", "x"))), a("m2", txt("ok"))},
			"user[text] assistant[tool_use:t1] user[tool_result:t1] assistant[text]", Repairs{}},
		{"missing result", []string{u(str1("go")), a("m1", tu("t1"), tu("t2")), u(arr(tr("t2", "x"), txt("and now?"))), a("m2", txt("ok"))},
			"user[text] assistant[tool_use:t1 tool_use:t2] user[tool_result:t2 tool_result:t1 text] assistant[text]", Repairs{MissingResult: 1}},
		{"orphan result", []string{u(str1("go")), a("m1", txt("hi")), u(arr(tr("t9", "x"), txt("next"))), a("m2", txt("ok"))},
			"user[text] assistant[text] user[text] assistant[text]", Repairs{OrphanResult: 1}},
		{"only orphans", []string{u(str1("go")), a("m1", txt("hi")), u(arr(tr("t9", "x"))), a("m2", txt("ok"))},
			"user[text] assistant[text] user[text] assistant[text]", Repairs{OrphanResult: 1}},
		{"duplicate result", []string{u(str1("go")), a("m1", tu("t1")), u(arr(tr("t1", "x"))), u(arr(tr("t1", "y"))), a("m2", txt("ok"))},
			"user[text] assistant[tool_use:t1] user[tool_result:t1] assistant[text]", Repairs{DuplicateResult: 1}},
		{"id reused later", []string{u(str1("go")), a("m1", tu("t1")), u(arr(tr("t1", "x"))), a("m2", tu("t1")), u(arr(tr("t1", "y"))), a("m3", txt("ok"))},
			"user[text] assistant[tool_use:t1] user[tool_result:t1] assistant[tool_use:t1_dup1] user[tool_result:t1_dup1] assistant[text]", Repairs{DuplicateID: 1}},
		{"id twice in one message", []string{u(str1("go")), a("m1", tu("t1"), tu("t1")), u(arr(tr("t1", "x"), tr("t1", "y"))), a("m2", txt("ok"))},
			"user[text] assistant[tool_use:t1 tool_use:t1_dup1] user[tool_result:t1 tool_result:t1_dup1] assistant[text]", Repairs{DuplicateID: 1}},
		{"results after text", []string{u(str1("go")), a("m1", tu("t1")), u(arr(txt("wait"))), u(arr(tr("t1", "x"))), a("m2", txt("ok"))},
			"user[text] assistant[tool_use:t1] user[tool_result:t1 text] assistant[text]", Repairs{Reordered: 1}},
		{"starts with assistant", []string{a("m1", txt("hello")), u(str1("hi")), a("m2", txt("ok"))},
			"user[text] assistant[text] user[text] assistant[text]", Repairs{MissingUser: 1}},
		{"two assistants", []string{u(str1("go")), a("m1", txt("a")), a("m2", txt("b"))},
			"user[text] assistant[text] user[text] assistant[text]", Repairs{MissingUser: 1}},
		{"result line lost", []string{u(str1("go")), a("m1", tu("t1")), a("m2", txt("b"))},
			"user[text] assistant[tool_use:t1] user[tool_result:t1] assistant[text]", Repairs{MissingResult: 1}},
		{"empty text", []string{u(str1("go")), a("m1", txt(""), tu("t1")), u(arr(tr("t1", "x"))), a("m2", txt("ok"))},
			"user[text] assistant[tool_use:t1] user[tool_result:t1] assistant[text]", Repairs{EmptyText: 1}},
		{"empty message", []string{u(str1("go")), a("m1", txt("")), a("m2", txt("ok"))},
			"user[text] assistant[text]", Repairs{EmptyText: 1, EmptyMessage: 1}},
		{"cache_control in transcript", []string{u(arr(`{"type":"text","text":"go","cache_control":{"type":"ephemeral"}}`)), a("m1", txt("ok"))},
			"user[text] assistant[text]", Repairs{CacheControl: 1}},
		{"redacted signature", []string{u(str1("go")), a("m1", think("plan", "[REDACTED_SIGNATURE]"), tu("t1")), u(arr(tr("t1", "x"))), a("m2", think("more", "c2ln"), txt("ok"))},
			"user[text] assistant[thinking tool_use:t1] user[tool_result:t1] assistant[thinking text]", Repairs{RedactedSignature: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := parseOne(t, jsonl(tc.lines...))
			if got := shape(s); got != tc.shape {
				t.Errorf("shape\n got %s\nwant %s", got, tc.shape)
			}
			if d := cmp.Diff(tc.want, s.Stats.Repairs); d != "" {
				t.Errorf("repairs (-want +got):\n%s", d)
			}
			if tc.want.Total() > 0 {
				n := 0
				for _, m := range s.Messages {
					if m.Repaired {
						n++
					}
				}
				if n == 0 {
					t.Error("no message marked Repaired")
				}
			}
			checkRequests(t, s)
		})
	}
}

func TestRepairBytes(t *testing.T) {
	s := parseOne(t, jsonl(u(str1("go")), a("m1", tu("t1"), tu("t1")), u(arr(tr("t1", "x"), tr("t1", "y"))), a("m2", tu("t2")), a("m3", txt("ok"))))
	got := []string{string(s.Messages[1].Blocks[1].Raw), string(s.Messages[2].Blocks[1].Raw), string(s.Messages[4].Blocks[0].Raw)}
	want := []string{
		`{"type":"tool_use","id":"t1_dup1","name":"Bash","input":{"command":"ls"}}`,
		`{"tool_use_id":"t1_dup1","type":"tool_result","content":"y","is_error":false}`,
		`{"type":"tool_result","tool_use_id":"t2","content":"[ctxguard replay: the transcript holds no result for this tool call]","is_error":true}`,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestRedactedSignature: a transcript whose owner redacted every thinking
// signature to one marker would send blocks that share a signature with
// different texts, which the API (and validate.Request) reads as an
// edited block. Each marker becomes a stand-in made from the block's
// text: distinct texts get distinct signatures, equal texts equal ones,
// the rest of the block stays byte for byte, and every request is valid.
func TestRedactedSignature(t *testing.T) {
	const marker = "[REDACTED_SIGNATURE]"
	s := parseOne(t, jsonl(u(str1("go")),
		a("m1", think("plan A", marker), tu("t1")), u(arr(tr("t1", "x"))),
		a("m2", think("plan B", marker), tu("t2")), u(arr(tr("t2", "y"))),
		a("m3", think("plan A", marker), tu("t3")), u(arr(tr("t3", "z"))),
		a("m4", txt("done"))))
	if got := s.Stats.Repairs; got.RedactedSignature != 3 || got.Total() != 3 {
		t.Errorf("repairs %+v, want 3 redacted signatures", got)
	}
	var sigs []string
	for _, i := range []int{1, 3, 5} {
		raw := s.Messages[i].Blocks[0].Raw
		sig := str(raw, member(raw, "signature"))
		if strings.Contains(sig, "REDACTED") || sig == "" {
			t.Fatalf("message %d: signature %q", i, sig)
		}
		text := string(member(raw, "thinking").Bytes(raw))
		if want := `{"type":"thinking","thinking":` + text + `,"signature":"` + sig + `"}`; string(raw) != want {
			t.Errorf("message %d: block %s, want only the signature replaced", i, raw)
		}
		sigs = append(sigs, sig)
	}
	if sigs[0] == sigs[1] || sigs[0] != sigs[2] {
		t.Errorf("signatures %q: want distinct for distinct texts, equal for equal ones", sigs)
	}
	if again := parseOne(t, jsonl(u(str1("go")), a("m1", think("plan A", marker), tu("t1")), u(arr(tr("t1", "x"))), a("m2", txt("ok")))); str(again.Messages[1].Blocks[0].Raw, member(again.Messages[1].Blocks[0].Raw, "signature")) != sigs[0] {
		t.Error("the stand-in is not a function of the text")
	}
	b, err := NewBuilder(s, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Request(b.Len() - 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Request(r.Body); err != nil {
		t.Error(err)
	}
}

func TestSidechains(t *testing.T) {
	side := func(agent, typ, content string) string {
		return `{"type":"` + typ + `","sessionId":"s1","isSidechain":true,"agentId":"` + agent + `","message":{"role":"` + typ + `","id":"` + agent + typ + `","model":"claude-haiku-4-5-20251001","content":` + content + `}}`
	}
	data := jsonl(
		u(str1("explore the repo")),
		a("m1", tu("t1")),
		side("a1", "user", str1("Find the config loader")),
		side("a1", "assistant", arr(txt("It is in config.go"))),
		side("a2", "user", str1("Warmup")),
		u(arr(tr("t1", "agent said: config.go"))),
		a("m2", txt("The loader is in config.go.")),
	)
	ss := ParseClaudeCode(data, "/x/s1.jsonl", Options{})
	var got []string
	for _, s := range ss {
		got = append(got, fmt.Sprintf("%s side=%v parent=%s model=%s %s", s.ID, s.Sidechain, s.Parent, s.Model, shape(s)))
	}
	want := []string{
		"s1 side=false parent= model=claude-sonnet-4-5-20250929 user[text] assistant[tool_use:t1] user[tool_result:t1] assistant[text]",
		"s1/agent-a1 side=true parent=s1 model=claude-haiku-4-5-20251001 user[text] assistant[text]",
		"s1/agent-a2 side=true parent=s1 model= user[text]", // a subagent warm-up: no request
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if ss[1].ClientSessionID != "s1" {
		t.Errorf("subagent client session %q", ss[1].ClientSessionID)
	}
	ss = ParseClaudeCode(data, "/x/s1.jsonl", Options{SkipSidechains: true})
	if len(ss) != 1 || ss[0].Stats.Sidechain != 3 || ss[0].Stats.Lines != 7 {
		t.Errorf("skip: %d sessions, stats %+v", len(ss), ss[0].Stats)
	}
}

func TestCompactBoundary(t *testing.T) {
	data := jsonl(
		u(str1("first task")), a("m1", tu("t1")), u(arr(tr("t1", "x"))), a("m2", txt("done")),
		`{"type":"system","subtype":"compact_boundary","content":"Conversation compacted","sessionId":"s1","compactMetadata":{"trigger":"auto","preTokens":155554}}`,
		u(str1("This session is being continued from a previous conversation. Summary: ...")),
		a("m3", tu("t2")), u(arr(tr("t2", "y"))), a("m4", txt("ok")),
	)
	s := parseOne(t, data)
	if got, want := shape(s), "user[text] assistant[tool_use:t1] user[tool_result:t1] assistant[text] |user[text] assistant[tool_use:t2] user[tool_result:t2] assistant[text]"; got != want {
		t.Fatalf("shape\n got %s\nwant %s", got, want)
	}
	if s.Stats.Resets != 1 {
		t.Errorf("resets %d", s.Stats.Resets)
	}
	b, err := NewBuilder(s, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range b.Len() {
		r, err := b.Request(k)
		if err != nil {
			t.Fatal(err)
		}
		c, err := anthropic.Parse(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("k=%d first=%d reset=%v messages=%d", k, r.First, r.Reset, len(c.Messages)))
	}
	want := []string{
		"k=0 first=0 reset=false messages=2",
		"k=1 first=0 reset=false messages=4",
		"k=2 first=4 reset=true messages=2",
		"k=3 first=4 reset=false messages=4",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	checkRequests(t, s)
}

func TestSWEAgent(t *testing.T) {
	ss, err := LoadFile("testdata/swe-agent/function_calling_simple.traj", Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := ss[0]
	if s.Format != SWEAgent || s.ID != "function_calling_simple" || !strings.HasPrefix(s.System, "SETTING: You are an autonomous programmer") {
		t.Errorf("session %q %v system %.40q", s.ID, s.Format, s.System)
	}
	if got, want := shape(s), "user[text] assistant[text tool_use:call_PbWErNIge3YTrli3fiVvmIid] user[tool_result:call_PbWErNIge3YTrli3fiVvmIid] "+
		"assistant[text tool_use:call_upNLxh7rBcDH9w5XiNdoAS0I] user[tool_result:call_upNLxh7rBcDH9w5XiNdoAS0I] "+
		"assistant[text tool_use:call_hIiDKXAXZl4qMHV6RRXvil4u] user[tool_result:call_hIiDKXAXZl4qMHV6RRXvil4u] "+
		"assistant[text tool_use:call_5O339epJ3rKjEal3Kuvpj9bM] user[tool_result:call_5O339epJ3rKjEal3Kuvpj9bM] "+
		"assistant[text tool_use:call_6zuFhIfpOAi1jAiD2QHMmh6S] user[tool_result:call_6zuFhIfpOAi1jAiD2QHMmh6S]"; got != want {
		t.Errorf("shape\n got %s\nwant %s", got, want)
	}
	if got := string(s.Messages[1].Blocks[1].Raw); got != `{"type":"tool_use","id":"call_PbWErNIge3YTrli3fiVvmIid","name":"find_file","input":{"file_name":"missing_colon.py"}}` {
		t.Errorf("tool_use %s", got)
	}
	if s.Stats.Repairs.Total() != 0 || s.Stats.Ignored != 1 {
		t.Errorf("stats %+v", s.Stats)
	}
	checkRequests(t, s)
	// The trajectory's system prompt replaces the main system block.
	b, _ := NewBuilder(s, BuildOptions{})
	r, _ := b.Request(0)
	c, _ := anthropic.Parse(r.Body)
	if !bytes.Contains(c.Bytes(c.System), []byte(`"text":"SETTING: You are an autonomous programmer`)) {
		t.Error("trajectory system prompt not in system")
	}
}

func TestSWEAgentShapes(t *testing.T) {
	traj := `{"history":[
	 {"role":"system","content":[{"type":"text","text":"You fix bugs."}]},
	 {"role":"user","content":[{"type":"text","text":"Issue: crash","cache_control":{"type":"ephemeral"}}]},
	 {"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"cmd\": \"ls -la\"}"}},
	                                               {"id":"c2","type":"function","function":{"name":"edit","arguments":"not json"}}]},
	 {"role":"tool","content":"file.py","tool_call_id":"c1"},
	 {"role":"tool","content":[{"type":"text","text":"edited"}],"tool_call_ids":["c2"]},
	 {"role":"user","content":"thanks"},
	 7,
	 {"role":"assistant","content":"Done."}
	]}`
	s, err := ParseSWEAgent([]byte(traj), "x/t.traj")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := shape(s), "user[text] assistant[tool_use:c1 tool_use:c2] user[tool_result:c1 tool_result:c2 text] assistant[text]"; got != want {
		t.Errorf("shape\n got %s\nwant %s", got, want)
	}
	want := []string{
		`{"type":"tool_use","id":"c1","name":"bash","input":{"cmd":"ls -la"}}`,
		`{"type":"tool_use","id":"c2","name":"edit","input":{"arguments":"not json"}}`,
		`{"type":"tool_result","tool_use_id":"c1","content":"file.py"}`,
		`{"type":"tool_result","tool_use_id":"c2","content":[{"type":"text","text":"edited"}]}`,
	}
	got := []string{string(s.Messages[1].Blocks[0].Raw), string(s.Messages[1].Blocks[1].Raw), string(s.Messages[2].Blocks[0].Raw), string(s.Messages[2].Blocks[1].Raw)}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if s.System != "You fix bugs." || s.Stats.Malformed != 1 || s.Stats.Repairs.BadInput != 1 {
		t.Errorf("system %q stats %+v", s.System, s.Stats)
	}
	for _, bad := range []string{`[]`, `{"trajectory":[]}`, `{"history":{}}`, `{`} {
		if _, err := ParseSWEAgent([]byte(bad), "b.traj"); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// checkRequests builds every request of s and checks what the brief
// promises of them: each parses, carries exactly three cache markers
// (system[1], system[2], the last block of the last message), every
// tool_result answers a tool_use of the preceding assistant message, and
// each request extends the previous one byte for byte apart from the
// client's re-encoding of the previously marked message.
func checkRequests(t *testing.T, s *Session) {
	t.Helper()
	b, err := NewBuilder(s, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var prev *Request
	for k := range b.Len() {
		r, err := b.Request(k)
		if err != nil {
			t.Fatal(err)
		}
		c, err := anthropic.Parse(r.Body)
		if err != nil {
			t.Fatalf("%s request %d does not parse: %v", s.ID, k, err)
		}
		if c.CacheMarkers != 3 || !c.Stream {
			t.Fatalf("%s request %d: %d markers, stream %v", s.ID, k, c.CacheMarkers, c.Stream)
		}
		last := -1
		for i, m := range c.Messages {
			if m.Role != conversation.RoleSystem {
				last = i
			}
		}
		for i, m := range c.Messages {
			for j, blk := range m.Blocks {
				if marked := !blk.CacheControl.IsZero(); marked != (i == last && j == len(m.Blocks)-1) {
					t.Fatalf("%s request %d: marker on message %d block %d: %v", s.ID, k, i, j, marked)
				}
				if blk.Kind == conversation.ToolResult && (blk.Call[0] < 0 || blk.Call[0] != i-1) {
					t.Fatalf("%s request %d: tool_result in message %d answers no call of the previous message", s.ID, k, i)
				}
			}
			if i > 0 && m.Role == c.Messages[i-1].Role && m.Role != conversation.RoleSystem {
				t.Fatalf("%s request %d: two %v messages in a row", s.ID, k, m.Role)
			}
		}
		if c.Messages[0].Role != conversation.RoleUser || c.Messages[len(c.Messages)-1].Role == conversation.RoleAssistant {
			t.Fatalf("%s request %d: starts with %v or ends with an assistant message", s.ID, k, c.Messages[0].Role)
		}
		if prev != nil && !r.Reset {
			// The previous request as the client re-sends it (with this
			// request's model: a model switch changes only that field).
			again, _ := b.build(prev.First, prev.Message, r.Model, false)
			end := bytes.LastIndex(again, []byte(`],"system":[`))
			if !bytes.HasPrefix(r.Body, again[:end]) {
				n := sharedPrefix(r.Body, again)
				t.Fatalf("%s request %d does not extend request %d: they differ at byte %d: %.60q vs %.60q", s.ID, k, k-1, n, r.Body[n:], again[n:])
			}
			if prev.Model == r.Model && !bytes.HasPrefix(r.Body, prev.Body[:prev.Stable]) {
				t.Fatalf("%s request %d: Stable prefix of the previous request not repeated", s.ID, k)
			}
		}
		prev = r
	}
}

func sharedPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// topKeys lists the top-level keys of a JSON object in order.
func topKeys(t *testing.T, body []byte) []string {
	root, err := jsonscan.Root(body)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	it := jsonscan.Members(body, root)
	for k, _, ok := it.NextMember(); ok; k, _, ok = it.NextMember() {
		s, _ := jsonscan.Unquote(k.Bytes(body))
		keys = append(keys, s)
	}
	return keys
}

func TestRequestShapeMatchesCapture(t *testing.T) {
	capture, err := os.ReadFile("../../anthropic/testdata/claude-code-2.1.197-first.json")
	if err != nil {
		t.Fatal(err)
	}
	s := parseOne(t, jsonl(u(str1("say hi")), a("m1", txt("hi"))))
	b, _ := NewBuilder(s, BuildOptions{})
	r, _ := b.Request(0)
	if d := cmp.Diff(topKeys(t, capture), topKeys(t, r.Body)); d != "" {
		t.Errorf("top-level keys (-capture +ours):\n%s", d)
	}
	describe := func(body []byte) string {
		c, err := anthropic.Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		it := jsonscan.Elements(body, c.System)
		for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
			cc, _ := jsonscan.Lookup(body, v, "cache_control")
			out = append(out, fmt.Sprintf("system block cache_control=%s", cc.Bytes(body)))
		}
		for _, m := range c.Messages {
			var bs []string
			for _, blk := range m.Blocks {
				bs = append(bs, fmt.Sprintf("%s(marked=%v)", blk.Type, !blk.CacheControl.IsZero()))
			}
			out = append(out, fmt.Sprintf("%v string=%v %s", m.Role, m.ContentString, strings.Join(bs, " ")))
		}
		for _, mem := range []conversation.Member{c.Thinking, c.ContextManagement} {
			out = append(out, string(c.Bytes(mem.Whole)))
		}
		uid, _ := jsonscan.Lookup(body, c.Metadata.Value, "user_id")
		inner, _ := jsonscan.Unquote(uid.Bytes(body))
		out = append(out, fmt.Sprint("user_id keys ", topKeys(t, []byte(inner))))
		return strings.Join(out, "\n")
	}
	if d := cmp.Diff(describe(capture), describe(r.Body)); d != "" {
		t.Errorf("request shape (-capture +ours):\n%s", d)
	}
	if !bytes.Contains(r.Body, []byte(`"session_id\":\"s1\"`)) {
		t.Error("session id not in metadata.user_id")
	}
}

func TestReEncodingOfMarkedMessage(t *testing.T) {
	s := parseOne(t, jsonl(
		u(str1("first")), a("m1", txt("one")),
		u(arr(txt("second"))), a("m2", tu("t1")),
		u(arr(tr("t1", "out"))), a("m3", txt("three")),
	))
	b, _ := NewBuilder(s, BuildOptions{Profile: &Profile{MaxTokens: 100, SystemMessageIndex: 1, System: [3]string{"a", "b", "c"}}})
	var bodies []string
	for k := range b.Len() {
		r, _ := b.Request(k)
		bodies = append(bodies, string(r.Body[len(`{"model":"claude-sonnet-4-5-20250929","messages":[`):bytes.Index(r.Body, []byte(`],"system"`))]))
	}
	want := []string{
		`{"role":"user","content":[{"type":"text","text":"first","cache_control":{"type":"ephemeral"}}]}`,
		`{"role":"user","content":"first"},{"role":"assistant","content":[{"type":"text","text":"one"}]},` +
			`{"role":"user","content":[{"type":"text","text":"second","cache_control":{"type":"ephemeral"}}]}`,
		`{"role":"user","content":"first"},{"role":"assistant","content":[{"type":"text","text":"one"}]},` +
			`{"role":"user","content":"second"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]},` +
			`{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"out","is_error":false,"cache_control":{"type":"ephemeral"}}]}`,
	}
	if d := cmp.Diff(want, bodies); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestDeterministic(t *testing.T) {
	for _, f := range testdataFiles(t) {
		ss1, _ := LoadFile(f, Options{})
		ss2, _ := LoadFile(f, Options{})
		for i := range ss1 {
			b1, _ := NewBuilder(ss1[i], BuildOptions{})
			b2, _ := NewBuilder(ss2[i], BuildOptions{})
			for k := range b1.Len() {
				r1, _ := b1.Request(k)
				r2, _ := b2.Request(k)
				if !bytes.Equal(r1.Body, r2.Body) {
					t.Fatalf("%s request %d differs between two builds", f, k)
				}
			}
			// Building out of order gives the same bytes.
			if n := b1.Len(); n > 1 {
				r, _ := b1.Request(n - 1)
				r0, _ := b1.Request(0)
				again, _ := b2.Request(0)
				if !bytes.Equal(r0.Body, again.Body) || r.Index != n-1 {
					t.Fatalf("%s: order changes bytes", f)
				}
			}
		}
	}
}

func testdataFiles(t *testing.T) []string {
	var out []string
	for _, g := range []string{"testdata/claude-code/*.jsonl", "testdata/swe-agent/*.traj"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	if len(out) < 7 {
		t.Fatalf("testdata missing: %v", out)
	}
	return out
}

// summary describes a loaded session for the golden files.
func summary(s *Session) string {
	var b strings.Builder
	fmt.Fprintf(&b, "session %s format=%s sidechain=%v parent=%q model=%q client_session=%q requests=%d\n",
		s.ID, s.Format, s.Sidechain, s.Parent, s.Model, s.ClientSessionID, s.Requests())
	fmt.Fprintf(&b, "stats %+v\n", s.Stats)
	for i, m := range s.Messages {
		var bs []string
		for _, blk := range m.Blocks {
			x := blk.Type
			if blk.ID != "" {
				x += ":" + blk.ID
			}
			bs = append(bs, fmt.Sprintf("%s(%dB)", x, len(blk.Raw)))
		}
		u := ""
		if m.Usage != nil {
			u = fmt.Sprintf(" usage=%d+%d+%d/%d", m.Usage.InputTokens, m.Usage.CacheCreationInputTokens, m.Usage.CacheReadInputTokens, m.Usage.OutputTokens)
		}
		fmt.Fprintf(&b, "%3d line=%d %s id=%q reset=%v gaps=%d repaired=%v%s %s\n", i, m.Line, m.Role, m.ID, m.Reset, m.Gaps, m.Repaired, u, strings.Join(bs, " "))
	}
	return b.String()
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs; run go test -update if intended:\n%s", path, cmp.Diff(string(want), string(got)))
	}
}

func TestTestdataGolden(t *testing.T) {
	for _, f := range testdataFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ss, err := LoadFile(f, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var sum strings.Builder
			for _, s := range ss {
				sum.WriteString(summary(s))
				checkRequests(t, s)
			}
			base := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
			golden(t, filepath.Join("testdata", "golden", base+".txt"), []byte(sum.String()))
			// The last request of the session, byte for byte.
			s := ss[0]
			b, _ := NewBuilder(s, BuildOptions{})
			if b.Len() > 0 {
				r, _ := b.Request(b.Len() - 1)
				golden(t, filepath.Join("testdata", "golden", base+".last.json"), r.Body)
			}
		})
	}
}

// Facts about the real testdata that the golden files also hold, asserted
// directly so that a regenerated golden file cannot hide them.
func TestTestdataFacts(t *testing.T) {
	load := func(name string) *Session {
		ss, err := LoadFile("testdata/claude-code/"+name+".jsonl", Options{})
		if err != nil {
			t.Fatal(err)
		}
		return ss[0]
	}
	s := load("43bc3167-00a3-440e-afdf-c6c2575ef92c")
	if s.Stats.Synthetic != 1 || s.Requests() != 1 {
		t.Errorf("43bc3167: synthetic %d requests %d", s.Stats.Synthetic, s.Requests())
	}
	s = load("b8d44276-1f04-4220-98c0-b410f7c58ff5")
	if s.Stats.Malformed != 1 || s.Stats.Repairs.MissingResult != 1 || s.Requests() != 6 {
		t.Errorf("b8d44276: %+v requests %d", s.Stats, s.Requests())
	}
	s = load("8914a511-2982-4b5b-886b-cb526da278b1")
	if s.Stats.Malformed != 1 || s.Requests() != 11 || s.Stats.Merged < 11 {
		t.Errorf("8914a511: %+v requests %d", s.Stats, s.Requests())
	}
	s = load("agent-a00ad96")
	if !s.Sidechain || s.Parent != "18240050-3ee8-41cd-a89a-0a5c4b709607" || s.ID != "18240050-3ee8-41cd-a89a-0a5c4b709607/agent-a00ad96" {
		t.Errorf("agent file: %s sidechain %v parent %s", s.ID, s.Sidechain, s.Parent)
	}
	for _, name := range []string{"8914a511-2982-4b5b-886b-cb526da278b1", "de0891f0-8f37-4cb1-b2bc-04c278fd5ae2"} {
		s := load(name)
		for i, m := range s.Messages {
			if m.Role == Assistant && m.Usage == nil {
				t.Errorf("%s message %d has no usage", name, i)
			}
		}
	}
}

func TestLoadFolder(t *testing.T) {
	ss, err := Load([]string{"testdata"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range ss {
		got = append(got, filepath.Base(s.Path))
	}
	want := []string{
		"1ff3b1f4-aca7-440e-8faf-06d54b235f74.jsonl", "43bc3167-00a3-440e-afdf-c6c2575ef92c.jsonl",
		"8914a511-2982-4b5b-886b-cb526da278b1.jsonl", "agent-a00ad96.jsonl",
		"b8d44276-1f04-4220-98c0-b410f7c58ff5.jsonl", "de0891f0-8f37-4cb1-b2bc-04c278fd5ae2.jsonl",
		"capture-codex-custom-compact.rollout.jsonl", "capture-codex-first.rollout.jsonl", "rollout-2026-01-30T10-36-39-019c0e43-0722-73c2-b7b9-232e9399a95d.jsonl",
		"session-2026-11-27T20-15-c6f3224c.jsonl", "session-2026-11-27T20-18-f7a6f1c4.jsonl",
		"function_calling_simple.traj",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for _, s := range ss {
		if codex := strings.Contains(s.Path, "/codex/"); codex != (s.Format == Codex) {
			t.Errorf("%s loaded as %v", s.Path, s.Format)
		}
		if gem := strings.Contains(s.Path, "/gemini-cli/"); gem != (s.Format == GeminiCLI) {
			t.Errorf("%s loaded as %v", s.Path, s.Format)
		}
	}
	both, err := Load([]string{"testdata/swe-agent/function_calling_simple.traj", "testdata/claude-code/agent-a00ad96.jsonl"}, Options{})
	if err != nil || len(both) != 2 || both[0].Format != SWEAgent {
		t.Errorf("list: %d sessions, %v", len(both), err)
	}
	if _, err := Load([]string{"testdata/nope"}, Options{}); err == nil {
		t.Error("missing path accepted")
	}
}

// TestRealSessions rebuilds every request of the shared real data's
// Claude Code and SWE-agent sessions (over 1,000), or, in a clone without
// it, of the repository's Claude Code session (31), and checks each.
func TestRealSessions(t *testing.T) {
	cc, full := shareddata.Sessions(t, "claude-code")
	dirs, least := []string{cc}, 30
	if full {
		dirs, least = append(dirs, shareddata.Dir(t, "swe-agent")), 1000
	}
	ss, err := Load(dirs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	requests := 0
	for _, s := range ss {
		checkRequests(t, s)
		requests += s.Requests()
	}
	t.Logf("%d sessions, %d requests rebuilt", len(ss), requests)
	if requests < least {
		t.Errorf("only %d requests", requests)
	}
}

// TestRequestTimes checks that a request carries the timestamp of the
// first record of the answer it produced, for Claude Code transcripts and
// Codex rollouts, and zero where the transcript has none.
func TestRequestTimes(t *testing.T) {
	at := func(line, ts string) string {
		if ts == "" {
			return line
		}
		return `{"timestamp":"` + ts + `",` + line[1:]
	}
	ms := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cc := jsonl(
		at(u(str1("hi")), "2026-01-17T04:01:13.646Z"),
		at(a("m1", think("x", "s")), "2026-01-17T04:01:15.000Z"),
		at(a("m1", tu("t1")), "2026-01-17T04:01:16.500Z"), // merged: the first record's time stays
		at(u(arr(tr("t1", "ok"))), "2026-01-17T04:01:17Z"),
		at(a("m2", txt("done")), "2026-01-17T04:09:00.250Z"),
		u(str1("again")),
		a("m3", txt("no time")),
		at(u(str1("bad")), "yesterday"),
		at(a("m4", txt("bad time")), "not a time"),
	)
	meta := `{"timestamp":"2025-10-05T03:31:16.002Z","type":"session_meta","payload":{"id":"th"}}`
	user := `{"timestamp":"2025-10-05T03:31:20Z","type":"response_item","payload":{"type":"message","role":"user","content":[]}}`
	rs := `{"timestamp":"2025-10-05T03:31:25.5Z","type":"response_item","payload":{"type":"reasoning","summary":[]}}`
	msg := `{"timestamp":"2025-10-05T03:31:26Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[]}}`
	user2 := `{"timestamp":"2025-10-05T04:00:00Z","type":"response_item","payload":{"type":"message","role":"user","content":[]}}`
	msg2 := `{"type":"response_item","payload":{"type":"message","role":"assistant","content":[]}}`
	cx := jsonl(meta, user, rs, msg, user2, msg2)
	cases := []struct {
		name string
		s    *Session
		want []time.Time
	}{
		{"claude-code", parseOne(t, cc), []time.Time{ms("2026-01-17T04:01:15Z"), ms("2026-01-17T04:09:00.25Z"), {}, {}}},
		{"codex", ParseCodex(cx, "rollout-x.jsonl"), []time.Time{ms("2025-10-05T03:31:25.5Z"), {}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := NewBuilder(c.s, BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var got []time.Time
			for k := range b.Len() {
				r, err := b.Request(k)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, r.Time)
			}
			if d := cmp.Diff(c.want, got); d != "" {
				t.Errorf("request times (-want +got):\n%s", d)
			}
		})
	}
}
