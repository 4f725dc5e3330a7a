package validate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// base is a conversation with every kind of block a rewrite meets: a
// system-role message, thinking (also redacted) before tool rounds,
// parallel tool calls, a result with array content, an unknown block type
// and field, and a current turn (messages 8 and 9) whose result carries
// the moving cache marker.
var base = strings.Join([]string{
	`{"model":"m","max_tokens":100,` +
		`"system":[{"type":"text","text":"S1"},{"type":"text","text":"S2","cache_control":{"type":"ephemeral"}}],` +
		`"tools":[{"name":"Bash","input_schema":{"type":"object"}},{"name":"Read","input_schema":{"type":"object"}}],` +
		`"thinking":{"type":"adaptive"},"x_unknown":{"a":1},"messages":[`,
	/*0*/ `{"role":"user","content":"start"},`,
	/*1*/ `{"role":"system","content":"sys msg"},`,
	/*2*/ `{"role":"assistant","content":[{"type":"thinking","thinking":"plan A","signature":"c2lnQQ=="},{"type":"text","text":"I'll look"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},`,
	/*3*/ `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a\nb\nc","is_error":false}]},`,
	/*4*/ `{"role":"assistant","content":[{"type":"thinking","thinking":"plan B","signature":"c2lnQg=="},{"type":"tool_use","id":"toolu_2","name":"Bash","input":{"command":"cat a"}},{"type":"tool_use","id":"toolu_3","name":"Read","input":{"path":"b"}}]},`,
	/*5*/ `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"contents of a"}]},{"type":"tool_result","tool_use_id":"toolu_3","content":"contents of b"},{"type":"text","text":"<reminder>x</reminder>"}]},`,
	/*6*/ `{"role":"assistant","content":[{"type":"redacted_thinking","data":"cmVk"},{"type":"text","text":"Done with round two.","x_field":"keep"},{"type":"mystery","payload":{"k":[1,2]}}]},`,
	/*7*/ `{"role":"user","content":"next question"},`,
	/*8*/ `{"role":"assistant","content":[{"type":"thinking","thinking":"latest","signature":"c2lnTA=="},{"type":"tool_use","id":"toolu_4","name":"Bash","input":{"command":"pwd"}}]},`,
	/*9*/ `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_4","content":"/home","cache_control":{"type":"ephemeral"}}]}`,
	`]}`,
}, "")

// edit replaces each old string (which must occur exactly once) by its new
// one, in order.
func edit(t testing.TB, s string, oldNew ...string) string {
	t.Helper()
	for i := 0; i < len(oldNew); i += 2 {
		if n := strings.Count(s, oldNew[i]); n != 1 {
			t.Fatalf("edit: %q occurs %d times", oldNew[i], n)
		}
		s = strings.Replace(s, oldNew[i], oldNew[i+1], 1)
	}
	return s
}

// Pieces of base used by several cases.
const (
	m2 = `{"role":"assistant","content":[{"type":"thinking","thinking":"plan A","signature":"c2lnQQ=="},{"type":"text","text":"I'll look"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},`
	m3 = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a\nb\nc","is_error":false}]},`
	m4 = `{"role":"assistant","content":[{"type":"thinking","thinking":"plan B","signature":"c2lnQg=="},{"type":"tool_use","id":"toolu_2","name":"Bash","input":{"command":"cat a"}},{"type":"tool_use","id":"toolu_3","name":"Read","input":{"path":"b"}}]},`
	r5 = `{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"contents of a"}]},{"type":"tool_result","tool_use_id":"toolu_3","content":"contents of b"},`
	cc = `"cache_control":{"type":"ephemeral"}`
)

func TestBaseIsValid(t *testing.T) {
	if err := Request([]byte(base)); err != nil {
		t.Fatal(err)
	}
}

