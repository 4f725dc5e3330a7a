package thinking_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/pass/thinking"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tools/validate"
)

// validateOpts is what the guard may do to a Messages request (as
// ctxguard.Allowed grants it): remove thinking, ask for drop_block.
var validateOpts = validate.Options{AllowThinkingRemoval: true, AllowTopLevel: []string{"thinking"}}

// run runs the guard over body with the cache sigs, as model, and returns
// the body sent and the pipeline's result.
func run(t *testing.T, proto protocol.Protocol, sigs *thinking.Signatures, body string, env *pipeline.Env) pipeline.Result {
	t.Helper()
	c, err := proto.Parse([]byte(body))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, body)
	}
	p, err := thinking.New(sigs)
	if err != nil {
		t.Fatal(err)
	}
	res := pipeline.New(nil, p).Run(&pipeline.Request{Ctx: context.Background(), Conv: c, Env: env})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	return res
}

// Messages API pieces. Signatures are JSON strings; the cache is keyed
// by them as sent, quotes included.
const (
	u1      = `{"role":"user","content":"start"}`
	thA     = `{"type":"thinking","thinking":"plan A","signature":"QUFBQQ=="}`
	redB    = `{"type":"redacted_thinking","data":"QkJCQg=="}`
	thC     = `{"type":"thinking","thinking":"plan C","signature":"Q0NDQw=="}`
	thD     = `{"type":"thinking","thinking":"plan D","signature":"RERERA=="}`
	text1   = `{"type":"text","text":"first answer"}`
	use1    = `{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}`
	result1 = `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.go"}]}`
	u2      = `{"role":"user","content":"go on"}`
	text3   = `{"type":"text","text":"done"}`
	note    = `{"type":"text","text":"[ctxguard removed earlier reasoning]"}`
)

func asst(blocks ...string) string {
	return `{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]}`
}

func messagesReq(model string, msgs ...string) string {
	return `{"model":"` + model + `","max_tokens":1000,"thinking":{"type":"enabled","budget_tokens":500},"stream":true,"messages":[` + strings.Join(msgs, ",") + `]}`
}

// history is a session of three answers: two in the history, the latest
// last, each with thinking.
func history(model string, a1, a2, a3 []string) string {
	return messagesReq(model, u1, asst(a1...), u2, asst(a2...), result1, asst(a3...), u2)
}

func recordAll(s *thinking.Signatures, family string, sigs ...string) {
	for _, sg := range sigs {
		s.Record(family, []byte(sg))
	}
}

