package ctxguard

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/guardtest"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
)

// bindingBody is a short request to a model that binds thinking blocks,
// with thinking on: nothing in it is old enough to remove, and the
// thinking guard adds the drop_block setting.
func bindingBody(tail string) []byte {
	return []byte(`{"model":"claude-opus-5-5","max_tokens":1024,"thinking":{"type":"adaptive"},"stream":true,` +
		`"system":"You are a coding agent.","messages":[{"role":"user","content":"Fix the bug."}` + tail + `]}`)
}

// TestTokensAdded: what a rule adds on purpose (the thinking binding's
// setting) is the record's TokensAdded, never a negative saving: a request
// the rules took nothing from saves exactly 0; one they shortened saves
// what they took out, the setting apart.
func TestTokensAdded(t *testing.T) {
	var rec guardtest.Recorder
	g := newGuard(t, config.Defaults())
	g.Records().Subscribe(&rec)

	short := bindingBody("")
	res := g.RewriteBody(context.Background(), anthropic.Protocol, nil, short)
	if !res.Changed || !bytes.Contains(res.Body, []byte(`"prefix_mismatch_behavior":"drop_block"`)) {
		t.Fatalf("the binding setting was not added: changed %v\n%s", res.Changed, res.Body)
	}
	x := rec.All()[0]
	if x.TokensAdded <= 0 || x.TokensAfter != x.TokensBefore+x.TokensAdded || x.Saved() != 0 {
		t.Errorf("short request: %d→%d tokens, %d added, saved %d; want the growth all added on purpose and 0 saved",
			x.TokensBefore, x.TokensAfter, x.TokensAdded, x.Saved())
	}
	for _, p := range x.Passes {
		if (p.Name == "thinking") != (p.Added > 0) || p.Saved != 0 {
			t.Errorf("passes %+v: the thinking pass's setting must be counted as added bytes, not as a negative saving", x.Passes)
		}
	}

	// A long tool result compression shortens, on the same model.
	big := guardtest.BigResult()
	big = bytes.Replace(big, []byte(`"model":"claude-sonnet-4-5"`), []byte(`"model":"claude-opus-5-5","thinking":{"type":"adaptive"}`), 1)
	g.RewriteBody(context.Background(), anthropic.Protocol, nil, big)
	x = rec.All()[1]
	if x.TokensAdded <= 0 || x.TokensAdded > 40 || x.Saved() != x.TokensBefore-x.TokensAfter+x.TokensAdded || x.Saved() <= x.TokensBefore-x.TokensAfter {
		t.Errorf("long request: %d→%d tokens, %d added, saved %d", x.TokensBefore, x.TokensAfter, x.TokensAdded, x.Saved())
	}
}

// TestDryRunHeaders: in a dry run the client's body goes upstream as it
// came, and the answer's headers say what would have been sent:
// X-Ctxguard-Dry-Run: 1 and X-Ctxguard-Tokens-After the size the rewrite
// would have had (what the same request without dry run reports). The
// record keeps both.
func TestDryRunHeaders(t *testing.T) {
	send := func(dry bool) (http.Header, *record.Exchange, []byte) {
		cfg := config.Defaults()
		cfg.DryRun = dry
		g, srv, up := serveGuard(t, cfg)
		var rec guardtest.Recorder
		g.Records().Subscribe(&rec)
		req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", bytes.NewReader(guardtest.BigResult()))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		got := up.MessagesRequests()
		if res.StatusCode != 200 || len(got) != 1 {
			t.Fatalf("status %d, %d requests upstream", res.StatusCode, len(got))
		}
		return res.Header, waitRecords(t, &rec, 1)[0], got[0].Decoded
	}
	live, _, liveBody := send(false)
	dry, x, dryBody := send(true)
	if live.Get("X-Ctxguard-Dry-Run") != "" {
		t.Errorf("a live request says X-Ctxguard-Dry-Run: %q", live.Get("X-Ctxguard-Dry-Run"))
	}
	before, after := dry.Get("X-Ctxguard-Tokens-Before"), dry.Get("X-Ctxguard-Tokens-After")
	if dry.Get("X-Ctxguard-Dry-Run") != "1" || after != live.Get("X-Ctxguard-Tokens-After") || after == before || before != live.Get("X-Ctxguard-Tokens-Before") {
		t.Errorf("dry run headers: Dry-Run %q, tokens %s→%s; the live request: %s→%s",
			dry.Get("X-Ctxguard-Dry-Run"), before, after, live.Get("X-Ctxguard-Tokens-Before"), live.Get("X-Ctxguard-Tokens-After"))
	}
	if dry.Get("X-Ctxguard-Passes") != live.Get("X-Ctxguard-Passes") || dry.Get("X-Ctxguard-Skipped") != "dry run" {
		t.Errorf("dry run passes %q skipped %q; live passes %q", dry.Get("X-Ctxguard-Passes"), dry.Get("X-Ctxguard-Skipped"), live.Get("X-Ctxguard-Passes"))
	}
	if !bytes.Equal(dryBody, guardtest.BigResult()) || bytes.Equal(liveBody, guardtest.BigResult()) {
		t.Errorf("the dry run must send the client's body, the live request a rewritten one")
	}
	would, _ := strconv.Atoi(after)
	if !x.DryRun() || x.TokensAfter != x.TokensBefore || x.WouldSend != would || x.Saved() != 0 || x.WouldSave() <= 0 || x.Outcome != record.Unchanged {
		t.Errorf("dry run record: %s %q, %d→%d tokens, would send %d (header %d), saved %d, would save %d",
			x.Outcome, x.Skipped, x.TokensBefore, x.TokensAfter, x.WouldSend, would, x.Saved(), x.WouldSave())
	}
}