func TestRewrite(t *testing.T) {
	all := Options{AllowInputEdits: true, AllowThinkingRemoval: true, AllowMessageRemoval: true, AllowCacheMarkers: true, AllowTopLevel: []string{"thinking", "context_management"}}
	for _, tc := range []struct {
		name   string
		oldNew []string // edits of base
		opts   Options
		want   []Rule
	}{
		// allowed
		{"identical", nil, Options{}, nil},
		{"tool result cleared", []string{`"a\nb\nc"`, `"[cleared]"`}, Options{}, nil},
		{"array result became a string", []string{`[{"type":"text","text":"contents of a"}]`, `"[cleared]"`}, Options{}, nil},
		{"array result shortened", []string{`"contents of a"`, `"c…"`}, Options{}, nil},
		{"current turn result capped", []string{`"/home"`, `"/ho[cut]"`}, Options{}, nil},
		{"input cleared", []string{`{"command":"ls"}`, `{}`}, Options{AllowInputEdits: true}, nil},
		{"thinking removed", []string{`{"type":"thinking","thinking":"plan A","signature":"c2lnQQ=="},`, ``,
			`{"type":"redacted_thinking","data":"cmVk"},`, ``}, Options{AllowThinkingRemoval: true}, nil},
		{"old tool round removed", []string{m2 + m3, ``}, Options{AllowMessageRemoval: true}, nil},
		{"parallel round removed, text kept", []string{m4, ``, r5, ``}, Options{AllowMessageRemoval: true}, nil},
		{"replacement text for an emptied message", []string{m4, `{"role":"assistant","content":[{"type":"text","text":"[2 tool calls removed]"}]},`, r5, ``},
			Options{AllowMessageRemoval: true, AllowThinkingRemoval: true}, nil},
		{"replacement string for an emptied message", []string{m4, `{"role":"assistant","content":"[2 tool calls removed]"},`, r5, ``},
			Options{AllowMessageRemoval: true, AllowThinkingRemoval: true}, nil},
		{"markers added", []string{`{"name":"Read","input_schema":{"type":"object"}}`, `{"name":"Read","input_schema":{"type":"object"},` + cc + `}`,
			`"is_error":false}`, `"is_error":false,` + cc + `}`}, Options{AllowCacheMarkers: true}, nil},
		{"marker added first in a block", []string{`{"type":"text","text":"I'll look"}`, `{` + cc + `,"type":"text","text":"I'll look"}`}, Options{AllowCacheMarkers: true}, nil},
		{"string content wrapped for a marker", []string{`"next question"`, `[{"type":"text","text":"next question",` + cc + `}]`}, Options{AllowCacheMarkers: true}, nil},
		{"marker inside a result", []string{`{"type":"text","text":"contents of a"}`, `{"type":"text","text":"contents of a",` + cc + `}`}, Options{AllowCacheMarkers: true}, nil},
		{"allowed top-level change", []string{`"thinking":{"type":"adaptive"}`, `"thinking":{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"drop_block"}}`}, all, nil},
		{"allowed top-level addition", []string{`"x_unknown"`, `"context_management":{"edits":[]},"x_unknown"`}, all, nil},
		{"allowed top-level addition at the end", []string{`]}]}`, `]}],"context_management":{}}`}, all, nil},
		{"everything at once", []string{
			`"a\nb\nc"`, `"[cleared]"`,
			`{"command":"cat a"}`, `{}`,
			`{"type":"thinking","thinking":"plan B","signature":"c2lnQg=="},`, ``,
			`"thinking":{"type":"adaptive"}`, `"thinking":{"type":"enabled","budget_tokens":1024}`,
		}, all, nil},

		// tool results: only the content may change
		{"result id changed", []string{`"tool_use_id":"toolu_1"`, `"tool_use_id":"toolu_9"`}, all, []Rule{RuleToolPairing, RuleToolPairing, RuleBlockChanged}},
		{"is_error changed", []string{`"is_error":false`, `"is_error":true`}, all, []Rule{RuleBlockChanged}},
		{"result content not a string", []string{`"a\nb\nc"`, `5`}, all, []Rule{RuleBlock}},
		{"result gained a field", []string{`"is_error":false}`, `"is_error":false,"x":1}`}, all, []Rule{RuleBlockChanged}},

		// tool_use
		{"input changed without option", []string{`{"command":"ls"}`, `{}`}, Options{}, []Rule{RuleInputChanged}},
		{"tool name changed", []string{`"name":"Bash","input":{"command":"ls"}`, `"name":"Sh","input":{"command":"ls"}`}, all, []Rule{RuleBlockChanged}},

		// thinking
		{"thinking text altered", []string{`"plan A"`, `"plan A (shortened)"`}, all, []Rule{RuleThinkingChanged}},
		{"thinking emptied", []string{`"thinking":"plan A"`, `"thinking":""`}, all, []Rule{RuleThinkingChanged}},
		{"signature altered", []string{`"c2lnQQ=="`, `"c2lnQQ"`}, all, []Rule{RuleThinkingChanged}},
		{"redacted data altered", []string{`"cmVk"`, `"cmVl"`}, all, []Rule{RuleThinkingChanged}},
		{"thinking removed without option", []string{`{"type":"thinking","thinking":"plan A","signature":"c2lnQQ=="},`, ``}, Options{}, []Rule{RuleBlockRemoved}},
		{"latest thinking removed", []string{`{"type":"thinking","thinking":"latest","signature":"c2lnTA=="},`, ``}, all, []Rule{RuleThinkingChanged}},
		{"latest thinking altered", []string{`"latest"`, `"lates"`}, all, []Rule{RuleThinkingChanged}},
		{"thinking reformatted", []string{`"thinking":"plan A","signature"`, `"thinking": "plan A","signature"`}, all, []Rule{RuleThinkingChanged}},

		// other blocks are byte-identical
		{"text changed", []string{`"I'll look"`, `"I will look"`}, all, []Rule{RuleBlockChanged}},
		{"unknown field changed", []string{`"x_field":"keep"`, `"x_field":"kept"`}, all, []Rule{RuleBlockChanged}},
		{"unknown field removed", []string{`,"x_field":"keep"`, ``}, all, []Rule{RuleBlockChanged}},
		{"unknown block changed", []string{`[1,2]`, `[1,3]`}, all, []Rule{RuleBlockChanged}},
		{"unknown block gained a marker", []string{`"payload":{"k":[1,2]}}`, `"payload":{"k":[1,2]},` + cc + `}`}, all, []Rule{RuleBlockChanged}},
		{"unknown block removed", []string{`,{"type":"mystery","payload":{"k":[1,2]}}`, ``}, all, []Rule{RuleBlockRemoved}},
		{"text block removed", []string{`{"type":"text","text":"I'll look"},`, ``}, all, []Rule{RuleBlockRemoved}},
		{"block whitespace", []string{`{"type":"text","text":"I'll look"}`, `{"type":"text", "text":"I'll look"}`}, all, []Rule{RuleBlockChanged}},
		{"whitespace between blocks", []string{`{"type":"text","text":"I'll look"},`, `{"type":"text","text":"I'll look"}, `}, all, []Rule{RuleBlockChanged}},
		{"block added", []string{`{"type":"text","text":"I'll look"},`, `{"type":"text","text":"I'll look"},{"type":"text","text":"extra"},`}, all, []Rule{RuleBlockAdded}},
		{"string content changed", []string{`"next question"`, `"next question?"`}, all, []Rule{RuleBlockChanged}},
		{"string wrapped without a marker", []string{`"next question"`, `[{"type":"text","text":"next question"}]`}, all, []Rule{RuleBlockChanged}},
		{"string wrapped without option", []string{`"next question"`, `[{"type":"text","text":"next question",` + cc + `}]`}, Options{}, []Rule{RuleCacheMarker}},
		{"replacement where text was", []string{m2, `{"role":"assistant","content":[{"type":"text","text":"gone"}]},`, m3, ``}, all, []Rule{RuleBlockChanged}},
		{"replacement without removal option", []string{m4, `{"role":"assistant","content":[{"type":"text","text":"[removed]"}]},`, r5, ``},
			Options{AllowThinkingRemoval: true}, []Rule{RuleBlockRemoved, RuleBlockRemoved, RuleBlockRemoved, RuleBlockRemoved}},
		{"replacement with extra field", []string{m4, `{"role":"assistant","content":[{"type":"text","text":"[removed]","x":1}]},`, r5, ``}, all, []Rule{RuleBlockAdded}},

		// cache markers
		{"marker added without option", []string{`"is_error":false}`, `"is_error":false,` + cc + `}`}, Options{}, []Rule{RuleCacheMarker}},
		{"marker removed", []string{`"content":"/home",` + cc, `"content":"/home"`}, all, []Rule{RuleCacheMarker}},
		{"marker changed", []string{`"content":"/home",` + cc, `"content":"/home","cache_control":{"type":"ephemeral","ttl":"1h"}`}, all, []Rule{RuleCacheMarker}},
		{"fifth marker", []string{`{"type":"text","text":"I'll look"}`, `{"type":"text","text":"I'll look",` + cc + `}`,
			`"is_error":false}`, `"is_error":false,` + cc + `}`,
			`"next question"`, `[{"type":"text","text":"next question",` + cc + `}]`}, all, []Rule{RuleCacheControl}},
		{"system marker without option", []string{`{"type":"text","text":"S1"}`, `{"type":"text","text":"S1",` + cc + `}`}, Options{}, []Rule{RuleCacheMarker}},
		{"system marker moved", []string{`{"type":"text","text":"S1"},{"type":"text","text":"S2",` + cc + `}`, `{"type":"text","text":"S1",` + cc + `},{"type":"text","text":"S2"}`},
			all, []Rule{RuleCacheMarker}},

		// system, tools, top level
		{"system changed", []string{`"S1"`, `"S1!"`}, all, []Rule{RuleSystem}},
		{"system block added", []string{`{"type":"text","text":"S1"},`, `{"type":"text","text":"S0"},{"type":"text","text":"S1"},`}, all, []Rule{RuleSystem}},
		{"tools changed", []string{`{"name":"Read","input_schema":{"type":"object"}}`, `{"name":"Read","input_schema":{"type":"object","x":1}}`}, all, []Rule{RuleTools}},
		{"tool removed", []string{`,{"name":"Read","input_schema":{"type":"object"}}`, ``}, all, []Rule{RuleTools}},
		{"model changed", []string{`"model":"m"`, `"model":"n"`}, all, []Rule{RuleTopLevel}},
		{"unknown top-level changed", []string{`"x_unknown":{"a":1}`, `"x_unknown":{"a":2}`}, all, []Rule{RuleTopLevel}},
		{"top-level change not allowed", []string{`"thinking":{"type":"adaptive"}`, `"thinking":{"type":"enabled"}`}, Options{}, []Rule{RuleTopLevel}},
		{"top-level addition not allowed", []string{`"x_unknown"`, `"metadata":{},"x_unknown"`}, all, []Rule{RuleTopLevel}},
		{"allowed top-level key removed", []string{`"thinking":{"type":"adaptive"},`, ``}, all, []Rule{RuleTopLevel}},
		{"top-level reordered", []string{`"model":"m","max_tokens":100`, `"max_tokens":100,"model":"m"`}, all, []Rule{RuleTopLevel}},
		{"top-level whitespace", []string{`"model":"m",`, `"model":"m", `}, all, []Rule{RuleTopLevel}},

		// messages
		{"message removed without option", []string{m2 + m3, ``}, Options{}, []Rule{RuleMessageRemoved, RuleMessageRemoved}},
		{"tool_use kept, result message removed", []string{m3, ``}, all, []Rule{RuleToolPairing, RuleHalfRound}},
		{"result kept, tool_use message removed", []string{m2, ``}, all, []Rule{RuleToolPairing, RuleHalfRound}},
		{"one of two results removed", []string{`{"type":"tool_result","tool_use_id":"toolu_3","content":"contents of b"},`, ``}, all, []Rule{RuleToolPairing, RuleHalfRound}},
		{"tool_use removed without option", []string{`,{"type":"tool_use","id":"toolu_3","name":"Read","input":{"path":"b"}}`, ``,
			`{"type":"tool_result","tool_use_id":"toolu_3","content":"contents of b"},`, ``}, Options{}, []Rule{RuleBlockRemoved, RuleBlockRemoved}},
		{"current turn removed", []string{`,{"role":"assistant","content":[{"type":"thinking","thinking":"latest","signature":"c2lnTA=="},{"type":"tool_use","id":"toolu_4","name":"Bash","input":{"command":"pwd"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_4","content":"/home",` + cc + `}]}`, ``}, all, []Rule{RuleMessageRemoved, RuleMessageRemoved}},
		{"role changed", []string{`{"role":"user","content":"next question"}`, `{"role":"system","content":"next question"}`}, all, []Rule{RuleMessageChanged}},
		{"message field added", []string{`{"role":"user","content":"next question"}`, `{"role":"user","content":"next question","x":1}`}, all, []Rule{RuleMessageChanged}},
		{"message added at the end", []string{`]}]}`, `]},{"role":"assistant","content":"hm"}]}`}, all, []Rule{RuleMessageAdded}},
		{"message added in the middle", []string{`{"role":"user","content":"next question"},`, `{"role":"user","content":"next question"},{"role":"user","content":"new"},`}, all, []Rule{RuleMessageAdded}},
		{"messages reordered", []string{`{"role":"user","content":"start"},{"role":"system","content":"sys msg"},`, `{"role":"system","content":"sys msg"},{"role":"user","content":"start"},`}, all,
			[]Rule{RuleMessageAdded}},
		{"whitespace between messages", []string{`{"role":"user","content":"start"},`, `{"role":"user","content":"start"}, `}, all, []Rule{RuleMessageChanged}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw := edit(t, base, tc.oldNew...)
			err := Rewrite([]byte(base), []byte(rw), tc.opts)
			if testing.Verbose() && err != nil {
				t.Log(err)
			}
			if d := cmp.Diff(tc.want, rulesOf(t, err)); d != "" {
				t.Errorf("rules (-want +got):\n%s\nerror: %v", d, err)
			}
		})
	}
}

