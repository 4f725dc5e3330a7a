package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/guardtest"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/store/redis/redistest"
)

// localTypes is the media type each local route answers with, by the
// pattern it is registered under (Server.local). A route registered
// without an entry here fails TestLocalHeaders.
var localTypes = map[string]string{
	"GET /healthz":                              "text/plain",
	"GET /readyz":                               "text/plain",
	"GET /ctxguard/v1/blobs/{id}":               "text/plain",
	"GET /ctxguard/v1/blobs/{id}/{sig}":         "text/plain",
	"GET /ctxguard/signin":                      "text/html",
	"POST /ctxguard/signin":                     "application/json", // the walk posts no form: 415
	"GET /ctxguard/v1/stats":                    "application/json",
	"GET /ctxguard/v1/sessions":                 "application/json",
	"GET /metrics":                              "text/plain",
	"GET /ctxguard/{$}":                         "text/html",
	"GET /ctxguard/session":                     "text/html",
	"GET /ctxguard/request":                     "text/html",
	"GET /ctxguard/config":                      "text/html",
	"GET /ctxguard/static/{file}":               "text/javascript",
	"GET /ctxguard/api/overview":                "application/json",
	"GET /ctxguard/api/session/{key}":           "application/json",
	"GET /ctxguard/api/session/{key}/chart.svg": "image/svg+xml",
	"GET /ctxguard/api/request/{seq}":           "application/json",
	"GET /ctxguard/api/config":                  "application/json",
	"GET /ctxguard/api/events":                  "text/event-stream",
	"/ctxguard/api/":                            "application/json", // 404 (or 405 for a write)
	"/":                                         "application/json", // 404
}