// waitRecords waits for n records (published once the client has the
// whole answer).
func waitRecords(t *testing.T, r *guardtest.Recorder, n int) []*record.Exchange {
	t.Helper()
	for range 500 {
		if recs := r.All(); len(recs) >= n {
			return recs
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d records, want %d", len(r.All()), n)
	return nil
}

// TestSessionPerProtocol: requests of three protocols with the same
// session header, or the same system prompt and first message, are three
// sessions.
func TestSessionPerProtocol(t *testing.T) {
	g := newGuard(t, config.Defaults())
	bodies := []struct {
		proto protocol.Protocol
		body  string
	}{
		{anthropic.Protocol, `{"model":"m","system":"be brief","messages":[{"role":"user","content":"hello"}]}`},
		{chat.Protocol, `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello"}]}`},
		{responses.Protocol, `{"model":"m","instructions":"be brief","input":[{"role":"user","content":"hello"}]}`},
	}
	for _, h := range []http.Header{{"X-Session-Id": {"shared"}}, nil} {
		seen := map[string]string{}
		for _, b := range bodies {
			res := g.RewriteBody(context.Background(), b.proto, h, []byte(b.body))
			if res.Session == "" || !strings.HasPrefix(res.Session, b.proto.Name()+":") {
				t.Errorf("%s: session %q", b.proto.Name(), res.Session)
			}
			if other, ok := seen[res.Session]; ok {
				t.Errorf("%s and %s requests share the session %q", other, b.proto.Name(), res.Session)
			}
			seen[res.Session] = b.proto.Name()
		}
	}
}

// TestDashboardTodayRestart: the dashboard's totals of today go through
// the Guard's store: a Guard started again on the same data directory
// shows them.
func TestDashboardTodayRestart(t *testing.T) {
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	overview := func(g *Guard) (o struct {
		Today struct {
			Requests int `json:"requests"`
			Saved    int `json:"tokens_saved"`
		} `json:"today"`
	}) {
		r := httptest.NewRequest("GET", "/ctxguard/api/overview", nil)
		r.RemoteAddr, r.Host = "127.0.0.1:1", "127.0.0.1"
		w := httptest.NewRecorder()
		g.Local().ServeHTTP(w, r)
		if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &o) != nil {
			t.Fatalf("overview: %d %s", w.Code, w.Body)
		}
		return o
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g.Local() // the dashboard observes from now on
	for range 3 {
		g.RewriteBody(context.Background(), anthropic.Protocol, nil, guardtest.BigResult())
	}
	before := overview(g)
	if before.Today.Requests != 3 || before.Today.Saved <= 0 {
		t.Fatalf("today %+v", before.Today)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	g, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if after := overview(g); after.Today != before.Today {
		t.Errorf("after a restart today is %+v, was %+v", after.Today, before.Today)
	}
}

// TestLogAddedAndWould: the exchange's log line tells what was added on
// purpose and, in a dry run, what would have been sent.
func TestLogAddedAndWould(t *testing.T) {
	for _, dry := range []bool{false, true} {
		var logs syncBuffer
		cfg := config.Defaults()
		cfg.DryRun = dry
		g := newGuard(t, cfg, WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
		var rec guardtest.Recorder
		g.Records().Subscribe(&rec)
		g.RewriteBody(context.Background(), anthropic.Protocol, nil, bindingBody(""))
		x := rec.All()[0]
		var line struct {
			Added int `json:"tokens_added"`
			Would int `json:"would_send"`
		}
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			if strings.Contains(l, `"msg":"exchange"`) {
				if err := json.Unmarshal([]byte(l), &line); err != nil {
					t.Fatal(err)
				}
			}
		}
		if line.Added != x.TokensAdded || line.Would != x.WouldSend || (dry != (line.Would > 0)) || (dry == (line.Added > 0)) {
			t.Errorf("dry run %v: log says added %d, would send %d; the record %d, %d", dry, line.Added, line.Would, x.TokensAdded, x.WouldSend)
		}
	}
}
