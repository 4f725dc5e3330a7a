package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/protocol"
)

// clientHeaders is what a client like Claude Code sends, plus headers a
// proxy must drop (Connection and what it names, Keep-Alive) or keep
// (Te: trailers, unknown ones, repeated ones).
func clientHeaders() http.Header {
	return http.Header{
		"X-Api-Key":                  {"sk-ant-api03-secret"},
		"Authorization":              {"Bearer sk-ant-oat-secret"},
		"Anthropic-Version":          {"2023-06-01"},
		"Anthropic-Beta":             {"claude-code-20250219,context-management-2025-06-27"},
		"X-Claude-Code-Session-Id":   {"0f7c7d6e-1111-2222-3333-444455556666"},
		"X-Unknown-Thing":            {"a", "b"},
		"Accept-Encoding":            {"gzip, deflate, br, zstd"},
		"User-Agent":                 {"claude-cli/2.1.197 (external, sdk-cli)"},
		"Accept":                     {"application/json"},
		"Content-Type":               {"application/json"},
		"X-Stainless-Retry-Count":    {"0"},
		"Anthropic-Dangerous-Direct": {"true"},
		"Connection":                 {"keep-alive, X-Hop"},
		"X-Hop":                      {"drop me"},
		"Keep-Alive":                 {"timeout=5"},
		"Te":                         {"trailers"},
	}
}

func without(h http.Header, keys ...string) http.Header {
	h = h.Clone()
	for _, k := range keys {
		delete(h, http.CanonicalHeaderKey(k))
	}
	return h
}

func TestHeadersPassBothWays(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Request-Id", "req_011CUpstream")
		h.Set("Retry-After", "7")
		h.Set("Anthropic-Ratelimit-Tokens-Remaining", "12345")
		h["X-Multi"] = []string{"1", "2"}
		h.Set("Connection", "X-Resp-Hop")
		h.Set("X-Resp-Hop", "drop me")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Date", "Mon, 02 Jan 2026 15:04:05 GMT")
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte(`{"ok":1}`))
	})
	srv, logs := newProxyServer(t, up.URL, Options{Rewriter: &identity{}})
	wantUpResp := http.Header{
		"Content-Type":                         {"application/json"},
		"Request-Id":                           {"req_011CUpstream"},
		"Retry-After":                          {"7"},
		"Anthropic-Ratelimit-Tokens-Remaining": {"12345"},
		"X-Multi":                              {"1", "2"},
		"Date":                                 {"Mon, 02 Jan 2026 15:04:05 GMT"},
		"Content-Length":                       {"8"},
	}
	for _, tc := range []struct{ method, path string }{
		{"POST", "/v1/messages?beta=true"},
		{"POST", "/v1/messages/count_tokens?beta=true"},
		{"GET", "/v1/models"},
		{"DELETE", "/v1/some/unknown/path?x=1&x=2"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			var body io.Reader
			if tc.method == "POST" {
				body = strings.NewReader(`{"model":"m","messages":[]}`)
			}
			res, got := do(t, rawClient(), tc.method, srv.URL+tc.path, clientHeaders(), body)
			r := up.last(t)
			want := without(clientHeaders(), "Connection", "X-Hop", "Keep-Alive")
			gotH := without(r.Header, "Content-Length")
			if diff := cmp.Diff(want, gotH); diff != "" {
				t.Errorf("upstream request headers (-want +got)\n%s", diff)
			}
			u, _ := url.Parse(up.URL)
			if r.Host != u.Host {
				t.Errorf("upstream Host %q, want %q", r.Host, u.Host)
			}
			if tc.path != r.Path+"?"+r.RawQuery && tc.path != r.Path {
				t.Errorf("upstream got %s?%s", r.Path, r.RawQuery)
			}
			if diff := cmp.Diff(wantUpResp, res.Header); diff != "" {
				t.Errorf("client response headers (-want +got)\n%s", diff)
			}
			if res.StatusCode != http.StatusTeapot || string(got) != `{"ok":1}` {
				t.Errorf("response %d %q", res.StatusCode, got)
			}
		})
	}
	if strings.Contains(logs.String(), "secret") {
		t.Errorf("credentials in the log:\n%s", logs.String())
	}
}

