package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ctxguard/ctxguard/internal/guardtest"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/tools/validate/allow"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tools/sessiongen"
	"github.com/ctxguard/ctxguard/tools/validate"
)

// TestFidelityAllOff: with every rule off the upstream body is the
// client's, byte for byte (byte fidelity).
func TestFidelityAllOff(t *testing.T) {
	g := newEngine(t, guardtest.AllOff())
	for name, st := range guardtest.Corpus(t, "..") {
		for i, b := range st.Bodies {
			res := g.RewriteBody(context.Background(), st.Proto, nil, b)
			if sha256.Sum256(res.Body) != sha256.Sum256(b) || res.Changed {
				t.Errorf("%s request %d: body changed with every rule off", name, i)
			}
		}
	}
}

// validRewrite checks a rewrite by the rules of its protocol's API and
// what cfg allows to change.
func validRewrite(p protocol.Protocol, cfg config.Config, orig, sent []byte) error {
	switch p {
	case anthropic.Protocol:
		return validate.Rewrite(orig, sent, allow.For(cfg))
	case responses.Protocol:
		return responses.ValidateRewrite(orig, sent)
	case chat.Protocol:
		return chat.ValidateRewrite(orig, sent)
	}
	return fmt.Errorf("no validator for protocol %s", p.Name())
}

// TestDefaultsValid: with the default rules every request of the corpus is
// still a valid request, differing from the client's only where the rules
// allow.
func TestDefaultsValid(t *testing.T) {
	for name, st := range guardtest.Corpus(t, "..") {
		g := newEngine(t, config.Defaults(), withStore(store.NewMemory()))
		for i, b := range st.Bodies {
			res := g.RewriteBody(context.Background(), st.Proto, nil, b)
			if res.Err != nil {
				t.Fatalf("%s request %d: %v", name, i, res.Err)
			}
			if err := validRewrite(st.Proto, config.Defaults(), b, res.Body); err != nil {
				t.Errorf("%s request %d: %v", name, i, err)
			}
		}
	}
}

func TestSkipped(t *testing.T) {
	g := newEngine(t, config.Defaults())
	valid := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	for _, tc := range []struct {
		name   string
		header http.Header
		body   []byte
		want   string
	}{
		{"invalid json", nil, []byte(`{"messages":[`), "invalid json"},
		{"not a messages request", nil, []byte(`{"prompt":"hi"}`), "not a messages request"},
		{"bypass", http.Header{"X-Ctxguard-Bypass": {"1"}}, valid, "bypass"},
	} {
		res := g.RewriteBody(context.Background(), anthropic.Protocol, tc.header, tc.body)
		if res.Skipped != tc.want || !bytes.Equal(res.Body, tc.body) {
			t.Errorf("%s: skipped %q, body unchanged %v", tc.name, res.Skipped, bytes.Equal(res.Body, tc.body))
		}
	}
}

func TestDryRun(t *testing.T) {
	cfg := config.Defaults()
	cfg.DryRun = true
	g := newEngine(t, cfg)
	b := guardtest.BigResult()
	res := g.RewriteBody(context.Background(), anthropic.Protocol, nil, b)
	if res.Skipped != "dry run" || !bytes.Equal(res.Body, b) {
		t.Errorf("dry run: skipped %q, unchanged %v", res.Skipped, bytes.Equal(res.Body, b))
	}
	live := newEngine(t, config.Defaults()).RewriteBody(context.Background(), anthropic.Protocol, nil, b)
	if !live.Changed || len(live.Body) >= len(b) {
		t.Fatal("the same body must be rewritten when not in dry run")
	}
}

type failingStore struct{ store.Store }

func (failingStore) PutBlob(context.Context, string, []byte) error {
	return errors.New("disk full at /secret/path")
}