// A marker inside a tool result's content may not disappear when the
// content is edited.
func TestRewriteResultMarkerKept(t *testing.T) {
	orig := edit(t, base, `{"type":"text","text":"contents of a"}`, `{"type":"text","text":"contents of a",`+cc+`}`)
	rw := edit(t, orig, `[{"type":"text","text":"contents of a",`+cc+`}]`, `"[cleared]"`)
	err := Rewrite([]byte(orig), []byte(rw), Options{AllowCacheMarkers: true})
	if d := cmp.Diff([]Rule{RuleCacheMarker}, rulesOf(t, err)); d != "" {
		t.Errorf("rules (-want +got):\n%s\nerror: %v", d, err)
	}
}

func TestRewriteOriginalInvalid(t *testing.T) {
	err := Rewrite([]byte(`{`), []byte(base), Options{})
	if d := cmp.Diff([]Rule{RuleOriginal}, rulesOf(t, err)); d != "" {
		t.Errorf("rules (-want +got):\n%s\nerror: %v", d, err)
	}
	err = Rewrite([]byte(base), []byte(`{`), Options{})
	if d := cmp.Diff([]Rule{RuleJSON}, rulesOf(t, err)); d != "" {
		t.Errorf("rules (-want +got):\n%s\nerror: %v", d, err)
	}
}