func TestNoHeadersAdded(t *testing.T) {
	up := newUpstream(t, nil)
	srv, _ := newProxyServer(t, up.URL, Options{})
	do(t, rawClient(), "GET", srv.URL+"/v1/models", http.Header{"User-Agent": nil}, nil)
	h := up.last(t).Header
	for _, k := range []string{"User-Agent", "X-Forwarded-For", "Accept-Encoding", "Via"} {
		if v, ok := h[k]; ok {
			t.Errorf("proxy added %s: %q", k, v)
		}
	}
}

func sha(b []byte) [32]byte { return sha256.Sum256(b) }

func TestBytesIdenticalPassthrough(t *testing.T) {
	cc, err := os.ReadFile("../anthropic/testdata/claude-code-2.1.197-first.json")
	if err != nil {
		t.Fatal(err)
	}
	random := make([]byte, 300<<10)
	for i := range random {
		random[i] = byte(i*7 + i>>9)
	}
	respBody := append([]byte(`{"id":"x","raw":"`), bytes.Repeat([]byte("\u00e9\\n"), 1000)...)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(respBody)
	})
	for _, rw := range []struct {
		name string
		rw   Rewriter
	}{{"no rewriter", nil}, {"identity", &identity{}}, {"returns nil", RewriterFunc(func(context.Context, *http.Request, protocol.Protocol, []byte) Outcome { return Outcome{} })}} {
		srv, _ := newProxyServer(t, up.URL, Options{Rewriter: rw.rw})
		for _, tc := range []struct {
			name, method, path, ct string
			body                   []byte
		}{
			{"claude code capture", "POST", "/v1/messages?beta=true", "application/json", cc},
			{"invalid JSON", "POST", "/v1/messages", "application/json", []byte(`{"messages":[`)},
			{"not a Messages shape", "POST", "/v1/messages", "application/json", []byte(`[1,2,3]`)},
			{"odd whitespace and escapes", "POST", "/v1/messages", "application/json; charset=utf-8", []byte(" {\"messages\" : [ ], \"x\":\"\\u00e9\\/\" , \"n\":1.50e+3}\n\t")},
			{"count_tokens", "POST", "/v1/messages/count_tokens", "application/json", cc},
			{"binary on unknown path", "PUT", "/v1/files/abc", "application/octet-stream", random},
			{"empty body", "POST", "/v1/messages", "application/json", nil},
		} {
			t.Run(rw.name+"/"+tc.name, func(t *testing.T) {
				for _, chunked := range []bool{false, true} {
					var body io.Reader = bytes.NewReader(tc.body)
					if chunked {
						body = io.MultiReader(bytes.NewReader(tc.body)) // unknown length: sent chunked
					}
					res, got := do(t, rawClient(), tc.method, srv.URL+tc.path, http.Header{"Content-Type": {tc.ct}}, body)
					r := up.last(t)
					if sha(r.Body) != sha(tc.body) {
						t.Errorf("chunked=%v: upstream body differs (%d bytes, sent %d)", chunked, len(r.Body), len(tc.body))
					}
					if sha(got) != sha(respBody) || res.StatusCode != 200 {
						t.Errorf("chunked=%v: response differs: %d, %d bytes", chunked, res.StatusCode, len(got))
					}
				}
			})
		}
	}
}