// TestFailOpen: a failing pass forwards the original body, is counted, and
// is logged with an ID, without the body or the key in the log.
func TestFailOpen(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	g := newEngine(t, config.Defaults(), withStore(failingStore{store.NewMemory()}), withLogger(log))
	big := strings.Repeat("SECRET-CONTENT ", 5000) // over the persist threshold
	q, _ := json.Marshal(big)
	body := []byte(`{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":` + string(q) + `}]}]}`)
	req := httptest.NewRequest("POST", "/v1/messages", nil)
	req.Header.Set("X-Api-Key", "sk-ant-KEY123")
	out := g.Rewrite(context.Background(), req, anthropic.Protocol, body)
	if !bytes.Equal(out.Body, body) {
		t.Fatal("failing rewrite did not forward the original body")
	}
	id := out.RespHeader.Get("X-Ctxguard-Error-Id")
	if id == "" || out.Record == nil || out.Record.Outcome != record.FailedOpen || out.Record.ErrorID != id {
		t.Fatalf("error id %q, record %+v", id, out.Record)
	}
	var rec guardtest.Recorder
	g.Records().Subscribe(&rec)
	g.Publish(out.Record) // as the proxy does once the answer is relayed
	if recs := rec.All(); len(recs) != 1 || recs[0].Outcome != record.FailedOpen {
		t.Fatalf("published %+v, want one failed_open record", recs)
	}
	l := logs.String()
	if !strings.Contains(l, id) || !strings.Contains(l, "persist") {
		t.Errorf("log lacks the id or the pass:\n%s", l)
	}
	if strings.Contains(l, "SECRET-CONTENT") || strings.Contains(l, "KEY123") {
		t.Errorf("log leaks the body or the key:\n%s", l)
	}
}

// TestIncrementalSameBytes: a Guard that remembers a session's last
// request (and parses only what is new) sends exactly the bytes a fresh
// Guard, which knows nothing, sends for every request, including when a
// request breaks the previous prefix.
func TestIncrementalSameBytes(t *testing.T) {
	small := config.Defaults()
	pass.Update(&small.Passes, func(s *clearing.Config) {
		s.Trigger, s.KeepTokens, s.ClearAtLeast = model.Tokens(3000), model.Tokens(1000), model.Tokens(1000)
		s.Payback = 0
	})
	trim := small
	pass.Update(&trim.Passes, func(s *clearing.Config) { s.Trim.Enabled = true })
	for _, cfg := range []config.Config{small, trim} {
		// With a session header, and without one: then the memo is found
		// by the start of the conversation (quickKey).
		for _, h := range []http.Header{{"X-Claude-Code-Session-Id": {"s"}}, nil} {
			incrementalSameBytes(t, cfg, h)
		}
	}
}

func incrementalSameBytes(t *testing.T, cfg config.Config, h http.Header) {
	t.Helper()
	reused := 0
	streams := guardtest.Corpus(t, "..")
	for seed := range uint64(6) {
		gen, err := sessiongen.Generate(rand.New(rand.NewPCG(seed, 7)), sessiongen.Options{Turns: 60, MaxResult: 20_000})
		if err != nil {
			t.Fatal(err)
		}
		reqs, err := gen.Requests()
		if err != nil {
			t.Fatal(err)
		}
		st := guardtest.Stream{Proto: anthropic.Protocol}
		for _, r := range reqs {
			st.Bodies = append(st.Bodies, r.Body)
		}
		streams[fmt.Sprint("generated ", seed)] = st
	}
	events := 0
	for name, st := range streams {
		bodies := st.Bodies
		long := newEngine(t, cfg, withStore(store.NewMemory()))
		for i, b := range bodies {
			if i == len(bodies)/2 {
				// A break in the stream: an unrelated request of the same
				// session header, then the stream goes on.
				long.RewriteBody(context.Background(), st.Proto, h, bodies[0])
			}
			got := long.RewriteBody(context.Background(), st.Proto, h, b)
			fresh := newEngine(t, cfg, withStore(store.NewMemory())).RewriteBody(context.Background(), st.Proto, h, b)
			if !bytes.Equal(got.Body, fresh.Body) || got.Event != fresh.Event || got.TokensBefore != fresh.TokensBefore {
				t.Fatalf("%s request %d (header %v): the remembering Guard sent other bytes than a fresh one", name, i, h)
			}
			if got.Event {
				events++
				// No clock moved: every event is the history's growth.
				if got.Cause != record.CauseThreshold && got.Cause != record.CauseOverflow {
					t.Errorf("%s request %d: event cause %q, want threshold or overflow", name, i, got.Cause)
				}
			} else if got.Cause != "" {
				t.Errorf("%s request %d: cause %q without an event", name, i, got.Cause)
			}
		}
		long.sessions.mu.Lock()
		for _, m := range long.sessions.m {
			if m.conv != nil && len(m.conv.Messages) > 2 {
				reused++
			}
		}
		long.sessions.mu.Unlock()
	}
	if reused == 0 || events < 5 {
		t.Fatalf("%d sessions remembered, %d edit events: the test checks too little", reused, events)
	}
}