// TestLocalHeaders walks every route of the local endpoints (the patterns
// Server.local registers, so a new route is walked without being listed
// here), their errors, and the errors the proxy writes itself, through
// the Guard's handler: every answer says what it is (Content-Type) and
// forbids browsers to guess (X-Content-Type-Options: nosniff).
func TestLocalHeaders(t *testing.T) {
	cfg := config.Defaults()
	cfg.AuthToken = "0123456789abcdef-local-headers"
	cfg.MaxBody = 1 << 20
	cfg.Routes = map[string]string{"gone": "http://" + redistest.ClosedPort(t)}
	g, srv, up := serveProxy(t, cfg)
	auth := http.Header{"X-Ctxguard-Token": {cfg.AuthToken}}
	do := func(method, path string, h http.Header, body []byte) *http.Response {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		t.Cleanup(cancel)
		req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range h {
			req.Header[k] = vs
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	check := func(what string, res *http.Response, status int, want string) {
		t.Helper()
		defer res.Body.Close()
		if status != 0 && res.StatusCode != status {
			b, _ := io.ReadAll(io.LimitReader(res.Body, 300))
			t.Errorf("%s: status %d, want %d: %s", what, res.StatusCode, status, b)
		}
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q, want nosniff", what, got)
		}
		mt, params, err := mime.ParseMediaType(res.Header.Get("Content-Type"))
		if err != nil || mt != want {
			t.Errorf("%s: Content-Type %q, want %s", what, res.Header.Get("Content-Type"), want)
		}
		if strings.HasPrefix(mt, "text/") && mt != "text/event-stream" && !strings.EqualFold(params["charset"], "utf-8") {
			t.Errorf("%s: Content-Type %q names no charset utf-8", what, res.Header.Get("Content-Type"))
		}
	}

	// One exchange, so that a session, a request and a blob exist.
	res := do("POST", "/v1/messages", http.Header{"X-Ctxguard-Token": {cfg.AuthToken}, "Content-Type": {"application/json"},
		"X-Claude-Code-Session-Id": {"local-headers"}}, guardtest.BigResult())
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	blob := store.ID([]byte("a kept blob"))
	if err := g.store.PutBlob(context.Background(), blob, []byte("a kept blob")); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200 && len(g.obs.Sessions.List()) == 0; i++ {
		time.Sleep(5 * time.Millisecond) // the record is published after the answer
	}
	sessions := g.obs.Sessions.List()
	if len(up.MessagesRequests()) != 1 || len(sessions) != 1 {
		t.Fatalf("the exchange: %d upstream requests, %d sessions", len(up.MessagesRequests()), len(sessions))
	}
	params := strings.NewReplacer("{id}", blob, "{sig}", g.engine.Keys().SignBlob(blob), "{key}", url.PathEscape(sessions[0].Key), "{seq}", "1", "{file}", "app.js", "{$}", "")

	g.Local()
	if len(g.localRoutes) < len(localTypes) {
		t.Errorf("%d routes registered, %d known: the configuration turned some off?", len(g.localRoutes), len(localTypes))
	}
	for _, pattern := range g.localRoutes {
		want, ok := localTypes[pattern]
		if !ok {
			t.Errorf("route %q has no Content-Type in localTypes: add it", pattern)
			continue
		}
		method, path, found := strings.Cut(pattern, " ")
		if !found {
			method, path = "GET", pattern+"no-such-endpoint"
			if pattern == "/" {
				path = "/ctxguard/no-such-endpoint" // the rest is forwarded
			}
		}
		check(pattern, do(method, params.Replace(path), auth, nil), 0, want)
	}

	// Errors, of the local endpoints and of the proxy itself.
	for _, tc := range []struct {
		what, method, path string
		h                  http.Header
		body               []byte
		status             int
		want               string
	}{
		{"no such local endpoint", "GET", "/ctxguard/v1/nope", auth, nil, 404, "application/json"},
		{"an absent blob", "GET", "/ctxguard/v1/blobs/" + store.ID([]byte("absent")), auth, nil, 404, "application/json"},
		{"an invalid blob id", "GET", "/ctxguard/v1/blobs/NOT-AN-ID", auth, nil, 400, "application/json"},
		{"no such dashboard API", "GET", "/ctxguard/api/nope", auth, nil, 404, "application/json"},
		{"a write to the dashboard", "POST", "/ctxguard/api/overview", auth, nil, 405, "application/json"},
		{"an unknown request", "GET", "/ctxguard/api/request/999999", auth, nil, 404, "application/json"},
		{"a foreign Host", "GET", "/ctxguard/v1/stats", http.Header{"X-Ctxguard-Token": auth["X-Ctxguard-Token"], "Host": {"evil.example"}}, nil, 403, "application/json"},
		{"a path the server cleans", "GET", "/ctxguard//v1/stats", auth, nil, 307, "text/html"},
		{"no token", "GET", "/ctxguard/v1/stats", nil, nil, 401, "application/json"},
		{"a browser not signed in", "GET", "/ctxguard/config", http.Header{"Accept": {"text/html"}}, nil, 303, "text/html"},
		{"a wrong token signing in", "POST", "/ctxguard/signin", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, []byte("token=wrong"), 401, "text/html"},
		{"a signed link, tampered", "GET", "/ctxguard/v1/blobs/" + blob + "/" + strings.Repeat("a", 22), nil, nil, 401, "application/json"},
		{"no token, API", "POST", "/v1/messages", http.Header{"Content-Type": {"application/json"}}, []byte("{}"), 401, "application/json"},
		{"a WebSocket upgrade", "GET", "/v1/responses", http.Header{"X-Ctxguard-Token": auth["X-Ctxguard-Token"], "Upgrade": {"websocket"}, "Connection": {"Upgrade"}}, nil, 426, "application/json"},
		{"a body over max_body", "POST", "/v1/messages", http.Header{"X-Ctxguard-Token": auth["X-Ctxguard-Token"], "Content-Type": {"application/json"}}, bytes.Repeat([]byte(" "), 2<<20), 413, "application/json"},
		{"an upstream unreachable", "POST", "/x/gone/v1/messages", http.Header{"X-Ctxguard-Token": auth["X-Ctxguard-Token"], "Content-Type": {"application/json"}}, []byte(`{"model":"m","messages":[]}`), 502, "application/json"},
	} {
		h := tc.h.Clone()
		var host string
		if h != nil {
			host = h.Get("Host")
			h.Del("Host")
		}
		if host != "" {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			req.Host = host
			req.Header = h
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			check(tc.what, res, tc.status, tc.want)
			continue
		}
		check(tc.what, do(tc.method, tc.path, h, tc.body), tc.status, tc.want)
	}
}

// TestLocalErrorShape: the local endpoints answer an error in the shape
// of the API whose client asks, as its headers say (an Anthropic SDK
// sends anthropic-version), and in neutral JSON when no protocol claims
// the request (a browser, curl), whatever the error.
func TestLocalErrorShape(t *testing.T) {
	cfg := config.Defaults()
	cfg.Local.Access = "off"
	off := newServer(t, cfg)
	on := newServer(t, config.Defaults())
	for _, tc := range []struct {
		name   string
		g      *Server
		path   string
		h      http.Header
		status int
		prefix string // how the body starts
	}{
		{"anthropic, not found", on, "/ctxguard/v1/nope", http.Header{"Anthropic-Version": {"2023-06-01"}}, 404,
			`{"type":"error","error":{"type":"not_found_error","message":"no such ctxguard endpoint (error ID ctxguard_`},
		{"anthropic-beta alone, forbidden", off, "/ctxguard/v1/stats", http.Header{"Anthropic-Beta": {"x"}}, 403,
			`{"type":"error","error":{"type":"permission_error","message":"ctxguard: local endpoints are off`},
		{"no protocol's header, not found", on, "/ctxguard/v1/nope", nil, 404,
			`{"error":{"message":"no such ctxguard endpoint (error ID ctxguard_`},
		{"an OpenAI key is no claim on a local path", off, "/ctxguard/v1/stats", http.Header{"Authorization": {"Bearer sk-x"}}, 403,
			`{"error":{"message":"ctxguard: local endpoints are off`},
	} {
		r := httptest.NewRequest("GET", tc.path, nil)
		r.RemoteAddr, r.Host = "127.0.0.1:5000", "127.0.0.1:8787"
		for k, v := range tc.h {
			r.Header[k] = v
		}
		w := httptest.NewRecorder()
		tc.g.Local().ServeHTTP(w, r)
		if w.Code != tc.status || !strings.HasPrefix(w.Body.String(), tc.prefix) || !json.Valid(w.Body.Bytes()) {
			t.Errorf("%s: %d %s; want %d and a body starting %s", tc.name, w.Code, w.Body, tc.status, tc.prefix)
		}
		if id := w.Header().Get("X-Ctxguard-Error-Id"); id == "" || !strings.Contains(w.Body.String(), `"`+id+`"`) {
			t.Errorf("%s: the body does not carry the error ID %q", tc.name, id)
		}
	}
}