// The reports name the place and the change precisely.
func TestRewriteReport(t *testing.T) {
	rw := edit(t, base, `"plan A"`, `"plan A!"`, `{"command":"ls"}`, `{}`)
	err := Rewrite([]byte(base), []byte(rw), Options{})
	want := "validate: 2 problems:\n" +
		"\tmessages.2.content.0: [thinking-changed] thinking block (orig.messages.2.content.0) altered: the thinking text changed; a thinking block that stays must be byte-identical\n" +
		"\tmessages.2.content.2: [input-changed] tool_use input changed (needs Options.AllowInputEdits)"
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
	rw = edit(t, base, m2+m3, ``)
	err = Rewrite([]byte(base), []byte(rw), Options{})
	want = "orig.messages.2: [message-removed] message removed (needs Options.AllowMessageRemoval)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got\n%v\nwant it to contain\n%s", err, want)
	}
}

// Rewrites of small requests that base cannot express.
func TestRewriteSmall(t *testing.T) {
	goMsg := `{"role":"user","content":"go"}`
	ok := `{"role":"assistant","content":"ok"}`
	for _, tc := range []struct {
		name      string
		orig, rew string
		opts      Options
		want      []Rule
	}{
		// Of identical messages the older one is the one removed, so the
		// current turn's copy is not reported as removed.
		{"older duplicate removed", req(goMsg, ok, goMsg), req(ok, goMsg), Options{AllowMessageRemoval: true}, nil},
		{"older duplicates removed", req(goMsg, ok, goMsg, ok, goMsg), req(goMsg, ok, goMsg), Options{AllowMessageRemoval: true}, nil},
		{"current turn removed", req(goMsg, ok, goMsg), req(goMsg, ok), Options{AllowMessageRemoval: true}, []Rule{RuleMessageRemoved}},
		{"system allowed to change", `{"model":"m","system":"a","messages":[` + goMsg + `]}`, `{"model":"m","system":"b","messages":[` + goMsg + `]}`,
			Options{AllowTopLevel: []string{"system"}}, nil},
		{"system string wrapped for a marker", `{"model":"m","system":"a","messages":[` + goMsg + `]}`,
			`{"model":"m","system":[{"type":"text","text":"a",` + cc + `}],"messages":[` + goMsg + `]}`, Options{AllowCacheMarkers: true}, nil},
		{"system string wrapped with other text", `{"model":"m","system":"a","messages":[` + goMsg + `]}`,
			`{"model":"m","system":[{"type":"text","text":"b",` + cc + `}],"messages":[` + goMsg + `]}`, Options{AllowCacheMarkers: true}, []Rule{RuleSystem}},
		{"no assistant: last message kept", req(goMsg, `{"role":"user","content":"more"}`), req(goMsg), Options{AllowMessageRemoval: true}, []Rule{RuleMessageRemoved}},
		{"thinking-only message replaced", req(goMsg, `{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"c2ln"}]}`, goMsg, ok, goMsg),
			req(goMsg, `{"role":"assistant","content":[{"type":"text","text":"[thinking removed]"}]}`, goMsg, ok, goMsg), Options{AllowThinkingRemoval: true}, nil},
		{"thinking-only message removed", req(goMsg, `{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"c2ln"}]}`, goMsg, ok, goMsg),
			req(goMsg, goMsg, ok, goMsg), Options{AllowMessageRemoval: true}, nil},
		{"latest thinking-only message replaced", req(goMsg, `{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"c2ln"}]}`, goMsg),
			req(goMsg, `{"role":"assistant","content":[{"type":"text","text":"[thinking removed]"}]}`, goMsg), Options{AllowThinkingRemoval: true}, []Rule{RuleThinkingChanged}},
		{"whitespace inside an unchanged message", req(goMsg), req(`{"role":"user", "content":"go"}`), Options{}, []Rule{RuleMessageChanged}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Rewrite([]byte(tc.orig), []byte(tc.rew), tc.opts)
			if testing.Verbose() && err != nil {
				t.Log(err)
			}
			if d := cmp.Diff(tc.want, rulesOf(t, err)); d != "" {
				t.Errorf("rules (-want +got):\n%s\nerror: %v", d, err)
			}
		})
	}
}

