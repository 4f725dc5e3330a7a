package chat_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/ctxguard/ctxguard"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/pass/persist"
)

// newGuard returns a Guard keeping its blobs in dir (the stubs name it).
func newGuard(t *testing.T, cfg config.Config, dir string) *ctxguard.Guard {
	t.Helper()
	cfg.DataDir = dir
	g, err := ctxguard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// A session's requests through the Guard, as the proxy rewrites them:
// every rewrite is valid and allowed; with every rule off the bytes are
// the client's; between edit events request N+1 starts with the rewritten
// request N's messages; and a fresh Guard on the same data dir (a restart) rewrites every
// request to the same bytes.
func TestGuardSession(t *testing.T) {
	reqs := chat.SessionRequests(24)
	h := http.Header{"X-Session-Id": {"ses_test"}}
	ctx := context.Background()

	off := config.Defaults()
	for _, m := range pass.Modules() {
		off.Passes.Switch(m.Name, false)
	}
	g := newGuard(t, off, t.TempDir())
	for k, body := range reqs {
		if res := g.RewriteBody(ctx, chat.Protocol, h, body); res.Changed || string(res.Body) != string(body) || res.Err != nil {
			t.Fatalf("request %d changed with every rule off (%v)", k, res.Err)
		}
	}

	for _, trim := range []bool{false, true} {
		t.Run(fmt.Sprintf("trim=%v", trim), func(t *testing.T) { guardSession(t, reqs, h, trim) })
	}
}

func guardSession(t *testing.T, reqs [][]byte, h http.Header, trim bool) {
	ctx := context.Background()
	cfg := config.Defaults()
	pass.Update(&cfg.Passes, func(s *clearing.Config) {
		s.Trigger, s.KeepTokens, s.ClearAtLeast = model.Tokens(8000), model.Tokens(2000), model.Tokens(4000)
		s.Payback = 0
		s.Trim = clearing.Trim{Enabled: trim, KeepRounds: 2}
	})
	pass.Update(&cfg.Passes, func(s *persist.Config) { s.Threshold, s.Preview = 2000, 200 })
	dir := t.TempDir()
	live := newGuard(t, cfg, dir)
	var prev []byte
	events, changed := 0, 0
	for k, body := range reqs {
		res := live.RewriteBody(ctx, chat.Protocol, h, body)
		if res.Err != nil || res.Skipped != "" {
			t.Fatalf("request %d: err %v, skipped %q", k, res.Err, res.Skipped)
		}
		if err := chat.Validate(res.Body); err != nil {
			t.Fatalf("request %d: invalid rewrite: %v", k, err)
		}
		if err := chat.ValidateRewrite(body, res.Body); err != nil {
			t.Fatalf("request %d: rewrite not allowed: %v\n%.3000s", k, err, res.Body)
		}
		if res.Event {
			events++
		} else if prev != nil {
			c, err := chat.Parse(prev)
			if err != nil {
				t.Fatal(err)
			}
			// The previous request's messages, all but its last (the
			// tool run this request may go on with... or not).
			last := c.Messages[len(c.Messages)-1].Span.Start
			if n := jsonscan.CommonPrefix(prev, res.Body); n < last {
				t.Errorf("request %d: no event, but it shares only %d bytes of the previous rewrite (its messages before the last reach %d)", k, n, last)
			}
		}
		if res.Changed {
			changed++
		}
		fresh := newGuard(t, cfg, dir).RewriteBody(ctx, chat.Protocol, h, body)
		if string(fresh.Body) != string(res.Body) {
			n := jsonscan.CommonPrefix(fresh.Body, res.Body)
			t.Errorf("request %d: a fresh Guard rewrites it otherwise: %.200s\nvs %.200s", k, fresh.Body[n:], res.Body[n:])
		}
		prev = res.Body
	}
	if events == 0 || changed == 0 {
		t.Errorf("%d events, %d rewritten requests", events, changed)
	}
	t.Logf("%d requests, %d rewritten, %d events; last %d → %d bytes", len(reqs), changed, events, len(reqs[len(reqs)-1]), len(prev))
}

// Bodies the adapter does not understand go upstream untouched, with the
// reason; nothing panics.
func TestGuardFailOpen(t *testing.T) {
	g := newGuard(t, config.Defaults(), t.TempDir())
	for _, tc := range []struct{ body, skipped string }{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}`, "invalid json"},
		{`{"model":"m","input":[{"role":"user","content":"a Responses body"}]}`, "not a messages request"},
		{`{"model":"m","messages":[{"role":"user","content":"a","content":"b"}]}`, "not a messages request"},
		{`[]`, "not a messages request"},
		{``, "invalid json"},
	} {
		res := g.RewriteBody(context.Background(), chat.Protocol, nil, []byte(tc.body))
		if res.Changed || string(res.Body) != tc.body || res.Skipped != tc.skipped {
			t.Errorf("%s: changed %v, skipped %q, want %q", tc.body, res.Changed, res.Skipped, tc.skipped)
		}
	}
}