func TestGuardMessages(t *testing.T) {
	a1, a2, a3 := []string{thA, text1}, []string{redB, use1}, []string{thC, text3}
	for _, tc := range []struct {
		name    string
		model   string
		minted  map[string][]string // family -> signatures (as JSON strings)
		a1, a2  []string            // the history after the guard
		removed bool
	}{
		{"claude to gpt", "gpt-5", map[string][]string{"anthropic": {`"QUFBQQ=="`, `"QkJCQg=="`, `"Q0NDQw=="`}}, []string{text1}, []string{use1}, true},
		{"claude to gpt through a gateway prefix", "openai/gpt-5.1-codex", map[string][]string{"anthropic": {`"QUFBQQ=="`, `"QkJCQg=="`}}, []string{text1}, []string{use1}, true},
		{"claude to claude", "claude-opus-4-5-20251101", map[string][]string{"anthropic": {`"QUFBQQ=="`, `"QkJCQg=="`, `"Q0NDQw=="`}}, a1, a2, false},
		{"unknown signatures", "gpt-5", nil, a1, a2, false},
		{"one of two known", "gpt-5", map[string][]string{"anthropic": {`"QkJCQg=="`}}, a1, []string{use1}, true},
		{"gpt to claude", "claude-sonnet-4-5", map[string][]string{"openai": {`"QUFBQQ=="`}, "anthropic": {`"QkJCQg=="`}}, []string{text1}, a2, true},
		// A gateway that served Gemini on the Messages API put its
		// thought signatures in thinking blocks.
		{"gemini to claude", "claude-sonnet-4-5", map[string][]string{"google": {`"QUFBQQ=="`, `"QkJCQg=="`}}, []string{text1}, []string{use1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := thinking.NewSignatures(thinking.Defaults(), nil)
			for fam, sigs := range tc.minted {
				recordAll(s, fam, sigs...)
			}
			body := history(tc.model, a1, a2, a3)
			res := run(t, anthropic.Protocol, s, body, nil)
			want := history(tc.model, tc.a1, tc.a2, a3) // the latest answer's thinking stays
			if diff := cmp.Diff(want, string(res.Body)); diff != "" {
				t.Errorf("sent body (-want +got):\n%s", diff)
			}
			if res.Changed != tc.removed || (len(res.Notes) > 0) != tc.removed {
				t.Errorf("Changed %v, notes %q; want a change %v", res.Changed, res.Notes, tc.removed)
			}
			if err := validate.Rewrite([]byte(body), res.Body, validateOpts); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestGuardLatestAnswer: the latest assistant message keeps its thinking
// whoever minted it, even when it is the only assistant message.
func TestGuardLatestAnswer(t *testing.T) {
	s := thinking.NewSignatures(thinking.Defaults(), nil)
	recordAll(s, "anthropic", `"QUFBQQ=="`)
	body := messagesReq("gpt-5", u1, asst(thA, use1), result1)
	if res := run(t, anthropic.Protocol, s, body, nil); res.Changed {
		t.Errorf("the latest answer was edited:\n%s", res.Body)
	}
}

// TestGuardOnlyThinking: a message that held nothing but removed thinking
// becomes one short text block, as the clearing pass writes it.
func TestGuardOnlyThinking(t *testing.T) {
	s := thinking.NewSignatures(thinking.Defaults(), nil)
	recordAll(s, "anthropic", `"QUFBQQ=="`, `"RERERA=="`, `"QkJCQg=="`)
	body := history("gpt-5", []string{thA, thD}, []string{redB, use1}, []string{thC, text3})
	res := run(t, anthropic.Protocol, s, body, nil)
	want := history("gpt-5", []string{note}, []string{use1}, []string{thC, text3})
	if diff := cmp.Diff(want, string(res.Body)); diff != "" {
		t.Errorf("sent body (-want +got):\n%s", diff)
	}
	if err := validate.Rewrite([]byte(body), res.Body, validateOpts); err != nil {
		t.Error(err)
	}
}

// TestGuardBinding: on a binding model every request asks for drop_block,
// whether or not it removes anything, so the setting never changes
// mid-session.
func TestGuardBinding(t *testing.T) {
	s := thinking.NewSignatures(thinking.Defaults(), nil)
	recordAll(s, "openai", `"QUFBQQ=="`)
	for _, tc := range []struct {
		name, body string
	}{
		{"removing", history("claude-fable-5-1", []string{thA, text1}, []string{redB, use1}, []string{thC, text3})},
		{"keeping", history("claude-fable-5-1", []string{thD, text1}, []string{redB, use1}, []string{thC, text3})},
	} {
		res := run(t, anthropic.Protocol, s, tc.body, &pipeline.Env{Binding: true})
		if !strings.Contains(string(res.Body), `"block_binding":{"prefix_mismatch_behavior":"drop_block"}`) {
			t.Errorf("%s: no drop_block in\n%s", tc.name, res.Body)
		}
		if len(res.Headers) != 1 || res.Headers[0] != [2]string{"Anthropic-Beta", anthropic.BindingBeta} {
			t.Errorf("%s: headers %q", tc.name, res.Headers)
		}
		if err := validate.Rewrite([]byte(tc.body), res.Body, validateOpts); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestGuardExpired: a block whose entry expired is kept (unknown).
func TestGuardExpired(t *testing.T) {
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	s := thinking.NewSignatures(thinking.Config{TTL: 2 * time.Hour, MaxEntries: 100}, func() time.Time { return now })
	recordAll(s, "anthropic", `"QUFBQQ=="`)
	body := history("gpt-5", []string{thA, text1}, []string{use1}, []string{text3})
	now = now.Add(90 * time.Minute)
	if res := run(t, anthropic.Protocol, s, body, nil); !res.Changed {
		t.Fatal("a known block was kept")
	}
	now = now.Add(119 * time.Minute) // the lookup refreshed the entry
	if res := run(t, anthropic.Protocol, s, body, nil); !res.Changed {
		t.Fatal("a block in use expired")
	}
	now = now.Add(2 * time.Hour)
	if res := run(t, anthropic.Protocol, s, body, nil); res.Changed {
		t.Fatal("an expired block was removed")
	}
}

// Responses API pieces: reasoning items carry the token in
// encrypted_content.
const (
	rUser   = `{"type":"message","role":"user","content":[{"type":"input_text","text":"start"}]}`
	rReasA  = `{"type":"reasoning","summary":[],"encrypted_content":"gAAAAA-A"}`
	rReasB  = `{"type":"reasoning","summary":[{"type":"summary_text","text":"b"}],"encrypted_content":"gAAAAA-B"}`
	rReasC  = `{"type":"reasoning","summary":[],"encrypted_content":"gAAAAA-C"}`
	rCall   = `{"type":"function_call","call_id":"call_1","name":"shell","arguments":"{\"cmd\":\"ls\"}"}`
	rOutput = `{"type":"function_call_output","call_id":"call_1","output":"a.go"}`
	rSay    = `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}`
	rUser2  = `{"type":"message","role":"user","content":[{"type":"input_text","text":"go on"}]}`
)

func responsesReq(model string, items ...string) string {
	return `{"model":"` + model + `","stream":true,"store":false,"include":["reasoning.encrypted_content"],"input":[` + strings.Join(items, ",") + `]}`
}

func TestGuardResponses(t *testing.T) {
	orig := []string{rUser, rReasA, rCall, rOutput, rReasB, rSay, rUser2, rReasC, rSay, rUser2}
	for _, tc := range []struct {
		name   string
		model  string
		minted map[string][]string
		want   []string
	}{
		{"gpt to claude", "claude-sonnet-4-5", map[string][]string{"openai": {`"gAAAAA-A"`, `"gAAAAA-B"`, `"gAAAAA-C"`}},
			[]string{rUser, rCall, rOutput, rSay, rUser2, rReasC, rSay, rUser2}},
		{"gpt to gpt", "gpt-5-codex", map[string][]string{"openai": {`"gAAAAA-A"`, `"gAAAAA-B"`, `"gAAAAA-C"`}}, orig},
		{"claude-minted to gpt", "gpt-5", map[string][]string{"anthropic": {`"gAAAAA-B"`}, "openai": {`"gAAAAA-A"`}},
			[]string{rUser, rReasA, rCall, rOutput, rSay, rUser2, rReasC, rSay, rUser2}},
		{"unknown", "claude-sonnet-4-5", nil, orig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := thinking.NewSignatures(thinking.Defaults(), nil)
			for fam, sigs := range tc.minted {
				recordAll(s, fam, sigs...)
			}
			body := responsesReq(tc.model, orig...)
			res := run(t, responses.Protocol, s, body, nil)
			if diff := cmp.Diff(responsesReq(tc.model, tc.want...), string(res.Body)); diff != "" {
				t.Errorf("sent body (-want +got):\n%s", diff)
			}
			if err := responses.ValidateRewrite([]byte(body), res.Body); err != nil {
				t.Error(err)
			}
		})
	}
	// A continued conversation (previous_response_id) is the server's.
	s := thinking.NewSignatures(thinking.Defaults(), nil)
	recordAll(s, "openai", `"gAAAAA-A"`)
	body := `{"model":"claude-sonnet-4-5","previous_response_id":"resp_1","input":[` + strings.Join([]string{rUser, rReasA, rCall, rOutput, rSay, rUser2}, ",") + `]}`
	if res := run(t, responses.Protocol, s, body, nil); res.Changed {
		t.Errorf("a continued conversation was edited:\n%s", res.Body)
	}
}

// TestGuardChat: Chat Completions carries reasoning as text without a
// token; the guard never edits it, whatever the model.
func TestGuardChat(t *testing.T) {
	s := thinking.NewSignatures(thinking.Defaults(), nil)
	recordAll(s, "anthropic", `"plan A"`, `"QUFBQQ=="`)
	body := `{"model":"gpt-5","messages":[{"role":"user","content":"start"},` +
		`{"role":"assistant","content":"first","reasoning_content":"plan A","tool_calls":[{"id":"call_1","type":"function","function":{"name":"shell","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"a.go"},` +
		`{"role":"assistant","content":"done","reasoning_content":"plan B"},{"role":"user","content":"go on"}]}`
	res := run(t, chat.Protocol, s, body, nil)
	if res.Changed || string(res.Body) != body {
		t.Errorf("a Chat request was edited:\n%s", res.Body)
	}
	if err := chat.ValidateRewrite([]byte(body), res.Body); err != nil {
		t.Error(err)
	}
}

// TestGuardWithClear: the guard and the clearing pass in one pipeline, in
// Compile's order, both removing thinking from the same messages: a
// message the guard emptied, or emptied in part, and that a clearing
// event empties too, goes out as one note, and the pipeline never fails
// open on the overlap.
func TestGuardWithClear(t *testing.T) {
	big := strings.Repeat("x", 8000)
	resultBig := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"` + big + `"}]}`
	cc := clearing.Defaults()
	cc.Trigger, cc.KeepTokens, cc.ClearAtLeast, cc.KeepUses, cc.Payback, cc.MinTokens = model.Tokens(100), model.Tokens(0), model.Tokens(10), 0, 0, 0
	cc.CacheMarker = false
	for _, tc := range []struct {
		name string
		a1   []string // the first answer, which both passes empty
	}{
		{"all the guard's", []string{thA, thD}},
		{"half the guard's", []string{thA, thC}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := thinking.NewSignatures(thinking.Defaults(), nil)
			recordAll(s, "anthropic", `"QUFBQQ=="`, `"RERERA=="`)
			recordAll(s, "openai", `"Q0NDQw=="`)
			guard, err := thinking.New(s)
			if err != nil {
				t.Fatal(err)
			}
			cl, err := clearing.New(cc, &store.Blobs{Store: store.NewMemory()})
			if err != nil {
				t.Fatal(err)
			}
			body := messagesReq("gpt-5", u1, asst(tc.a1...), u2, asst(redB, use1), resultBig, asst(text3), u2)
			c, err := anthropic.Protocol.Parse([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			res := pipeline.New(nil, guard, cl).Run(&pipeline.Request{Ctx: context.Background(), Conv: c, Env: &pipeline.Env{Binding: true}})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if len(res.Passes) != 2 || res.Passes[1].Edits == 0 {
				t.Fatalf("the clearing pass made no edit: %+v", res.Passes)
			}
			if !strings.Contains(string(res.Body), `{"role":"assistant","content":[`+note+`]}`) || strings.Count(string(res.Body), "removed earlier reasoning") != 1 {
				t.Errorf("the first answer is not one note:\n%s", res.Body)
			}
			o := validateOpts
			o.AllowInputEdits = true
			if err := validate.Rewrite([]byte(body), res.Body, o); err != nil {
				t.Error(err)
			}
		})
	}
}