// TestRewriteTrimRepeatedText: a regression test (found by the property
// tests of pass/clearing over generated sessions). Tool-round trimming keeps
// the text of a dropped round's user message and puts its note first in
// the run's last user message; when that text recurs in an earlier
// message of the run ("[Request interrupted by user]" after two rounds),
// the alignment matched the earlier kept text with the later original
// and reported the note's message as added.
func TestRewriteTrimRepeatedText(t *testing.T) {
	const intr = `{"type":"text","text":"[Request interrupted by user]"}`
	round := func(id string) string {
		return `{"role":"assistant","content":[{"type":"tool_use","id":"` + id + `","name":"Bash","input":{"command":"ls"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id + `","content":"out"},` + intr + `]},`
	}
	placeholder := `{"role":"assistant","content":[{"type":"text","text":"[earlier tool work, dropped by ctxguard]"}]},`
	frame := func(msgs string) []byte {
		return []byte(`{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"go"},` + msgs +
			`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_3","name":"Bash","input":{"command":"pwd"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_3","content":"/"}]}]}`)
	}
	orig := frame(round("toolu_1") + round("toolu_2"))
	sent := frame(placeholder + `{"role":"user","content":[` + intr + `]},` +
		placeholder + `{"role":"user","content":[{"type":"text","text":"[ctxguard dropped 2 earlier tool rounds]"},` + intr + `]},`)
	if err := Rewrite(orig, sent, Options{AllowMessageRemoval: true, AllowRoundTrimming: true}); err != nil {
		t.Error(err)
	}
}

