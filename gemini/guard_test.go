package gemini_test

import (
	"bytes"
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

// The thinking guard on a Gemini session whose model changes family (a
// gateway that serves Claude models on the Gemini API, then a Gemini
// model): the calls the Claude model made keep their place, and their
// signatures become the API's skip value, the latest turn's included
// (Gemini 3 checks the current turn); the Gemini model's own
// signatures stay. Back on Claude, the Gemini signatures go.
func TestGuardSignatureFamilies(t *testing.T) {
	g := newGuard(t, config.Defaults(), t.TempDir())
	ctx := context.Background()
	at := func(model string) protocol.Protocol {
		return gemini.Protocol.(protocol.PathBound).ForPath("/v1beta/models/" + model + ":streamGenerateContent")
	}
	user := `{"role":"user","parts":[{"text":"fix the build"}]}`
	call := func(sig, id string) string {
		return `{"role":"model","parts":[{"text":"plan","thought":true,"thoughtSignature":"` + sig + `-t"},{"functionCall":{"name":"sh","args":{"c":"make"},"id":"` + id + `"},"thoughtSignature":"` + sig + `"}]}`
	}
	resp := func(id string) string {
		return `{"role":"user","parts":[{"functionResponse":{"name":"sh","response":{"output":"ok"},"id":"` + id + `"}}]}`
	}
	req := func(contents ...string) []byte {
		return []byte(`{"contents":[` + strings.Join(contents, ",") + `],"systemInstruction":{"parts":[{"text":"sys"}]}}`)
	}
	// 1: Claude (through a gateway) answers with a signed call.
	r1 := req(user)
	if res := g.RewriteBody(ctx, at("claude-sonnet-4-5"), nil, r1); res.Changed {
		t.Fatalf("request 1 changed: %s", res.Body)
	}
	// 2: the session goes on with Gemini; the Claude call is the latest
	// model turn.
	r2 := req(user, call("Q0xBVURF", "c1"), resp("c1"))
	res := g.RewriteBody(ctx, at("gemini-3-pro-preview"), nil, r2)
	want := req(user, `{"role":"model","parts":[{"text":"plan","thought":true,"thoughtSignature":"Q0xBVURF-t"},{"functionCall":{"name":"sh","args":{"c":"make"},"id":"c1"},"thoughtSignature":"skip_thought_signature_validator"}]}`, resp("c1"))
	if string(res.Body) != string(want) {
		t.Fatalf("request 2:\n got %s\nwant %s", res.Body, want)
	}
	if err := gemini.Validate(res.Body); err != nil {
		t.Error(err)
	}
	// 3: Gemini answered with its own signed call; the Claude turn is
	// now history: its thought goes, its call is unsigned; Gemini's stay.
	r3 := req(user, call("Q0xBVURF", "c1"), resp("c1"), call("R0VNSU5J", "c2"), resp("c2"))
	res = g.RewriteBody(ctx, at("gemini-3-pro-preview"), nil, r3)
	want = req(user, `{"role":"model","parts":[{"functionCall":{"name":"sh","args":{"c":"make"},"id":"c1"},"thoughtSignature":"skip_thought_signature_validator"}]}`, resp("c1"), call("R0VNSU5J", "c2"), resp("c2"))
	if string(res.Body) != string(want) {
		t.Fatalf("request 3:\n got %s\nwant %s", res.Body, want)
	}
	// 4: back on Claude: the Gemini signature goes (the member removed),
	// and so does the Claude-era skip value.
	r4 := req(user, call("Q0xBVURF", "c1"), resp("c1"), call("R0VNSU5J", "c2"), resp("c2"), call("Q0xBVURFMg==", "c3"), resp("c3"))
	res = g.RewriteBody(ctx, at("claude-sonnet-4-5"), nil, r4)
	if strings.Contains(string(res.Body), `R0VNSU5J"`) || !strings.Contains(string(res.Body), `"thoughtSignature":"Q0xBVURF"`) || !strings.Contains(string(res.Body), `"id":"c2"}}`) {
		t.Errorf("request 4: %s", res.Body)
	}
}

// A request that continues cached content (cachedContent: the server
// holds a prefix the body does not carry) gets the per-result rules
// only: a result is compressed, nothing is cleared or compacted however
// big the history.
func TestGuardCachedContent(t *testing.T) {
	g := newGuard(t, config.Defaults(), t.TempDir())
	body := session(40)
	ansi := strings.Repeat(`\u001b[32mok\u001b[0m line of test output\n`, 400)
	body = bytes.Replace(body, []byte(`"output":"PASS test_39_line`), []byte(`"output":"`+ansi+`PASS test_39_line`), 1)
	cached := bytes.Replace(body, []byte(`"generationConfig"`), []byte(`"cachedContent":"cachedContents/abc123","generationConfig"`), 1)
	res := g.RewriteBody(context.Background(), pro, nil, cached)
	if !res.Changed || strings.Contains(string(res.Body), `\u001b[32m`) {
		t.Fatalf("the result was not compressed (passes %v)", res.Passes)
	}
	if strings.Contains(string(res.Body), "ctxguard cleared") || strings.Contains(string(res.Body), "ctxguard compacted") || res.Event {
		t.Errorf("a continued request's history was edited")
	}
	if err := gemini.ValidateRewrite(cached, res.Body); err != nil {
		t.Error(err)
	}
	// The same history without cachedContent is cleared.
	if res := g.RewriteBody(context.Background(), pro, nil, body); !strings.Contains(string(res.Body), "ctxguard clear") {
		t.Errorf("the history was not cleared without cachedContent (passes %v)", res.Passes)
	}
}
