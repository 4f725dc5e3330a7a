package fault

import (
	"bytes"
	"context"
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestNosniffEverywhere: every answer ctxguard writes itself — each local
// endpoint, its 404s and other errors, and the errors the proxy answers
// with — says what it is (Content-Type) and forbids browsers to guess
// (X-Content-Type-Options: nosniff). Relayed upstream answers are left as
// the upstream sent them.
func TestNosniffEverywhere(t *testing.T) {
	up := newUpstream(t)
	up.on("plain", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(500)
		w.Write([]byte(`{"type":"error","error":{"type":"api_error","message":"upstream's own"}}`))
	})
	in := start(t, serveOpts{upstream: up.URL, config: "max_body: 1048576\nroutes: {gone: http://" + freePort(t) + "}\n"})
	res, _ := post(t, client(), in.URL, http.Header{"X-Claude-Code-Session-Id": {"fault-headers"}}, bigResultBody("headers"))
	if res.StatusCode != 200 {
		t.Fatalf("the exchange: %d", res.StatusCode)
	}
	blob := regexp.MustCompile(`/ctxguard/v1/blobs/([a-z]{13})`).FindSubmatch(up.messages()[0])
	if blob == nil {
		t.Fatal("no blob stored: the test checks too little")
	}
	var sessions []struct{ Key string }
	for deadline := time.Now().Add(10 * time.Second); len(sessions) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		_, b := get(t, in.URL+"/ctxguard/v1/sessions", "", nil)
		json.Unmarshal(b, &sessions)
	}
	if len(sessions) == 0 {
		t.Fatal("no session listed")
	}
	key := url.PathEscape(sessions[0].Key)

	for _, tc := range []struct {
		method, path string
		h            http.Header
		body         []byte
		status       int
		want         string // media type
	}{
		{"GET", "/healthz", nil, nil, 200, "text/plain"},
		{"GET", "/readyz", nil, nil, 200, "text/plain"},
		{"GET", "/metrics", nil, nil, 200, "text/plain"},
		{"GET", "/ctxguard/v1/stats", nil, nil, 200, "application/json"},
		{"GET", "/ctxguard/v1/sessions", nil, nil, 200, "application/json"},
		{"GET", "/ctxguard/v1/blobs/" + string(blob[1]), nil, nil, 200, "text/plain"},
		{"GET", "/ctxguard/", nil, nil, 200, "text/html"},
		{"GET", "/ctxguard/session?key=" + key, nil, nil, 200, "text/html"},
		{"GET", "/ctxguard/request?seq=1", nil, nil, 200, "text/html"},
		{"GET", "/ctxguard/config", nil, nil, 200, "text/html"},
		{"GET", "/ctxguard/static/app.js", nil, nil, 200, "text/javascript"},
		{"GET", "/ctxguard/static/app.css", nil, nil, 200, "text/css"},
		{"GET", "/ctxguard/api/overview", nil, nil, 200, "application/json"},
		{"GET", "/ctxguard/api/session/" + key, nil, nil, 200, "application/json"},
		{"GET", "/ctxguard/api/session/" + key + "/chart.svg", nil, nil, 200, "image/svg+xml"},
		{"GET", "/ctxguard/api/request/1", nil, nil, 200, "application/json"},
		{"GET", "/ctxguard/api/config", nil, nil, 200, "application/json"},
		{"GET", "/ctxguard/api/events", nil, nil, 200, "text/event-stream"},
		// 404s and other errors of the local endpoints.
		{"GET", "/ctxguard/v1/nope", nil, nil, 404, "application/json"},
		{"GET", "/ctxguard/v1/stats/", nil, nil, 404, "application/json"},
		{"GET", "/ctxguard/v1/sessions/x", nil, nil, 404, "application/json"},
		{"POST", "/ctxguard/v1/stats", nil, nil, 404, "application/json"},
		{"GET", "/ctxguard/v1/blobs/aaaaaaaaaaaaa", nil, nil, 404, "application/json"},
		{"GET", "/ctxguard/v1/blobs/NOT-AN-ID", nil, nil, 400, "application/json"},
		{"GET", "/ctxguard/static/nope.js", nil, nil, 404, "application/json"},
		{"GET", "/ctxguard/api/nope", nil, nil, 404, "application/json"},
		{"GET", "/ctxguard/api/session/nope", nil, nil, 404, "application/json"},
		{"GET", "/ctxguard/api/request/999999", nil, nil, 404, "application/json"},
		{"DELETE", "/ctxguard/api/overview", nil, nil, 405, "application/json"},
		{"GET", "/ctxguard/v1/stats", http.Header{"Host": {"evil.example"}}, nil, 403, "application/json"},
		// The proxy's own errors.
		{"GET", "/v1/responses", http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"}}, nil, 426, "application/json"},
		{"POST", "/v1/messages", http.Header{"Content-Type": {"application/json"}}, bytes.Repeat([]byte(" "), 2<<20), 413, "application/json"},
		{"POST", "/x/gone/v1/messages", http.Header{"Content-Type": {"application/json"}}, smallBody("hi"), 502, "application/json"},
	} {
		what := tc.method + " " + tc.path
		res := send(t, in.URL, tc.method, tc.path, tc.h, tc.body)
		res.Body.Close()
		if res.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", what, res.StatusCode, tc.status)
		}
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q, want nosniff", what, got)
		}
		if mt, _, err := mime.ParseMediaType(res.Header.Get("Content-Type")); err != nil || mt != tc.want {
			t.Errorf("%s: Content-Type %q, want %s", what, res.Header.Get("Content-Type"), tc.want)
		}
	}

	// With auth_token, the refusals.
	locked := start(t, serveOpts{upstream: up.URL, config: "auth_token: 0123456789abcdef-fault-headers\n"})
	for _, path := range []string{"/ctxguard/v1/stats", "/ctxguard/v1/sessions", "/ctxguard/v1/nope", "/metrics", "/v1/messages"} {
		res := send(t, locked.URL, "POST", path, http.Header{"Content-Type": {"application/json"}}, smallBody("hi"))
		res.Body.Close()
		if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); res.StatusCode != 401 || mt != "application/json" || res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("POST %s without the token: %d, Content-Type %q, X-Content-Type-Options %q", path, res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("X-Content-Type-Options"))
		}
	}

	// An upstream's answer is relayed as it came: nothing added.
	res, _ = post(t, client(), in.URL, http.Header{"X-Fault": {"plain"}}, smallBody("hi"))
	if res.StatusCode != 500 || res.Header.Get("X-Content-Type-Options") != "" {
		t.Errorf("the upstream's 500: status %d, X-Content-Type-Options %q added", res.StatusCode, res.Header.Get("X-Content-Type-Options"))
	}
}

// send makes one request and returns the answer with its body unread (an
// event stream does not end); the caller closes it.
func send(t *testing.T, base, method, path string, h http.Header, body []byte) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		if strings.EqualFold(k, "Host") {
			req.Host = vs[0]
			continue
		}
		req.Header[k] = vs
	}
	res, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