// TestRewriteTrimBlankText: tool-round trimming takes a text of white
// space alone with its round (Claude Code sends "\n\n" before thinking and
// tool calls; the API refuses a message left with nothing else), and
// nothing else of what a round's messages say. A regression test: that
// text counted as an anchor of its message, so the message trimming left
// (its other text, or the placeholder) matched no original, was paired
// with an older emptied message, and every kept message between them was
// reported as reordered (replays of Claude Code 2.1.39 sessions).
func TestRewriteTrimBlankText(t *testing.T) {
	const (
		blank = `{"type":"text","text":"\n\n"},`
		think = `{"type":"thinking","thinking":"hm","signature":"c2ln"},`
		said  = `{"type":"text","text":"Credo reports nesting"},`
	)
	goMsg := `{"role":"user","content":"go"}`
	asst := func(id, before string) string {
		return `{"role":"assistant","content":[` + before + `{"type":"tool_use","id":"` + id + `","name":"Bash","input":{"command":"ls"}}]}`
	}
	user := func(id string) string {
		return `{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + id + `","content":"out"}]}`
	}
	text := func(role, s string) string {
		return `{"role":"` + role + `","content":[{"type":"text","text":"` + s + `"}]}`
	}
	placeholder := text("assistant", "[earlier tool work, dropped by ctxguard]")
	note := text("user", "[ctxguard dropped 1 earlier tool rounds]")
	saidOnly := text("assistant", "Credo reports nesting")
	// Round 1 and 3 trimmed (two runs), round 2 kept between them, round
	// 4 the current turn.
	orig := func(third string) string {
		return req(goMsg, asst("toolu_1", ""), user("toolu_1"), asst("toolu_2", ""), user("toolu_2"),
			asst("toolu_3", third), user("toolu_3"), asst("toolu_4", ""), user("toolu_4"))
	}
	sent := func(third ...string) string {
		msgs := append([]string{goMsg, placeholder, note, asst("toolu_2", ""), user("toolu_2")}, third...)
		return req(append(msgs, asst("toolu_4", ""), user("toolu_4"))...)
	}
	// Round 1 kept too: the third round's messages have no emptied
	// message before them to be mistaken for.
	sentAll := func(third ...string) string {
		msgs := append([]string{goMsg, asst("toolu_1", ""), user("toolu_1"), asst("toolu_2", ""), user("toolu_2")}, third...)
		return req(append(msgs, asst("toolu_4", ""), user("toolu_4"))...)
	}
	trim := Options{AllowMessageRemoval: true, AllowRoundTrimming: true, AllowThinkingRemoval: true}
	for _, tc := range []struct {
		name       string
		orig, sent string
		opts       Options
		want       []Rule
	}{
		{"text kept, white space gone with the round", orig(blank + think + said), sent(saidOnly, note), trim, nil},
		{"white space alone: placeholder", orig(blank + think), sent(placeholder, note), trim, nil},
		{"escaped white space", orig(`{"type":"text","text":"\u00a0\t"},` + think), sent(placeholder, note), trim, nil},
		{"white space between texts", orig(said + blank + said), sent(`{"role":"assistant","content":[`+said+strings.TrimSuffix(said, ",")+`]}`, note), trim, nil},

		// what stays strict
		{"white space removed from a kept round", orig(blank + said), sentAll(asst("toolu_3", said), user("toolu_3")), trim, []Rule{RuleBlockRemoved}},
		{"white space removed without message removal", orig(blank + said), sentAll(asst("toolu_3", said), user("toolu_3")), Options{}, []Rule{RuleBlockRemoved}},
		{"text gone with the round", orig(blank + think + said), sentAll(placeholder, note), trim, []Rule{RuleBlockChanged, RuleBlockRemoved}},
		{"one of two texts gone with the round", orig(said + blank + said), sentAll(saidOnly, note), trim, []Rule{RuleBlockRemoved}},
		{"kept round moved after a trimmed one", orig(blank + think + said),
			req(goMsg, asst("toolu_1", ""), user("toolu_1"), saidOnly, note, asst("toolu_2", ""), user("toolu_2"), asst("toolu_4", ""), user("toolu_4")), trim, []Rule{RuleMessageAdded, RuleMessageAdded}},
		{"trimmed message duplicated", orig(blank + think + said), sentAll(saidOnly, note, saidOnly, note), trim, []Rule{RuleMessageAdded, RuleMessageAdded}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Request([]byte(tc.sent)); err != nil {
				t.Fatalf("the rewrite is not a valid request: %v", err)
			}
			err := Rewrite([]byte(tc.orig), []byte(tc.sent), tc.opts)
			if testing.Verbose() && err != nil {
				t.Log(err)
			}
			if d := cmp.Diff(tc.want, rulesOf(t, err)); d != "" {
				t.Errorf("rules (-want +got):\n%s\nerror: %v", d, err)
			}
		})
	}
}
