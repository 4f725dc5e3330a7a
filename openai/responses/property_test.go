package responses_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/pass/persist"
)

// randomTurn appends one model turn of a random shape to items, and the
// items answering it: reasoning (or not) before any of an assistant
// message, parallel function calls, a custom tool call, a local shell
// call, a web search; then the outputs. Sometimes the next request adds
// the model's answer and a user message, or a compaction item. It
// returns the input of each request.
func randomTurn(rng *rand.Rand, items []string, turn int, interleave bool) [][]string {
	var calls, outs []string
	out := func() string {
		s := strings.Repeat(fmt.Sprintf("line %d of turn %d\n", rng.IntN(1000), turn), 1+rng.IntN(300))
		if rng.IntN(4) == 0 {
			s = "\x1b[31m" + s + "\x1b[0m"
		}
		return q(s)
	}
	n := 1 + rng.IntN(3)
	for c := range n {
		id := fmt.Sprintf("call_%d_%d", turn, c)
		switch rng.IntN(5) {
		case 0:
			calls = append(calls, `{"type":"custom_tool_call","call_id":"`+id+`","name":"apply_patch","input":`+q(strings.Repeat("+patch line\n", rng.IntN(100)))+`}`)
			outs = append(outs, `{"type":"custom_tool_call_output","call_id":"`+id+`","output":[{"type":"input_text","text":`+out()+`}]}`)
		case 1:
			calls = append(calls, `{"type":"local_shell_call","id":"lsc_`+id+`","call_id":"`+id+`","status":"completed","action":{"type":"exec","command":["ls"]}}`)
			outs = append(outs, `{"type":"local_shell_call_output","call_id":"`+id+`","output":`+out()+`}`)
		default:
			args := q(`{"cmd":` + q(strings.Repeat("echo x; ", rng.IntN(80))) + `}`)
			calls = append(calls, `{"type":"function_call","id":"fc_`+id+`","name":"exec_command","arguments":`+args+`,"call_id":"`+id+`"}`)
			outs = append(outs, `{"type":"function_call_output","call_id":"`+id+`","output":`+out()+`}`)
		}
	}
	if rng.IntN(3) == 0 {
		items = append(items, fmt.Sprintf(`{"type":"reasoning","id":"rs_%d_m","summary":[],"encrypted_content":"gAAAA%d"}`, turn, turn))
		items = append(items, `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Looking."}]}`)
	}
	if rng.IntN(4) == 0 {
		items = append(items, fmt.Sprintf(`{"type":"web_search_call","id":"ws_%d","status":"completed","action":{"type":"search","query":"x"}}`, turn))
	}
	for i, c := range calls {
		if rng.IntN(2) == 0 {
			items = append(items, fmt.Sprintf(`{"type":"reasoning","id":"rs_%d_%d","summary":[],"content":null,"encrypted_content":"gAAAA%d"}`, turn, i, turn))
		}
		items = append(items, c)
	}
	if interleave {
		// Each output right after its call (the reasoning before a call
		// stays before it): a session seen with requests missing, as if
		// every call had been its own turn.
		from := len(items) - len(calls) - reasoned(items, calls)
		var out []string
		k := 0
		for _, it := range items[from:] {
			out = append(out, it)
			if k < len(calls) && it == calls[k] {
				out = append(out, outs[k])
				k++
			}
		}
		items = append(items[:from], out...)
	} else {
		// Codex records the model's items, then the outputs of its calls.
		items = append(items, outs...)
	}
	steps := [][]string{items}
	switch rng.IntN(8) {
	case 0:
		// The next request: the model's answer, and the user's next turn.
		items = append(items[:len(items):len(items)], `{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}`, `{"role":"user","content":"next"}`)
		steps = append(steps, items)
	case 1:
		items = append(items[:len(items):len(items)], fmt.Sprintf(`{"type":"compaction","id":"cmp_%d","encrypted_content":"gAAAAcmp"}`, turn))
		steps = append(steps, items)
	}
	return steps
}

// reasoned counts the reasoning items among the last items, those of the
// calls just added.
func reasoned(items, calls []string) int {
	n, k := 0, len(calls)
	for i := len(items) - 1; i >= 0 && k > 0; i-- {
		if strings.HasPrefix(items[i], `{"type":"reasoning"`) {
			n++
		} else {
			k--
		}
	}
	return n
}

func randomBody(items []string) []byte {
	return []byte(`{"model":"gpt-5.1-codex","stream":true,"input":[` + strings.Join(items, ",") + `],"store":false,"prompt_cache_key":"k"}`)
}

// TestRandomSessions grows random Codex-like sessions through a Guard
// with aggressive settings: every request's rewrite is valid and a
// rewrite ctxguard may make, and between events prefixes are kept.
func TestRandomSessions(t *testing.T) {
	cfg := config.Defaults()
	pass.Update(&cfg.Passes, func(s *clearing.Config) {
		s.Trigger = model.Tokens(3000)
		s.KeepTokens = model.Tokens(1000)
		s.ClearAtLeast = model.Tokens(1000)
		s.KeepUses, s.MinTokens = 1, 5
		s.Trim = clearing.Trim{Enabled: true, KeepRounds: 2}
	})
	pass.Update(&cfg.Passes, func(s *persist.Config) { s.Threshold, s.Preview = 4000, 500 })
	sessions := 40
	if testing.Short() {
		sessions = 5
	}
	for s := range sessions {
		rng := rand.New(rand.NewPCG(uint64(s), 7))
		g := newGuard(t, cfg)
		h := http.Header{"Session-Id": {fmt.Sprint("s", s)}}
		items := []string{`{"type":"message","role":"developer","content":"be careful"}`, `{"role":"user","content":"go"}`}
		var prevOut []byte
		changed, events := 0, 0
		for turn := range 25 {
			interleave := s%4 == 3
			steps := randomTurn(rng, items, turn, interleave)
			for _, st := range steps {
				body := randomBody(st)
				t.Run(fmt.Sprintf("s%d/t%d", s, turn), func(t *testing.T) {
					if interleave {
						prevOut = nil // requests are missing: no prefix to keep
					}
					prevOut = rewriteNext(t, g, h, body, prevOut, &changed, &events)
				})
				if t.Failed() {
					return
				}
			}
			items = steps[len(steps)-1]
		}
		if changed == 0 {
			t.Errorf("session %d: nothing changed", s)
		}
	}
}

// q quotes s as a JSON string.
func q(s string) string { return string(jsonscan.AppendQuote(nil, s)) }