func TestRewriteSetsContentLength(t *testing.T) {
	up := newUpstream(t, nil)
	for _, tc := range []struct {
		name string
		out  []byte
	}{
		{"shorter", []byte(`{"messages":[]}`)},
		{"longer", bytes.Repeat([]byte("a"), 100000)},
		{"empty", []byte{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw := RewriterFunc(func(_ context.Context, _ *http.Request, _ protocol.Protocol, body []byte) Outcome {
				return Outcome{Body: tc.out}
			})
			srv, _ := newProxyServer(t, up.URL, Options{Rewriter: rw})
			in := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`
			for _, chunked := range []bool{false, true} {
				var body io.Reader = strings.NewReader(in)
				if chunked {
					body = io.MultiReader(body)
				}
				do(t, rawClient(), "POST", srv.URL+"/v1/messages?beta=true", http.Header{"Content-Type": {"application/json"}}, body)
				r := up.last(t)
				if !bytes.Equal(r.Body, tc.out) {
					t.Errorf("chunked=%v: upstream body %d bytes, want %d", chunked, len(r.Body), len(tc.out))
				}
				if r.ContentLength != int64(len(tc.out)) || len(r.TransferEncoding) != 0 {
					t.Errorf("chunked=%v: upstream Content-Length %d, transfer-encoding %v; want %d", chunked, r.ContentLength, r.TransferEncoding, len(tc.out))
				}
				if cl := r.Header.Get("Content-Length"); len(tc.out) > 0 && cl != strconv.Itoa(len(tc.out)) {
					t.Errorf("Content-Length header %q", cl)
				}
			}
		})
	}
}

func TestCompressedRequestBodies(t *testing.T) {
	up := newUpstream(t, nil)
	plain := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("hello ", 2000) + `"}]}`)
	rewritten := []byte(`{"model":"m","messages":[{"role":"user","content":"short"}]}`)
	var seen atomic.Value
	change := RewriterFunc(func(_ context.Context, _ *http.Request, _ protocol.Protocol, body []byte) Outcome {
		seen.Store(append([]byte(nil), body...))
		return Outcome{Body: rewritten}
	})
	keep := RewriterFunc(func(_ context.Context, _ *http.Request, _ protocol.Protocol, body []byte) Outcome {
		seen.Store(append([]byte(nil), body...))
		return Outcome{Body: body}
	})
	changeSrv, _ := newProxyServer(t, up.URL, Options{Rewriter: change})
	keepSrv, _ := newProxyServer(t, up.URL, Options{Rewriter: keep})
	for _, coding := range []string{"gzip", "br", "zstd", "deflate"} {
		comp := anthropictest.Compress(coding, plain)
		t.Run(coding+"/rewritten", func(t *testing.T) {
			seen.Store([]byte(nil))
			do(t, rawClient(), "POST", changeSrv.URL+"/v1/messages", http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {coding}}, bytes.NewReader(comp))
			if !bytes.Equal(seen.Load().([]byte), plain) {
				t.Error("the Rewriter did not get the decoded body")
			}
			r := up.last(t)
			if !bytes.Equal(r.Body, rewritten) || r.Header.Get("Content-Encoding") != "" || r.ContentLength != int64(len(rewritten)) {
				t.Errorf("upstream got %q (encoding %q, length %d)", r.Body, r.Header.Get("Content-Encoding"), r.ContentLength)
			}
		})
		t.Run(coding+"/unchanged", func(t *testing.T) {
			do(t, rawClient(), "POST", keepSrv.URL+"/v1/messages", http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {coding}}, bytes.NewReader(comp))
			r := up.last(t)
			if sha(r.Body) != sha(comp) || r.Header.Get("Content-Encoding") != coding {
				t.Errorf("unchanged body not forwarded in its original encoding (%d bytes, encoding %q)", len(r.Body), r.Header.Get("Content-Encoding"))
			}
		})
		t.Run(coding+"/corrupt", func(t *testing.T) {
			seen.Store([]byte("untouched"))
			bad := append([]byte{}, comp[:len(comp)/2]...)
			bad = append(bad, bytes.Repeat([]byte{0xff}, 64)...)
			res, _ := do(t, rawClient(), "POST", changeSrv.URL+"/v1/messages", http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {coding}}, bytes.NewReader(bad))
			r := up.last(t)
			if res.StatusCode != 200 || sha(r.Body) != sha(bad) || r.Header.Get("Content-Encoding") != coding {
				t.Errorf("corrupt body: status %d, upstream %d bytes, encoding %q", res.StatusCode, len(r.Body), r.Header.Get("Content-Encoding"))
			}
			if string(seen.Load().([]byte)) != "untouched" {
				t.Error("the Rewriter was called on an undecodable body")
			}
		})
	}
	t.Run("unknown coding", func(t *testing.T) {
		seen.Store([]byte("untouched"))
		body := []byte("\x1f\x9dcompress-coded")
		do(t, rawClient(), "POST", changeSrv.URL+"/v1/messages", http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"compress"}}, bytes.NewReader(body))
		r := up.last(t)
		if !bytes.Equal(r.Body, body) || r.Header.Get("Content-Encoding") != "compress" || string(seen.Load().([]byte)) != "untouched" {
			t.Errorf("unknown coding not passed through untouched")
		}
	})
	t.Run("decompression bomb", func(t *testing.T) {
		small, _ := newProxyServer(t, up.URL, Options{Rewriter: keep, MaxBody: 1 << 20})
		before := len(up.received())
		for _, coding := range []string{"gzip", "br", "zstd", "deflate"} {
			bomb := anthropictest.Compress(coding, make([]byte, 16<<20))
			res, body := do(t, rawClient(), "POST", small.URL+"/v1/messages", http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {coding}}, bytes.NewReader(bomb))
			checkAPIError(t, res, body, http.StatusRequestEntityTooLarge, anthropic.RequestTooLarge, "decompressed")
		}
		if n := len(up.received()); n != before {
			t.Errorf("a bomb reached the upstream")
		}
	})
}

