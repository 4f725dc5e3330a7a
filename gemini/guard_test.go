package gemini_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/gemini"
	"github.com/ctxguard/ctxguard/internal/guardtest"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/pass/persist"
	"github.com/ctxguard/ctxguard/protocol"
)

// newGuard returns a Guard keeping its blobs in dir (the stubs name it).
func newGuard(t *testing.T, cfg config.Config, dir string) *ctxguard.Guard {
	t.Helper()
	cfg.DataDir = dir
	cfg.Upstreams = config.AllUpstreams("http://127.0.0.1:1")
	g, err := ctxguard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

var pro = gemini.Protocol.(protocol.PathBound).ForPath("/v1beta/models/gemini-2.5-pro:streamGenerateContent")

// A session's requests through the Guard, as the proxy rewrites them:
// with every rule off the bytes are the client's; every rewrite is valid
// and allowed (ValidateRewrite: a kept part keeps its thoughtSignature);
// between edit events request N+1 starts with the rewritten request N's
// contents; a fresh Guard on the same data dir (a restart) rewrites
// every request to the same bytes; and what was cleared stays cleared.
func TestGuardSession(t *testing.T) {
	var reqs [][]byte
	for n := 1; n <= 24; n++ {
		reqs = append(reqs, session(n))
	}
	ctx := context.Background()
	g := newGuard(t, guardtest.AllOff(), t.TempDir())
	for k, body := range reqs {
		if res := g.RewriteBody(ctx, pro, nil, body); res.Changed || string(res.Body) != string(body) || res.Err != nil {
			t.Fatalf("request %d changed with every rule off (%v)", k, res.Err)
		}
	}
	for _, trim := range []bool{false, true} {
		t.Run(fmt.Sprintf("trim=%v", trim), func(t *testing.T) { guardSession(t, reqs, trim) })
	}
}

func guardSession(t *testing.T, reqs [][]byte, trim bool) {
	ctx := context.Background()
	cfg := config.Defaults()
	pass.Update(&cfg.Passes, func(s *clearing.Config) {
		s.Trigger, s.KeepTokens, s.ClearAtLeast = model.Tokens(20000), model.Tokens(8000), model.Tokens(8000)
		s.Payback = 0
		s.Trim = clearing.Trim{Enabled: trim, KeepRounds: 2}
	})
	pass.Update(&cfg.Passes, func(s *persist.Config) { s.Threshold, s.Preview = 30000, 500 })
	dir := t.TempDir()
	live := newGuard(t, cfg, dir)
	var prev []byte
	events, changed := 0, 0
	stubs := map[string]bool{} // call ids whose response was a stub
	for k, body := range reqs {
		res := live.RewriteBody(ctx, pro, nil, body)
		if res.Err != nil || res.Skipped != "" {
			t.Fatalf("request %d: err %v, skipped %q", k, res.Err, res.Skipped)
		}
		if err := gemini.ValidateRewrite(body, res.Body); err != nil {
			t.Fatalf("request %d: rewrite not allowed: %v", k, err)
		}
		if res.Event {
			events++
		} else if prev != nil {
			c, err := gemini.Parse(prev)
			if err != nil {
				t.Fatal(err)
			}
			last := c.Messages[len(c.Messages)-1].Span.Start
			if n := jsonscan.CommonPrefix(prev, res.Body); n < last {
				t.Errorf("request %d: no event, but it shares only %d bytes of the previous rewrite (its contents before the last reach %d)", k, n, last)
			}
			c.Release()
		}
		if res.Changed {
			changed++
		}
		now := stubbed(t, res.Body)
		for id := range stubs {
			if !now[id] && present(t, res.Body, id) {
				t.Errorf("request %d: the response of %s was cleared before and is back", k, id)
			}
		}
		stubs = now
		fresh := newGuard(t, cfg, dir).RewriteBody(ctx, pro, nil, body)
		if string(fresh.Body) != string(res.Body) {
			n := jsonscan.CommonPrefix(fresh.Body, res.Body)
			t.Errorf("request %d: a fresh Guard rewrites it otherwise: %.200s\nvs %.200s", k, fresh.Body[n:], res.Body[n:])
		}
		prev = res.Body
	}
	if changed == 0 || (!trim && len(stubs) == 0) {
		t.Errorf("%d rewritten requests, %d responses stubbed at the end", changed, len(stubs))
	}
	t.Logf("%d requests, %d rewritten, %d events; last %d → %d bytes", len(reqs), changed, events, len(reqs[len(reqs)-1]), len(prev))
}

// stubbed returns the ids of the function responses of body whose
// response value ctxguard replaced (a stub or a preview naming a blob).
func stubbed(t *testing.T, body []byte) map[string]bool {
	c, err := gemini.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	out := map[string]bool{}
	for _, m := range c.Messages {
		for _, b := range m.Blocks {
			if b.Kind == conversation.ToolResult && jsonscan.KindOf(c.Body, b.Content) == jsonscan.String &&
				len(c.String(b.Content)) < 3000 && strings.Contains(c.String(b.Content), "ctxguard") {
				out[c.String(b.ID)] = true
			}
		}
	}
	return out
}

// present reports whether body still holds a response of call id (a
// dropped round holds none).
func present(t *testing.T, body []byte, id string) bool {
	return strings.Contains(string(body), `"id":"`+id+`"}}`)
}

// Bodies the adapter does not understand go upstream untouched, with the
// reason; nothing panics.
func TestGuardFailOpen(t *testing.T) {
	g := newGuard(t, config.Defaults(), t.TempDir())
	for _, tc := range []struct{ body, skipped string }{
		{`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]`, "invalid json"},
		{`{"model":"m","messages":[{"role":"user","content":"a Chat body"}]}`, "not a messages request"},
		{`{"contents":[{"role":"user","parts":"text"}]}`, "not a messages request"},
		{`[]`, "not a messages request"},
		{``, "invalid json"},
	} {
		res := g.RewriteBody(context.Background(), pro, http.Header{}, []byte(tc.body))
		if res.Changed || string(res.Body) != tc.body || res.Skipped != tc.skipped {
			t.Errorf("%s: changed %v, skipped %q, want %q", tc.body, res.Changed, res.Skipped, tc.skipped)
		}
	}
}
