package responses_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/pass/persist"
	"github.com/ctxguard/ctxguard/store"
)

func newGuard(t *testing.T, cfg config.Config) *ctxguard.Guard {
	t.Helper()
	cfg.DataDir = t.TempDir()
	g, err := ctxguard.New(cfg, ctxguard.WithStore(store.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestGuardSession replays a growing Codex session through a Guard (the
// session memory, incremental parsing and every pass on), as Codex sends
// it: each request repeats the last and adds a round. Every rewrite is
// valid, and between edit events the rewritten request starts with the
// previous rewritten input, so the upstream's prompt cache holds.
func TestGuardSession(t *testing.T) {
	cfg := config.Defaults()
	pass.Update(&cfg.Passes, func(s *clearing.Config) {
		s.Trigger = model.Tokens(6000)
		s.KeepTokens = model.Tokens(2000)
		s.ClearAtLeast = model.Tokens(3000)
		s.Trim = clearing.Trim{Enabled: true, KeepRounds: 3}
	})
	pass.Update(&cfg.Passes, func(s *persist.Config) { s.Threshold, s.Preview = 8000, 1000 })
	g := newGuard(t, cfg)
	h := http.Header{"Session-Id": {"thread-1"}}
	var rounds []Round
	var prevOut []byte
	events, changed := 0, 0
	for i := range 40 {
		r := Round{Reasoning: i%3 == 0, Output: fmt.Sprintf("\x1b[32mrun %d\x1b[0m\n", i) + strings.Repeat("ok  \tgithub.com/x/y\t0.01s\n", 40*(1+i%4))}
		if i%5 == 4 {
			r.Kind, r.Args = "custom", "*** Begin Patch\n"+strings.Repeat("+x\n", 100)
		}
		if i%7 == 6 {
			r.Text = "done"
		}
		if i == 20 {
			r.Output = strings.Repeat("a long log line\n", 1000)
		}
		rounds = append(rounds, r)
		bodies := [][]byte{responses.Session(rounds)}
		if r.Text != "" {
			// The request that produced the text came first: the
			// round without it.
			r.Text = ""
			bodies = append([][]byte{responses.Session(append(rounds[:i:i], r))}, bodies...)
		}
		for _, body := range bodies {
			prevOut = rewriteNext(t, g, h, body, prevOut, &changed, &events)
		}
	}
	if changed == 0 || events == 0 || events > 10 {
		t.Errorf("%d requests changed, %d events", changed, events)
	}
}

// rewriteNext rewrites the next request of a session and checks it
// against the previous rewritten one, prevOut; it returns the rewrite and
// counts it in changed and events.
func rewriteNext(t *testing.T, g *ctxguard.Guard, h http.Header, body, prevOut []byte, changed, events *int) []byte {
	t.Helper()
	res := g.RewriteBody(context.Background(), responses.Protocol, h, body)
	if res.Err != nil || res.Skipped != "" {
		t.Fatalf("err %v, skipped %q", res.Err, res.Skipped)
	}
	out := bytes.Clone(res.Body)
	if err := responses.ValidateRewrite(body, out); err != nil {
		t.Fatal(err)
	}
	if res.Changed {
		*changed++
	}
	if res.Event {
		*events++
		return out
	}
	if prevOut == nil {
		return out
	}
	c, err := responses.Parse(prevOut)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	end := c.Messages[len(c.Messages)-1].Span.End
	if !bytes.HasPrefix(out, prevOut[:end]) {
		n := commonPrefix(out, prevOut[:end])
		t.Errorf("no event, yet the previous input is not a prefix: at %d\nprev %s\nnow  %s",
			n, prevOut[max(0, n-200):min(end, n+300)], out[max(0, n-200):min(len(out), n+300)])
	}
	return out
}

// commonPrefix is the length of the common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// TestGuardCaptures: the real Codex requests through a Guard with
// every rule off go out byte for byte; with the defaults they stay valid.
func TestGuardCaptures(t *testing.T) {
	off := config.Defaults()
	for _, m := range pass.Modules() {
		off.Passes.Switch(m.Name, false)
	}
	for _, cfg := range []config.Config{off, config.Defaults()} {
		g := newGuard(t, cfg)
		for _, name := range []string{"codex-http-multiturn-0003", "codex-http-multiturn-0004", "codex-http-multiturn-0005", "codex-http-multiturn-0006",
			"codex-openai-compact-0003", "codex-openai-compact-0004", "codex-openai-compact-0010", "codex-custom-known-model-0006"} {
			body := capture(t, name)
			res := g.RewriteBody(context.Background(), responses.Protocol, http.Header{"Session-Id": {name[:12]}}, body)
			if res.Err != nil || res.Skipped != "" {
				t.Fatalf("%s: err %v, skipped %q", name, res.Err, res.Skipped)
			}
			if !pass.Get[clearing.Config](cfg.Passes).Enabled && !bytes.Equal(res.Body, body) {
				t.Errorf("%s: changed with every rule off", name)
			}
			if err := responses.ValidateRewrite(body, res.Body); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

// TestGuardFailOpen: bodies that are not Responses requests are
// forwarded untouched.
func TestGuardFailOpen(t *testing.T) {
	g := newGuard(t, config.Defaults())
	for _, b := range []string{`{"input":`, `{"model":"gpt-5"}`, `[]`, `{"input":[1]}`, `not json`} {
		res := g.RewriteBody(context.Background(), responses.Protocol, nil, []byte(b))
		if string(res.Body) != b || res.Changed || res.Skipped == "" {
			t.Errorf("%s: %+v", b, res)
		}
	}
}