// TestIncrementalInterleaved: two conversations without a session header
// that start alike (so share a memo key) and then differ, their requests
// interleaved, in every protocol: each request gets the bytes a fresh
// Guard sends, and each conversation keeps a memo of its own under the
// key.
func TestIncrementalInterleaved(t *testing.T) {
	cfg := config.Defaults()
	pass.Update(&cfg.Passes, func(s *clearing.Config) {
		s.Trigger, s.KeepTokens, s.ClearAtLeast = model.Tokens(3000), model.Tokens(1000), model.Tokens(1000)
		s.Payback = 0
	})
	for _, proto := range []protocol.Protocol{anthropic.Protocol, responses.Protocol, chat.Protocol} {
		a := generated(t, proto, 1, 30)[0]
		b := divergent(t, proto, a)
		g := newEngine(t, cfg, withStore(store.NewMemory()))
		differ := 0
		for k := range a {
			if cacheKey(proto, nil, a[k]) != cacheKey(proto, nil, b[k]) || cacheKey(proto, nil, a[k]) == "" {
				t.Fatalf("%s request %d: the two conversations do not share a memo key", proto.Name(), k)
			}
			if !bytes.Equal(a[k], b[k]) {
				differ++
			}
			for _, body := range [][]byte{a[k], b[k]} {
				got := g.RewriteBody(context.Background(), proto, nil, body)
				fresh := newEngine(t, cfg, withStore(store.NewMemory())).RewriteBody(context.Background(), proto, nil, body)
				if !bytes.Equal(got.Body, fresh.Body) || got.Event != fresh.Event || got.TokensBefore != fresh.TokensBefore {
					t.Fatalf("%s request %d: the remembering Guard sent other bytes than a fresh one", proto.Name(), k)
				}
			}
		}
		if differ < len(a)/2 {
			t.Fatalf("%s: only %d of %d requests differ between the conversations", proto.Name(), differ, len(a))
		}
		// Each conversation kept a memo of its own (slots) holding its
		// last request.
		last, err := proto.Parse(a[len(a)-1])
		if err != nil {
			t.Fatal(err)
		}
		g.sessions.mu.Lock()
		var held []int
		whole := 0
		for _, m := range g.sessions.m {
			if m.conv != nil {
				held = append(held, len(m.conv.Messages))
				if len(m.conv.Messages) == len(last.Messages) {
					whole++
				}
			}
		}
		g.sessions.mu.Unlock()
		if whole != 2 {
			t.Errorf("%s: memos of %v messages, want two of %d", proto.Name(), held, len(last.Messages))
		}
		last.Release()
	}
}

// divergent returns the requests of a conversation that starts as a does
// (the same system prompt and first user message) and differs from its
// first tool call on: that call's id (and so the result's) is changed,
// keeping its length.
func divergent(t *testing.T, proto protocol.Protocol, a [][]byte) [][]byte {
	t.Helper()
	c, err := proto.Parse(a[len(a)-1])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	for _, m := range c.Messages {
		for _, blk := range m.Blocks {
			if blk.Kind != conversation.ToolCall || blk.ID.Len() < 4 {
				continue
			}
			id := c.Bytes(blk.ID)
			other := bytes.Clone(id)
			other[len(other)-2] ^= 1 // a letter or digit stays one
			var b [][]byte
			for _, body := range a {
				b = append(b, bytes.ReplaceAll(body, id, other))
			}
			return b
		}
	}
	t.Fatalf("%s: no tool call to change", proto.Name())
	return nil
}

// TestIncrementalConcurrent: requests of one session header arriving at
// once (subagents share Claude Code's session id) each get the bytes a
// fresh Guard sends; the memo is used by one at a time.
func TestIncrementalConcurrent(t *testing.T) {
	var bodies [][]byte
	var protos []protocol.Protocol
	for _, st := range guardtest.Corpus(t, "..") {
		bodies = append(bodies, st.Bodies...)
		for range st.Bodies {
			protos = append(protos, st.Proto)
		}
	}
	g := newEngine(t, config.Defaults(), withStore(store.NewMemory()))
	want := make([][]byte, len(bodies))
	for i, b := range bodies {
		want[i] = newEngine(t, config.Defaults(), withStore(store.NewMemory())).RewriteBody(context.Background(), protos[i], nil, b).Body
	}
	h := http.Header{"X-Claude-Code-Session-Id": {"shared"}}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, b := range bodies {
				if got := g.RewriteBody(context.Background(), protos[i], h, b).Body; !bytes.Equal(got, want[i]) {
					t.Errorf("request %d: other bytes than a fresh Guard", i)
					return
				}
			}
		}()
	}
	wg.Wait()
}
