package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/guardtest"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/store"
)

// switchSession is a session through a gateway that speaks the Messages
// API for every model: turns 0-1 answered by models[0], 2-3 by models[1].
func switchSession(models [2]string) [][]byte {
	var msgs []string
	msgs = append(msgs, `{"role":"user","content":"start"}`)
	var out [][]byte
	for k := range 4 {
		m := models[k/2]
		out = append(out, []byte(`{"model":"`+m+`","max_tokens":100,"messages":[`+strings.Join(msgs, ",")+`]}`))
		sig := []string{"U0lHQQ==", "U0lHQg==", "U0lHQw==", "U0lHRA=="}[k]
		msgs = append(msgs, `{"role":"assistant","content":[{"type":"thinking","thinking":"step `+sig+`","signature":"`+sig+`"},{"type":"text","text":"answer"}]}`,
			`{"role":"user","content":"go on"}`)
	}
	return out
}

// TestThinkingGuard: after a switch to another family, the thinking the
// first family minted goes from the history (never from the latest
// assistant message); within one family, and for blocks of unknown
// origin, nothing goes.
func TestThinkingGuard(t *testing.T) {
	cfg := config.Defaults()
	for _, tc := range []struct {
		name   string
		models [2]string
		want   []int // thinking blocks left in each request's sent body
	}{
		{"claude to gpt", [2]string{"claude-sonnet-4-5", "gpt-5"}, []int{0, 1, 1, 1}},
		{"claude to claude", [2]string{"claude-sonnet-4-5", "claude-opus-4-5"}, []int{0, 1, 2, 3}},
		{"gpt to claude", [2]string{"gpt-5", "claude-sonnet-4-5"}, []int{0, 1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newEngine(t, cfg, withStore(store.NewMemory()))
			for i, b := range switchSession(tc.models) {
				res := g.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(3), b)
				if res.Err != nil {
					t.Fatal(res.Err)
				}
				if err := validRewrite(anthropic.Protocol, cfg, b, res.Body); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if got := strings.Count(string(res.Body), `"type":"thinking"`); got != tc.want[i] {
					t.Errorf("request %d: %d thinking blocks sent, want %d", i, got, tc.want[i])
				}
			}
			// A fresh Guard knows no signature: it keeps every block.
			last := switchSession(tc.models)[3]
			fresh := newEngine(t, cfg, withStore(store.NewMemory())).RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(3), last)
			if got := strings.Count(string(fresh.Body), `"type":"thinking"`); got != 3 {
				t.Errorf("a fresh Guard sent %d thinking blocks, want all 3", got)
			}
		})
	}
}

// TestThinkingGuardResponses: the same through the Responses API, whose
// reasoning items carry the token in encrypted_content: after a switch
// from GPT to Claude (a gateway), the reasoning items GPT minted go from
// the history, never from the latest answer.
func TestThinkingGuardResponses(t *testing.T) {
	cfg := config.Defaults()
	g := newEngine(t, cfg, withStore(store.NewMemory()))
	models := []string{"gpt-5", "gpt-5", "claude-sonnet-4-5", "claude-sonnet-4-5"}
	items := []string{`{"type":"message","role":"user","content":[{"type":"input_text","text":"start"}]}`}
	want := []int{0, 1, 1, 1} // reasoning items sent in each request
	for k, m := range models {
		body := []byte(`{"model":"` + m + `","stream":true,"store":false,"input":[` + strings.Join(items, ",") + `]}`)
		res := g.RewriteBody(context.Background(), responses.Protocol, guardtest.SessionHeader(4), body)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if err := validRewrite(responses.Protocol, cfg, body, res.Body); err != nil {
			t.Fatalf("request %d: %v", k, err)
		}
		if got := strings.Count(string(res.Body), `"type":"reasoning"`); got != want[k] {
			t.Errorf("request %d: %d reasoning items sent, want %d:\n%s", k, got, want[k], res.Body)
		}
		items = append(items,
			`{"type":"reasoning","summary":[],"encrypted_content":"gAAAA-`+string(rune('A'+k))+`"}`,
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer"}]}`,
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"go on"}]}`)
	}
}

// TestExtendsPrev: a request continues its session's previous one only
// when it repeats its messages; a previous request of one message (a
// subagent's first, under the session's header) is continued only by a
// request that starts as it did, re-encoded or not.
func TestExtendsPrev(t *testing.T) {
	body := func(system, first string, more ...string) *conversation.Conversation {
		msgs := []string{first}
		msgs = append(msgs, more...)
		c, err := anthropic.Parse([]byte(`{"model":"m","system":"` + system + `","messages":[` + strings.Join(msgs, ",") + `]}`))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const (
		u1     = `{"role":"user","content":"list the files"}`
		u1list = `{"role":"user","content":[{"type":"text","text":"list the files"}]}`
		u2     = `{"role":"user","content":"something else"}`
		a1     = `{"role":"assistant","content":[{"type":"text","text":"ok"}]}`
		u3     = `{"role":"user","content":"next"}`
	)
	for _, tc := range []struct {
		name       string
		prev, next *conversation.Conversation
		want       bool
	}{
		{"one message, continued", body("s", u1), body("s", u1, a1, u3), true},
		{"one message, re-encoded", body("s", u1), body("s", u1list, a1, u3), true},
		{"one message, another session", body("s", u1), body("s", u2, a1, u3), false},
		{"one message, another system prompt", body("s", u1), body("t", u1, a1, u3), false},
		{"longer, continued", body("s", u1, a1, u3), body("s", u1, a1, u3, a1, u3), true},
		{"longer, another first message", body("s", u1, a1, u3), body("s", u2, a1, u3, a1, u3), false},
		{"longer, the last re-encoded", body("s", u1, a1, u3), body("s", u1, a1, `{"role":"user","content":[{"type":"text","text":"next","cache_control":{"type":"ephemeral"}}]}`, a1, u3), true},
		{"longer, another last message", body("s", u1, a1, u3), body("s", u1, a1, u2, a1, u3), false},
		{"longer, another system prompt", body("s", u1, a1, u3), body("t", u1, a1, u3, a1, u3), false},
		{"not longer", body("s", u1, a1, u3), body("s", u1, a1, u3), false},
	} {
		// The memo keeps the previous parse without its body, and its fingerprint.
		var p fingerprint
		p.fill(tc.prev, 0)
		tc.prev.Body = nil
		if got := extendsPrev(tc.prev, &p, tc.next, 0); got != tc.want { // 0: compare, as when offsets moved
			t.Errorf("%s: extendsPrev = %v, want %v", tc.name, got, tc.want)
		}
	}
}
