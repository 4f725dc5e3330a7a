package proxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/protocol"
)

// received is one request as an upstream saw it.
type received struct {
	Method, Path, RawQuery, Host string
	Header                       http.Header
	Body                         []byte
	ContentLength                int64
	TransferEncoding             []string
}

// upstream is a recording httptest server with a replaceable handler.
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []received
	handler func(w http.ResponseWriter, r *http.Request, body []byte)
}

func newUpstream(t testing.TB, h func(w http.ResponseWriter, r *http.Request, body []byte)) *upstream {
	u := &upstream{handler: h}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, received{r.Method, r.URL.Path, r.URL.RawQuery, r.Host, r.Header.Clone(), body, r.ContentLength, r.TransferEncoding})
		u.mu.Unlock()
		if u.handler != nil {
			u.handler(w, r, body)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) received() []received {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]received(nil), u.reqs...)
}

func (u *upstream) last(t testing.TB) received {
	t.Helper()
	rs := u.received()
	if len(rs) == 0 {
		t.Fatal("upstream received nothing")
	}
	return rs[len(rs)-1]
}

// logBuffer collects log output safely across goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// newProxyServer starts a Proxy in front of upstreamURL.
func newProxyServer(t testing.TB, upstreamURL string, opts Options) (*httptest.Server, *logBuffer) {
	t.Helper()
	_, s, logs := newProxy(t, upstreamURL, opts)
	return s, logs
}

// newProxy is newProxyServer, with the Proxy.
func newProxy(t testing.TB, upstreamURL string, opts Options) (*Proxy, *httptest.Server, *logBuffer) {
	t.Helper()
	u, err := url.Parse(upstreamURL)
	if err != nil {
		t.Fatal(err)
	}
	opts.Upstream = u
	if opts.Protocols == nil {
		opts.Protocols = []protocol.Protocol{anthropic.Protocol}
	}
	logs := &logBuffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(p)
	t.Cleanup(func() { s.Close(); p.Close() })
	return p, s, logs
}

// rawClient never adds or decodes anything on its own.
func rawClient() *http.Client {
	return &http.Client{
		Transport:     &http.Transport{DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func do(t testing.TB, c *http.Client, method, u string, h http.Header, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, b
}

// identity is a Rewriter that changes nothing and counts its calls.
type identity struct {
	mu    sync.Mutex
	calls int
}

func (i *identity) Rewrite(_ context.Context, _ *http.Request, _ protocol.Protocol, body []byte) Outcome {
	i.mu.Lock()
	i.calls++
	i.mu.Unlock()
	return Outcome{Body: body}
}

func (i *identity) n() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.calls
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }
