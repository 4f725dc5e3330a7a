package ctxguard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ctxguard/ctxguard/tools/validate/allow"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/proxy"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tools/sessiongen"
	"github.com/ctxguard/ctxguard/tools/transcript"
	"github.com/ctxguard/ctxguard/tools/validate"
)

// allOff returns the defaults with every rule switched off.
func allOff() config.Config {
	c := config.Defaults()
	c.Compress.Enabled = false
	c.Persist.Enabled = false
	c.Clear.Enabled = false
	c.Compact.Enabled = false
	c.ThinkingGuard.Enabled = false
	return c
}

func newGuard(t testing.TB, cfg config.Config, opts ...Option) *Guard {
	t.Helper()
	cfg.DataDir = t.TempDir()
	g, err := New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// stream is a session's requests, oldest first, in one protocol.
type stream struct {
	proto  protocol.Protocol
	bodies [][]byte
}

// corpus returns, by name, the fidelity bodies, the real clients' captured
// requests of every protocol (Claude Code, Codex CLI, opencode), and the
// request streams rebuilt from the real sessions in tools/transcript/testdata.
func corpus(t testing.TB) map[string]stream {
	t.Helper()
	out := map[string]stream{}
	files, _ := filepath.Glob("testdata/fidelity/*.json")
	files = append(files, "anthropic/testdata/claude-code-2.1.197-first.json")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = stream{anthropic.Protocol, [][]byte{b}}
	}
	for _, c := range []struct {
		proto protocol.Protocol
		glob  string
	}{
		{responses.Protocol, "openai/responses/testdata/codex/*.body.raw"},
		{chat.Protocol, "openai/chat/testdata/opencode-*.body.json"},
	} {
		files, _ := filepath.Glob(c.glob)
		if len(files) == 0 {
			t.Fatalf("no captures at %s", c.glob)
		}
		// NAME-NNNN.body.*: request NNNN of capture NAME, one stream.
		slices.Sort(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			name, _, _ := strings.Cut(f, ".body.")
			if i := strings.LastIndexByte(name, '-'); i > 0 {
				name = name[:i]
			}
			st := out[name]
			st.proto, st.bodies = c.proto, append(st.bodies, b)
			out[name] = st
		}
	}
	sessions, err := transcript.Load([]string{"tools/transcript/testdata/claude-code", "tools/transcript/testdata/swe-agent"}, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		b, err := transcript.NewBuilder(s, transcript.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := stream{proto: anthropic.Protocol}
		for k := 0; k < b.Len(); k++ {
			r, err := b.Request(k)
			if err != nil {
				t.Fatal(err)
			}
			st.bodies = append(st.bodies, r.Body)
		}
		out[s.ID] = st
	}
	if len(out) < 8 {
		t.Fatalf("corpus has only %d entries", len(out))
	}
	return out
}

// TestFidelityAllOff: with every rule off the upstream body is the
// client's, byte for byte (BRIEF principle 1).
func TestFidelityAllOff(t *testing.T) {
	g := newGuard(t, allOff())
	for name, st := range corpus(t) {
		for i, b := range st.bodies {
			res := g.RewriteBody(context.Background(), st.proto, nil, b)
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
	for name, st := range corpus(t) {
		g := newGuard(t, config.Defaults(), WithStore(store.NewMemory()))
		for i, b := range st.bodies {
			res := g.RewriteBody(context.Background(), st.proto, nil, b)
			if res.Err != nil {
				t.Fatalf("%s request %d: %v", name, i, res.Err)
			}
			if err := validRewrite(st.proto, config.Defaults(), b, res.Body); err != nil {
				t.Errorf("%s request %d: %v", name, i, err)
			}
		}
	}
}

func TestSkipped(t *testing.T) {
	g := newGuard(t, config.Defaults())
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

// bigResult is a request whose tool result compression shortens.
func bigResult() []byte {
	out := strings.Repeat("\x1b[32mok\x1b[0m line of test output\n", 2000)
	q, _ := json.Marshal(out)
	return []byte(`{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"run it"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"make"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":` + string(q) + `}]}],"stream":true}`)
}

func TestDryRun(t *testing.T) {
	cfg := config.Defaults()
	cfg.DryRun = true
	g := newGuard(t, cfg)
	b := bigResult()
	res := g.RewriteBody(context.Background(), anthropic.Protocol, nil, b)
	if res.Skipped != "dry run" || !bytes.Equal(res.Body, b) {
		t.Errorf("dry run: skipped %q, unchanged %v", res.Skipped, bytes.Equal(res.Body, b))
	}
	live := newGuard(t, config.Defaults()).RewriteBody(context.Background(), anthropic.Protocol, nil, b)
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
	g := newGuard(t, config.Defaults(), WithStore(failingStore{store.NewMemory()}), WithLogger(log))
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
	g.publish(out.Record) // as the proxy does once the answer is relayed
	if g.Stats().Failed.Load() != 1 {
		t.Fatalf("failed %d", g.Stats().Failed.Load())
	}
	l := logs.String()
	if !strings.Contains(l, id) || !strings.Contains(l, "persist") {
		t.Errorf("log lacks the id or the pass:\n%s", l)
	}
	if strings.Contains(l, "SECRET-CONTENT") || strings.Contains(l, "KEY123") {
		t.Errorf("log leaks the body or the key:\n%s", l)
	}
}

// serveGuard serves the Guard's handler for cfg in front of a fake
// upstream.
func serveGuard(t *testing.T, cfg config.Config) (*Guard, *httptest.Server, *anthropictest.Server) {
	t.Helper()
	up := anthropictest.NewServer(anthropictest.Options{})
	t.Cleanup(up.Close)
	cfg.Upstreams = config.Upstreams{Anthropic: up.URL, OpenAI: up.URL}
	g := newGuard(t, cfg)
	h, err := g.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return g, srv, up
}

// TestProxy runs the Guard's handler against a fake upstream: the big
// result arrives compressed, headers report what happened, the blob and
// stats endpoints answer loopback clients.
func TestProxy(t *testing.T) {
	g, srv, up := serveGuard(t, config.Defaults())
	b := bigResult()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages?beta=true", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "sk-ant-test")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("X-Ctxguard-Passes") != "compress" || res.Header.Get("X-Ctxguard-Edit-Event") != "0" {
		t.Errorf("status %d, headers %v", res.StatusCode, res.Header)
	}
	if res.Header.Get("X-Ctxguard-Tokens-After") >= res.Header.Get("X-Ctxguard-Tokens-Before") && len(res.Header.Get("X-Ctxguard-Tokens-After")) >= len(res.Header.Get("X-Ctxguard-Tokens-Before")) {
		t.Errorf("tokens before %s after %s", res.Header.Get("X-Ctxguard-Tokens-Before"), res.Header.Get("X-Ctxguard-Tokens-After"))
	}
	got := up.MessagesRequests()
	if len(got) != 1 || len(got[0].Body) >= len(b) || bytes.Contains(got[0].Body, []byte(`\u001b[32m`)) {
		t.Fatalf("upstream got %d requests, body %d bytes (sent %d)", len(got), len(got[0].Body), len(b))
	}
	if err := validate.Rewrite(b, got[0].Body, validate.Options{}); err != nil {
		t.Error(err)
	}
	// The usage the upstream reported reaches the calibration (the
	// record is published just after the client has the whole answer).
	for i := 0; i < 200 && g.Stats().Observed.Load() == 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if g.Stats().Observed.Load() != 1 {
		t.Errorf("observed %d usages, want 1", g.Stats().Observed.Load())
	}

	// Local endpoints.
	id := store.ID([]byte("kept text"))
	g.Store().PutBlob(context.Background(), id, []byte("kept text"))
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/ctxguard/v1/blobs/" + id, 200, "kept text"},
		{"/ctxguard/v1/blobs/" + id + ".txt", 200, "kept text"},
		{"/ctxguard/v1/blobs/" + store.ID([]byte("other")), 404, "no such blob"},
		{"/ctxguard/v1/blobs/..%2F..%2Fetc", 400, "invalid blob id"},
		{"/ctxguard/v1/stats", 200, `"requests":1`},
		{"/ctxguard/v1/sessions", 200, `"requests":1`},
		{"/ctxguard/nope", 404, "not_found_error"},
	} {
		res, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tc.status || !strings.Contains(string(body), tc.body) {
			t.Errorf("GET %s: %d %s", tc.path, res.StatusCode, body)
		}
	}
}

// TestLocalAccess: local.access decides which clients may use the
// /ctxguard/ endpoints, and whatever it says, only requests naming a
// loopback host or one in local.hosts are answered (DNS rebinding).
func TestLocalAccess(t *testing.T) {
	const hostsHint = "add the host name to local.hosts"
	for _, tc := range []struct {
		access, remote, host string
		hosts                []string
		status               int
		msg                  string // part of the error message
	}{
		{access: "loopback", remote: "127.0.0.1:5000", host: "127.0.0.1:8787", status: 404},
		{access: "loopback", remote: "[::1]:5000", host: "[::1]:8787", status: 404},
		{access: "loopback", remote: "192.168.1.7:5000", host: "127.0.0.1:8787", status: 403, msg: "loopback clients only"},
		{access: "any", remote: "192.168.1.7:5000", host: "localhost:8787", status: 404},
		{access: "off", remote: "127.0.0.1:5000", host: "127.0.0.1:8787", status: 403, msg: "local.access: off"},
		{access: "off", remote: "127.0.0.1:5000", host: "evil.example", status: 403, msg: "local.access: off"},

		// Host names that are this machine's.
		{access: "loopback", remote: "127.0.0.1:5000", host: "localhost", status: 404},
		{access: "loopback", remote: "127.0.0.1:5000", host: "LocalHost.:8787", status: 404},
		{access: "loopback", remote: "127.0.0.1:5000", host: "ctxguard.localhost:8787", status: 404},
		{access: "loopback", remote: "127.0.0.1:5000", host: "127.0.0.2", status: 404},
		{access: "loopback", remote: "127.0.0.1:5000", host: "[::1]", status: 404},
		{access: "loopback", remote: "127.0.0.1:5000", host: "my.lan:8787", hosts: []string{"My.Lan"}, status: 404},
		{access: "any", remote: "192.168.1.7:5000", host: "my.lan", hosts: []string{"my.lan"}, status: 404},

		// Foreign names, whatever the client's address.
		{access: "loopback", remote: "127.0.0.1:5000", host: "evil.example:8787", status: 403, msg: hostsHint},
		{access: "any", remote: "192.168.1.7:5000", host: "evil.example", status: 403, msg: hostsHint},
		{access: "loopback", remote: "127.0.0.1:5000", host: "localhost.evil.example", status: 403, msg: hostsHint},
		{access: "loopback", remote: "127.0.0.1:5000", host: "127.0.0.1.nip.io:8787", status: 403, msg: hostsHint},
		{access: "loopback", remote: "127.0.0.1:5000", host: "[::2]:8787", status: 403, msg: hostsHint},
		{access: "loopback", remote: "127.0.0.1:5000", host: "0.0.0.0:8787", status: 403, msg: hostsHint},
		{access: "loopback", remote: "127.0.0.1:5000", host: "", status: 403, msg: hostsHint},
		{access: "loopback", remote: "127.0.0.1:5000", host: "other.lan", hosts: []string{"my.lan"}, status: 403, msg: hostsHint},
	} {
		t.Run(tc.access+" "+tc.remote+" "+tc.host, func(t *testing.T) {
			cfg := config.Defaults()
			cfg.Local.Access = tc.access
			cfg.Local.Hosts = tc.hosts
			g := newGuard(t, cfg)
			r := httptest.NewRequest("GET", "/ctxguard/v1/blobs/"+store.ID([]byte("x")), nil)
			r.RemoteAddr = tc.remote
			r.Host = tc.host
			w := httptest.NewRecorder()
			g.Local().ServeHTTP(w, r)
			if w.Code != tc.status {
				t.Errorf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if tc.status == 403 && (!strings.Contains(w.Body.String(), `"permission_error"`) || !strings.Contains(w.Body.String(), tc.msg)) {
				t.Errorf("body %s, want a permission_error saying %q", w.Body, tc.msg)
			}
		})
	}
}

// TestProxyTimeouts: every proxy timeout comes from the configuration,
// whose defaults are the proxy's, and a configuration's 0 disables it.
func TestProxyTimeouts(t *testing.T) {
	if diff := cmp.Diff(proxy.DefaultTimeouts(), proxyTimeouts(config.DefaultTimeouts())); diff != "" {
		t.Errorf("default timeouts differ (-proxy +config)\n%s", diff)
	}
	off := reflect.ValueOf(proxyTimeouts(config.Timeouts{}))
	for i := range off.NumField() {
		if v := off.Field(i).Int(); v != -1 {
			t.Errorf("timeouts.%s: a disabled config value maps to %d, want -1", off.Type().Field(i).Name, v)
		}
	}
}

// TestHandlerLimits: the Guard's handler enforces auth_token and
// limits.max_buffered.
func TestHandlerLimits(t *testing.T) {
	cfg := config.Defaults()
	cfg.AuthToken = "0123456789abcdef-token"
	cfg.MaxBody = 1 << 20
	cfg.Limits.MaxBuffered = 1 << 20
	_, srv, up := serveGuard(t, cfg)
	get := func(token string) int {
		req, _ := http.NewRequest("GET", srv.URL+"/ctxguard/v1/stats", nil)
		if token != "" {
			req.Header.Set("X-Ctxguard-Token", token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := []int{get(""), get("wrong-token-0123456789"), get(cfg.AuthToken)}; !slices.Equal(got, []int{401, 401, 200}) {
		t.Errorf("stats without, with a wrong and with the token: %v", got)
	}
	// A 600 KB body fits, but not with room for its rewrite as well.
	body := bigResult()
	body = append(body[:len(body)-1:len(body)-1], `,"pad":"`+strings.Repeat("p", 600<<10-len(body))+`"}`...)
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Ctxguard-Token", cfg.AuthToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	got := up.MessagesRequests()
	if res.StatusCode != 200 || res.Header.Get("X-Ctxguard-Skipped") != "overloaded" || len(got) != 1 || !bytes.Equal(got[0].Body, body) {
		t.Errorf("status %d, skipped %q; want the body forwarded untouched", res.StatusCode, res.Header.Get("X-Ctxguard-Skipped"))
	}
}

// TestTransport: the in-process middleware rewrites what a Go client sends.
func TestTransport(t *testing.T) {
	var mu sync.Mutex
	var got []byte
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got, _ = io.ReadAll(r.Body)
		mu.Unlock()
		w.Write([]byte(`{}`))
	}))
	defer up.Close()
	g := newGuard(t, config.Defaults())
	client := &http.Client{Transport: g.Transport(nil)}
	b := bigResult()
	res, err := client.Post(up.URL+"/v1/messages", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if len(got) == 0 || len(got) >= len(b) {
		t.Fatalf("upstream got %d bytes, client sent %d", len(got), len(b))
	}
	res, _ = client.Post(up.URL+"/v1/other", "application/json", bytes.NewReader(b))
	res.Body.Close()
	if !bytes.Equal(got, b) {
		t.Error("a non-Messages path was rewritten")
	}
}

// TestCalibrationPersists: usage reported by the API calibrates the
// estimator, and a new Guard on the same store starts from it.
func TestCalibrationPersists(t *testing.T) {
	st := store.NewMemory()
	g := newGuard(t, config.Defaults(), WithStore(st))
	for i := 0; i < 10; i++ {
		g.Observe("claude-sonnet-4-5", 10_000, protocol.Usage{Input: 1000, CacheRead: 11_000})
	}
	f := g.Calibration().Factor("claude-sonnet-4-5")
	if f < 1.1 || f > 1.3 {
		t.Fatalf("factor %v, want about 1.2", f)
	}
	g.Flush()
	g2 := newGuard(t, config.Defaults(), WithStore(st))
	if f2 := g2.Calibration().Factor("claude-sonnet-4-5"); f2 != f {
		t.Errorf("reloaded factor %v, want %v", f2, f)
	}
}

// TestCalibrationLearnsGrowth: the usage of a session's consecutive
// requests teaches the calibration the growth between them (the Guard
// hands the session key to the usage callback).
func TestCalibrationLearnsGrowth(t *testing.T) {
	g := newGuard(t, config.Defaults())
	words := func(n int) string { return strings.Repeat("the quick brown fox jumps over the lazy dog ", n) }
	msgs := []string{`{"role":"user","content":"` + words(40) + `"}`}
	var ests []int
	for k := range 4 {
		body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[` + strings.Join(msgs, ",") + `]}`)
		req := httptest.NewRequest("POST", "/v1/messages", nil)
		req.Header.Set("X-Claude-Code-Session-Id", "growth-session")
		out := g.Rewrite(context.Background(), req, anthropic.Protocol, body)
		if out.Record == nil {
			t.Fatal("no record")
		}
		est, err := strconv.Atoi(out.RespHeader.Get("X-Ctxguard-Tokens-After"))
		if err != nil {
			t.Fatal(err)
		}
		ests = append(ests, est)
		// The API bills 10% more than the estimate of every request: the
		// proxy completes the record with that usage and publishes it.
		out.Record.Status, out.Record.Usage = 200, &protocol.Usage{Input: 100, CacheRead: est*11/10 - 100}
		g.publish(out.Record)
		if out.Release != nil {
			out.Release()
		}
		msgs = append(msgs, `{"role":"assistant","content":"`+words(30+k)+`"}`, `{"role":"user","content":"`+words(20)+`"}`)
	}
	s := g.Calibration().Snapshot()
	if len(s) != 1 || s[0].Growth != 3 || s[0].Observations != 4 || s[0].Basis != "growth" || math.Abs(s[0].Factor-1.1) > 0.01 {
		t.Errorf("calibration %+v after requests estimated at %v", s, ests)
	}
}

// TestIncrementalSameBytes: a Guard that remembers a session's last
// request (and parses only what is new) sends exactly the bytes a fresh
// Guard, which knows nothing, sends for every request, including when a
// request breaks the previous prefix.
func TestIncrementalSameBytes(t *testing.T) {
	small := config.Defaults()
	small.Clear.Trigger, small.Clear.KeepTokens, small.Clear.ClearAtLeast = model.Tokens(3000), model.Tokens(1000), model.Tokens(1000)
	small.Clear.Payback = 0
	trim := small
	trim.Clear.Trim.Enabled = true
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
	streams := corpus(t)
	for seed := range uint64(6) {
		gen, err := sessiongen.Generate(rand.New(rand.NewPCG(seed, 7)), sessiongen.Options{Turns: 60, MaxResult: 20_000})
		if err != nil {
			t.Fatal(err)
		}
		reqs, err := gen.Requests()
		if err != nil {
			t.Fatal(err)
		}
		st := stream{proto: anthropic.Protocol}
		for _, r := range reqs {
			st.bodies = append(st.bodies, r.Body)
		}
		streams[fmt.Sprint("generated ", seed)] = st
	}
	events := 0
	for name, st := range streams {
		bodies := st.bodies
		long := newGuard(t, cfg, WithStore(store.NewMemory()))
		for i, b := range bodies {
			if i == len(bodies)/2 {
				// A break in the stream: an unrelated request of the same
				// session header, then the stream goes on.
				long.RewriteBody(context.Background(), st.proto, h, bodies[0])
			}
			got := long.RewriteBody(context.Background(), st.proto, h, b)
			fresh := newGuard(t, cfg, WithStore(store.NewMemory())).RewriteBody(context.Background(), st.proto, h, b)
			if !bytes.Equal(got.Body, fresh.Body) || got.Event != fresh.Event || got.TokensBefore != fresh.TokensBefore {
				t.Fatalf("%s request %d (header %v): the remembering Guard sent other bytes than a fresh one", name, i, h)
			}
			if got.Event {
				events++
			}
		}
		long.recent.mu.Lock()
		for _, m := range long.recent.m {
			if m.conv != nil && len(m.conv.Messages) > 2 {
				reused++
			}
		}
		long.recent.mu.Unlock()
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
	cfg.Clear.Trigger, cfg.Clear.KeepTokens, cfg.Clear.ClearAtLeast = model.Tokens(3000), model.Tokens(1000), model.Tokens(1000)
	cfg.Clear.Payback = 0
	for _, proto := range []protocol.Protocol{anthropic.Protocol, responses.Protocol, chat.Protocol} {
		a := generated(t, proto, 1, 30)[0]
		b := divergent(t, proto, a)
		g := newGuard(t, cfg, WithStore(store.NewMemory()))
		differ := 0
		for k := range a {
			if memoKey(proto, nil, a[k]) != memoKey(proto, nil, b[k]) || memoKey(proto, nil, a[k]) == "" {
				t.Fatalf("%s request %d: the two conversations do not share a memo key", proto.Name(), k)
			}
			if !bytes.Equal(a[k], b[k]) {
				differ++
			}
			for _, body := range [][]byte{a[k], b[k]} {
				got := g.RewriteBody(context.Background(), proto, nil, body)
				fresh := newGuard(t, cfg, WithStore(store.NewMemory())).RewriteBody(context.Background(), proto, nil, body)
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
		g.recent.mu.Lock()
		var held []int
		whole := 0
		for _, m := range g.recent.m {
			if m.conv != nil {
				held = append(held, len(m.conv.Messages))
				if len(m.conv.Messages) == len(last.Messages) {
					whole++
				}
			}
		}
		g.recent.mu.Unlock()
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
	for _, st := range corpus(t) {
		bodies = append(bodies, st.bodies...)
		for range st.bodies {
			protos = append(protos, st.proto)
		}
	}
	g := newGuard(t, config.Defaults(), WithStore(store.NewMemory()))
	want := make([][]byte, len(bodies))
	for i, b := range bodies {
		want[i] = newGuard(t, config.Defaults(), WithStore(store.NewMemory())).RewriteBody(context.Background(), protos[i], nil, b).Body
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

// TestOverloadedPerProtocol: ctxguard's own overloaded answer takes each
// API's status and shape: Anthropic's 529 overloaded_error, the OpenAI
// APIs' 503 with their error object.
func TestOverloadedPerProtocol(t *testing.T) {
	want := map[string]struct {
		status int
		typ    string
	}{"anthropic": {529, "overloaded_error"}, "responses": {503, "server_error"}, "chat": {503, "server_error"}}
	for _, p := range Protocols() {
		rec := httptest.NewRecorder()
		protocol.Write(context.Background(), rec, nil, p, &protocol.Error{Status: 529, Kind: protocol.Overloaded, Message: "busy"})
		var body struct {
			Type  string
			Error struct{ Type string }
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %v: %s", p.Name(), err, rec.Body)
		}
		w, ok := want[p.Name()]
		if !ok || rec.Code != w.status || body.Error.Type != w.typ {
			t.Errorf("%s: status %d, error type %q, want %+v", p.Name(), rec.Code, body.Error.Type, w)
		}
	}
}
