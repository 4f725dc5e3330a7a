package ctxguard

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/guardtest"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tools/validate"
)

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

// serveGuard serves the Guard's handler for cfg in front of a fake
// upstream.
func serveGuard(t *testing.T, cfg config.Config) (*Guard, *httptest.Server, *anthropictest.Server) {
	t.Helper()
	up := anthropictest.NewServer(anthropictest.Options{})
	t.Cleanup(up.Close)
	cfg.Upstreams = config.AllUpstreams(up.URL)
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
	b := guardtest.BigResult()
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
		{"/ctxguard/nope", 404, `{"error":{"message":"no such ctxguard endpoint (error ID `},
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
			if tc.status == 403 && (!strings.HasPrefix(w.Body.String(), `{"error":{"message":"ctxguard: `) || !strings.Contains(w.Body.String(), tc.msg)) {
				t.Errorf("body %s, want an error saying %q", w.Body, tc.msg)
			}
		})
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
	body := guardtest.BigResult()
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
	b := guardtest.BigResult()
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
		g.engine.Publish(out.Record)
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

// TestOverloadedPerProtocol: ctxguard's own overloaded answer takes each
// API's status and shape: Anthropic's 529 overloaded_error, the OpenAI
// APIs' 503 with their error object, Gemini's 503 UNAVAILABLE.
func TestOverloadedPerProtocol(t *testing.T) {
	want := map[string]struct {
		status int
		typ    string
	}{"anthropic": {529, "overloaded_error"}, "responses": {503, "server_error"}, "chat": {503, "server_error"}, "gemini": {503, "UNAVAILABLE"}}
	for _, p := range Protocols() {
		rec := httptest.NewRecorder()
		protocol.Write(context.Background(), rec, nil, p, &protocol.Error{Status: 529, Kind: protocol.Overloaded, Message: "busy"})
		var body struct {
			Type  string
			Error struct{ Type, Status string }
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %v: %s", p.Name(), err, rec.Body)
		}
		w, ok := want[p.Name()]
		typ := body.Error.Type + body.Error.Status // Gemini's is a status name
		if !ok || rec.Code != w.status || typ != w.typ {
			t.Errorf("%s: status %d, error type %q, want %+v", p.Name(), rec.Code, typ, w)
		}
	}
}