// checkAPIError checks an Anthropic-shaped error from ctxguard.
func checkAPIError(t *testing.T, res *http.Response, body []byte, status int, typ, msgPart string) string {
	t.Helper()
	if res.StatusCode != status {
		t.Errorf("status %d, want %d (%s)", res.StatusCode, status, body)
	}
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if e.Type != "error" || e.Error.Type != typ || !strings.Contains(e.Error.Message, msgPart) ||
		!strings.HasPrefix(e.RequestID, "ctxguard_") || !strings.Contains(e.Error.Message, e.RequestID) {
		t.Errorf("error body %s", body)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
	return e.RequestID
}

// endless produces bytes forever, counting them.
type endless struct{ n atomic.Int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	e.n.Add(int64(len(p)))
	return len(p), nil
}

func TestBodyOverLimit(t *testing.T) {
	up := newUpstream(t, nil)
	const limit = 1 << 20
	rw := &identity{}
	srv, _ := newProxyServer(t, up.URL, Options{Rewriter: rw, MaxBody: limit})

	t.Run("exactly at the limit passes", func(t *testing.T) {
		body := bytes.Repeat([]byte("a"), limit)
		res, _ := do(t, rawClient(), "POST", srv.URL+"/v1/messages", http.Header{"Content-Type": {"application/json"}}, bytes.NewReader(body))
		if res.StatusCode != 200 || len(up.last(t).Body) != limit {
			t.Errorf("status %d", res.StatusCode)
		}
	})
	t.Run("content-length", func(t *testing.T) {
		// Announce 100 MB and send only a little: the proxy must answer
		// from the header alone.
		conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 104857600\r\n\r\n{\"messages\":[")
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		res, err := http.ReadResponse(bufioReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		checkAPIError(t, res, body, http.StatusRequestEntityTooLarge, anthropic.RequestTooLarge, strconv.Itoa(limit))
	})
	t.Run("chunked with bounded memory", func(t *testing.T) {
		src := &endless{}
		var ms0, ms1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", io.LimitReader(src, 256<<20))
		req.Header.Set("Content-Type", "application/json")
		res, err := rawClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		runtime.ReadMemStats(&ms1)
		checkAPIError(t, res, body, http.StatusRequestEntityTooLarge, anthropic.RequestTooLarge, "exceeds")
		if sent := src.n.Load(); sent > 64<<20 {
			t.Errorf("client could send %d MB before the 413", sent>>20)
		}
		if alloc := ms1.TotalAlloc - ms0.TotalAlloc; alloc > 32<<20 {
			t.Errorf("allocated %d MB for a body cut at 1 MB", alloc>>20)
		}
	})
	if n := rw.n(); n != 1 {
		t.Errorf("Rewriter called %d times, want 1 (only for the body within the limit)", n)
	}
}

func TestUpstreamUnreachable(t *testing.T) {
	addr := unusedAddr(t)
	srv, logs := newProxyServer(t, "http://"+addr, Options{Rewriter: &identity{}})
	for _, path := range []string{"/v1/messages", "/v1/models"} {
		res, body := do(t, rawClient(), "POST", srv.URL+path, http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {"sk-secret"}}, strings.NewReader(`{"messages":[]}`))
		id := checkAPIError(t, res, body, http.StatusBadGateway, anthropic.APIError, "upstream http://"+addr+" unreachable")
		if strings.Contains(string(body), "connection refused") {
			t.Errorf("detail leaked to the client: %s", body)
		}
		line := lineWith(logs.String(), id)
		if !strings.Contains(line, "connection refused") || !strings.Contains(line, "status=502") {
			t.Errorf("log line for %s lacks the detail: %q", id, line)
		}
	}
	if strings.Contains(logs.String(), "sk-secret") {
		t.Error("API key logged")
	}
}

func lineWith(log, s string) string {
	for l := range strings.SplitSeq(log, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

func TestUpstreamTimeout(t *testing.T) {
	release := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	srv, logs := newProxyServer(t, up.URL, Options{Rewriter: &identity{}, Timeouts: Timeouts{ResponseHeader: 200 * time.Millisecond}})
	res, body := do(t, rawClient(), "POST", srv.URL+"/v1/messages", http.Header{"Content-Type": {"application/json"}}, strings.NewReader(`{}`))
	id := checkAPIError(t, res, body, http.StatusGatewayTimeout, anthropic.TimeoutError, "upstream "+up.URL+" timed out")
	if line := lineWith(logs.String(), id); !strings.Contains(line, "timeout") {
		t.Errorf("log line lacks the detail: %q", line)
	}
}

func TestRewriterPanicFailsOpen(t *testing.T) {
	up := newUpstream(t, nil)
	rw := RewriterFunc(func(context.Context, *http.Request, protocol.Protocol, []byte) Outcome { panic("boom") })
	srv, logs := newProxyServer(t, up.URL, Options{Rewriter: rw})
	body := []byte(`{"model":"m","messages":[]}`)
	res, _ := do(t, rawClient(), "POST", srv.URL+"/v1/messages", http.Header{"Content-Type": {"application/json"}}, bytes.NewReader(body))
	if res.StatusCode != 200 || !bytes.Equal(up.last(t).Body, body) {
		t.Errorf("status %d, upstream body %q", res.StatusCode, up.last(t).Body)
	}
	if l := lineWith(logs.String(), "rewriter panic"); !strings.Contains(l, "error_id=ctxguard_") || !strings.Contains(l, "boom") {
		t.Errorf("panic not logged with an ID: %q", l)
	}
}

func TestBetaAndResponseHeaders(t *testing.T) {
	up := newUpstream(t, nil)
	rw := RewriterFunc(func(_ context.Context, _ *http.Request, _ protocol.Protocol, body []byte) Outcome {
		return Outcome{Body: body, AddHeader: [][2]string{{"Anthropic-Beta", "context-management-2025-06-27"}, {"anthropic-beta", "thinking-binding-controls-2026-08-01"}},
			RespHeader: http.Header{"X-Ctxguard-Saved": {"123"}, "x-ctxguard-passes": {"compress"}, "Set-Cookie": {"no"}}}
	})
	srv, _ := newProxyServer(t, up.URL, Options{Rewriter: rw})
	for _, tc := range []struct {
		name string
		in   []string
		want []string
	}{
		{"appended once", []string{"claude-code-20250219,context-management-2025-06-27"}, []string{"claude-code-20250219,context-management-2025-06-27,thinking-binding-controls-2026-08-01"}},
		{"absent", nil, []string{"context-management-2025-06-27,thinking-binding-controls-2026-08-01"}},
		{"two lines", []string{"a", "b"}, []string{"a", "b,context-management-2025-06-27,thinking-binding-controls-2026-08-01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {"application/json"}}
			if tc.in != nil {
				h["Anthropic-Beta"] = tc.in
			}
			res, _ := do(t, rawClient(), "POST", srv.URL+"/v1/messages", h, strings.NewReader(`{}`))
			if diff := cmp.Diff(tc.want, up.last(t).Header["Anthropic-Beta"]); diff != "" {
				t.Errorf("anthropic-beta (-want +got)\n%s", diff)
			}
			if res.Header.Get("X-Ctxguard-Saved") != "123" || res.Header.Get("X-Ctxguard-Passes") != "compress" || res.Header.Get("Set-Cookie") != "" {
				t.Errorf("response headers %v", res.Header)
			}
		})
	}
}

func TestRewriterOnlyForMessages(t *testing.T) {
	up := newUpstream(t, nil)
	rw := &identity{}
	srv, _ := newProxyServer(t, up.URL, Options{Rewriter: rw})
	for _, tc := range []struct {
		method, path, ct string
		calls            int
	}{
		{"POST", "/v1/messages", "application/json", 1},
		{"POST", "/v1/messages?beta=true&x=y", "application/json; charset=utf-8", 1},
		{"POST", "/v1/messages", "text/plain", 0},
		{"POST", "/v1/messages", "", 0},
		{"PUT", "/v1/messages", "application/json", 0},
		{"GET", "/v1/messages", "application/json", 0},
		{"POST", "/v1/messages/count_tokens", "application/json", 0},
		{"POST", "/v1/messages/", "application/json", 0},
		{"POST", "/v1/complete", "application/json", 0},
	} {
		before := rw.n()
		h := http.Header{}
		if tc.ct != "" {
			h.Set("Content-Type", tc.ct)
		}
		body := `{"model":"m","messages":[]}`
		do(t, rawClient(), tc.method, srv.URL+tc.path, h, strings.NewReader(body))
		if got := rw.n() - before; got != tc.calls {
			t.Errorf("%s %s %q: Rewriter called %d times, want %d", tc.method, tc.path, tc.ct, got, tc.calls)
		}
		if r := up.last(t); string(r.Body) != body || r.Method != tc.method {
			t.Errorf("%s %s: upstream got %s %q", tc.method, tc.path, r.Method, r.Body)
		}
	}
}

func TestExtraHandler(t *testing.T) {
	up := newUpstream(t, nil)
	extra := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("extra " + r.URL.Path)) })
	with, _ := newProxyServer(t, up.URL, Options{Extra: extra})
	without, _ := newProxyServer(t, up.URL, Options{})
	_, body := do(t, rawClient(), "GET", with.URL+"/ctxguard/blob/abc", nil, nil)
	if string(body) != "extra /ctxguard/blob/abc" {
		t.Errorf("extra got %q", body)
	}
	res, body := do(t, rawClient(), "GET", without.URL+"/ctxguard/blob/abc", nil, nil)
	checkAPIError(t, res, body, http.StatusNotFound, anthropic.NotFoundError, "no such endpoint")
	if n := len(up.received()); n != 0 {
		t.Errorf("/ctxguard/ paths reached the upstream %d times", n)
	}
}

func TestUpstreamPathPrefix(t *testing.T) {
	up := newUpstream(t, nil)
	srv, _ := newProxyServer(t, up.URL+"/api/anthropic/?k=v", Options{})
	do(t, rawClient(), "GET", srv.URL+"/v1/models/claude%2Fx?limit=5", nil, nil)
	r := up.last(t)
	if r.Path != "/api/anthropic/v1/models/claude/x" || r.RawQuery != "k=v&limit=5" {
		t.Errorf("upstream got path %q query %q", r.Path, r.RawQuery)
	}
}

func TestNewValidates(t *testing.T) {
	for _, u := range []string{"ftp://x", "http://", "/relative"} {
		pu, _ := url.Parse(u)
		if _, err := New(Options{Upstream: pu}); err == nil {
			t.Errorf("New accepted upstream %q", u)
		}
	}
	p, err := New(Options{})
	if err != nil || p.Upstream() != DefaultUpstream {
		t.Errorf("default upstream %q, %v", p.Upstream(), err)
	}
	pu, _ := url.Parse("https://user:pw@example.com/x")
	p, _ = New(Options{Upstream: pu})
	if strings.Contains(p.Upstream(), "pw") {
		t.Errorf("credentials in upstream name %q", p.Upstream())
	}
}
