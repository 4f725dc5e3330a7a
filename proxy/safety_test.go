package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/protocol"
)

// dialRaw opens a raw connection to a test server; every wait on it is
// bounded.
func dialRaw(t testing.TB, srvURL string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srvURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	return conn
}

// readRaw reads one response from a raw connection.
func readRaw(t testing.TB, br *bufio.Reader) (*http.Response, []byte) {
	t.Helper()
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading the response body: %v", err)
	}
	return res, body
}

// unusedAddr returns a loopback address nothing listens on.
func unusedAddr(t testing.TB) string {
	// On 127.0.0.2, where no test server listens: a port just freed on
	// 127.0.0.1 may be the next httptest server's, and the proxy would
	// then forward to itself.
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// holdingUpstream accepts connections and never reads from them. They are
// closed at cleanup; register it after the proxy's so it runs first, and
// a proxy that waits on them forever is freed.
func holdingUpstream(t testing.TB) (url string, cleanup func()) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	return "http://" + l.Addr().String(), func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}
}

// waitFor polls cond for up to 30 seconds.
func waitFor(cond func() bool) bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// paddedBody is a JSON body of exactly n bytes.
func paddedBody(n int) []byte {
	b := []byte(`{"messages":[],"pad":"`)
	b = append(b, bytes.Repeat([]byte("p"), n-len(b)-2)...)
	return append(b, `"}`...)
}

// TestSlowReaderGetsEveryByte: a client that stops reading for several
// idle periods while a long answer streams, then reads on, gets all of
// it: time spent blocked on the client is not upstream silence.
func TestSlowReaderGetsEveryByte(t *testing.T) {
	answer := make([]byte, 24<<20) // more than the socket buffers hold
	_, _ = rand.NewChaCha8([32]byte{1}).Read(answer)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		for b := answer; len(b) > 0; {
			n := min(len(b), 32<<10)
			if _, err := w.Write(b[:n]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			b = b[n:]
		}
	})
	// Long enough that a busy machine (the race detector, packages
	// tested in parallel) never starves the upstream that long.
	const idle = time.Second
	srv, logs := newProxyServer(t, up.URL, Options{Timeouts: Timeouts{Idle: idle}})
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", strings.NewReader(streamReq))
	req.Header = jsonHeader()
	c := rawClient()
	c.Timeout = 60 * time.Second
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	first := make([]byte, 1)
	if _, err := io.ReadFull(res.Body, first); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * idle) // the client reads nothing; the proxy's writes block
	rest, err := io.ReadAll(res.Body)
	if got := append(first, rest...); err != nil || sha(got) != sha(answer) {
		t.Errorf("client got %d of %d bytes (%v)", len(got), len(answer), err)
	}
	if strings.Contains(logs.String(), "sent nothing") {
		t.Errorf("a slow client was taken for an idle upstream:\n%s", logs.String())
	}
}

// TestClientWriteTimeout: a client that takes nothing of the answer for
// ClientWrite has it cut, the upstream request is cancelled, and the log
// blames the client.
func TestClientWriteTimeout(t *testing.T) {
	cancelled := make(chan struct{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := bytes.Repeat([]byte("data: x\n\n"), 4<<10)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				break
			}
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	})
	srv, logs := newProxyServer(t, up.URL, Options{Timeouts: Timeouts{ClientWrite: 200 * time.Millisecond, Idle: 5 * time.Second}})
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", strings.NewReader(streamReq))
	req.Header = jsonHeader()
	res, err := rawClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream request was not cancelled")
	}
	if _, err := io.Copy(io.Discard, res.Body); err == nil {
		t.Error("the answer ended cleanly; want it cut")
	}
	// The client may see the cut (its connection's failed write) before
	// the handler has logged it.
	l := ""
	for i := 0; i < 500 && l == ""; i++ {
		if l = lineWith(logs.String(), "response cut"); l == "" {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !strings.Contains(l, "client stopped reading") {
		t.Errorf("the cut does not blame the client: %q", l)
	}
	if strings.Contains(logs.String(), "sent nothing") {
		t.Errorf("a stalled client was logged as an idle upstream:\n%s", logs.String())
	}
}

// TestBodyReadTimeouts: a client that stalls mid-body, or sends it below
// the minimum rate, gets 408 and the log says which, on the buffered and
// the streamed path, with and without Content-Length.
func TestBodyReadTimeouts(t *testing.T) {
	up := newUpstream(t, nil)
	for _, tc := range []struct {
		name, path string
		chunked    bool
		trickle    bool // send a little often (too slowly); else stall
		want       string
	}{
		{"messages/stalled", "/v1/messages", false, false, "stopped sending the request body"},
		{"messages/stalled chunked", "/v1/messages", true, false, "stopped sending the request body"},
		{"messages/too slow", "/v1/messages", false, true, "too slowly"},
		{"messages/too slow chunked", "/v1/messages", true, true, "too slowly"},
		{"passthrough/stalled", "/v1/messages/count_tokens", false, false, "stopped sending the request body"},
		{"passthrough/stalled chunked", "/v1/messages/count_tokens", true, false, "stopped sending the request body"},
		{"passthrough/too slow", "/v1/messages/count_tokens", false, true, "too slowly"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// 3000 bytes must arrive within 1s + 3000/1000 s, and no
			// silence may last 1s. The bounds are far apart, so a loaded
			// machine that delays the trickle does not make one look like
			// the other.
			srv, logs := newProxyServer(t, up.URL, Options{Rewriter: &identity{},
				Timeouts: Timeouts{BodyRead: time.Second, BodyMinRate: 1000}})
			conn := dialRaw(t, srv.URL)
			head := "POST " + tc.path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
			piece := func(s string) string { return s }
			if tc.chunked {
				head += "Transfer-Encoding: chunked\r\n\r\n"
				piece = func(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }
			} else {
				head += "Content-Length: 3000\r\n\r\n"
			}
			// 1000 bytes first: a stall then breaks the silence bound (1s)
			// well before the rate bound (1s + 1000/1000 s for a chunked body).
			if _, err := io.WriteString(conn, head+piece(`{"messages":[`+strings.Repeat(" ", 1000))); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			if tc.trickle { // 200 bytes/s, never silent for long
				go func() {
					for {
						select {
						case <-stop:
							return
						case <-time.After(50 * time.Millisecond):
						}
						if _, err := io.WriteString(conn, piece("          ")); err != nil {
							return
						}
					}
				}()
			}
			res, body := readRaw(t, bufio.NewReader(conn))
			id := checkAPIError(t, res, body, http.StatusRequestTimeout, anthropic.InvalidRequestError, tc.want)
			if l := lineWith(logs.String(), id); !strings.Contains(l, tc.want) || !strings.Contains(l, "arrived in") {
				t.Errorf("log line %q", l)
			}
		})
	}
}

// TestBodyDeadlineCleared: once the body has been read, its read deadline
// is gone: an answer that streams for many BodyRead periods completes
// (a stale deadline would fire in net/http's background read and cancel
// the request).
func TestBodyDeadlineCleared(t *testing.T) {
	const last = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 8 {
			fmt.Fprintf(w, "event: ping\ndata: {\"n\":%d}\n\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(60 * time.Millisecond)
		}
		_, _ = io.WriteString(w, last)
	})
	srv, _ := newProxyServer(t, up.URL, Options{Rewriter: &identity{}, Timeouts: Timeouts{BodyRead: 200 * time.Millisecond}})
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		for _, chunked := range []bool{false, true} {
			var body io.Reader = strings.NewReader(streamReq)
			if chunked {
				body = io.MultiReader(body)
			}
			req, _ := http.NewRequest("POST", srv.URL+path, body)
			req.Header = jsonHeader()
			res, err := rawClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil || !strings.HasSuffix(string(got), last) {
				t.Errorf("%s chunked=%v: the answer was cut after %d bytes (%v)", path, chunked, len(got), err)
			}
		}
	}
}

// TestUpstreamNotTakingBody: an upstream that accepts the connection but
// never reads the body gets the request cancelled after UpstreamWrite,
// and the client a 504 saying so.
func TestUpstreamNotTakingBody(t *testing.T) {
	upURL, closeUp := holdingUpstream(t)
	srv, logs := newProxyServer(t, upURL, Options{Rewriter: &identity{}, Timeouts: Timeouts{UpstreamWrite: 200 * time.Millisecond}})
	t.Cleanup(closeUp)
	body := paddedBody(16 << 20) // more than the socket buffers hold
	for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
		t.Run(path, func(t *testing.T) {
			c := rawClient()
			c.Timeout = 30 * time.Second
			res, got := do(t, c, "POST", srv.URL+path, jsonHeader(), bytes.NewReader(body))
			id := checkAPIError(t, res, got, http.StatusGatewayTimeout, anthropic.TimeoutError, "did not take the request body")
			if l := lineWith(logs.String(), id); !strings.Contains(l, "read nothing of the body for 200ms") {
				t.Errorf("log line %q", l)
			}
		})
	}
}

// TestSlowClientIsNotSlowUpstream: while the transport waits on a client
// that sends its body slowly, the upstream is not blamed for taking
// nothing.
func TestSlowClientIsNotSlowUpstream(t *testing.T) {
	up := newUpstream(t, nil)
	srv, _ := newProxyServer(t, up.URL, Options{Timeouts: Timeouts{UpstreamWrite: 100 * time.Millisecond}})
	body := paddedBody(3000)
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages/count_tokens", &slowReader{data: body, piece: 1000, pause: 400 * time.Millisecond})
	req.ContentLength = int64(len(body))
	req.Header = jsonHeader()
	res, err := rawClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || !bytes.Equal(up.last(t).Body, body) {
		t.Errorf("status %d; upstream got %d of %d bytes", res.StatusCode, len(up.last(t).Body), len(body))
	}
}

// TestMaxBuffered: stalled big uploads cannot hold more than MaxBuffered;
// the requests that do not fit get 529 with Retry-After at once (and are
// not cut off either), and once the uploads end, their reservations are
// free again.
func TestMaxBuffered(t *testing.T) {
	up := newUpstream(t, nil)
	const maxBody, maxBuf, uploads = 1 << 20, 4 << 20, 6
	p, srv, _ := newProxy(t, up.URL, Options{Rewriter: &identity{}, MaxBody: maxBody, MaxBuffered: maxBuf})
	body := paddedBody(maxBody)
	var conns []net.Conn
	for range uploads {
		c := dialRaw(t, srv.URL)
		if _, err := fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:100]); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	if !waitFor(func() bool { return p.mem.used.Load() == maxBuf }) {
		t.Fatalf("%d bytes reserved by %d stalled uploads, want %d", p.mem.used.Load(), uploads, maxBuf)
	}
	for _, chunked := range []bool{false, true} {
		var b io.Reader = strings.NewReader(streamReq)
		if chunked {
			b = io.MultiReader(b)
		}
		res, got := do(t, rawClient(), "POST", srv.URL+"/v1/messages", jsonHeader(), b)
		checkAPIError(t, res, got, 529, anthropic.OverloadedError, "retry")
		if res.Header.Get("Retry-After") == "" {
			t.Errorf("chunked=%v: no Retry-After on 529", chunked)
		}
	}
	if used := p.mem.used.Load(); used > maxBuf {
		t.Errorf("%d bytes buffered, over the cap of %d", used, maxBuf)
	}
	var statuses []int
	for _, c := range conns {
		if _, err := c.Write(body[100:]); err != nil {
			t.Fatal(err)
		}
		res, _ := readRaw(t, bufio.NewReader(c))
		statuses = append(statuses, res.StatusCode)
	}
	n200, n529 := 0, 0
	for _, s := range statuses {
		switch s {
		case 200:
			n200++
		case 529:
			n529++
		}
	}
	if n200 != maxBuf/maxBody || n529 != uploads-maxBuf/maxBody {
		t.Errorf("stalled uploads got %v; want %d×200 and %d×529", statuses, maxBuf/maxBody, uploads-maxBuf/maxBody)
	}
	if !waitFor(func() bool { return p.mem.used.Load() == 0 }) {
		t.Fatalf("%d bytes still reserved after every upload ended", p.mem.used.Load())
	}
	if res, _ := do(t, rawClient(), "POST", srv.URL+"/v1/messages", jsonHeader(), bytes.NewReader(body)); res.StatusCode != 200 {
		t.Errorf("after the uploads: status %d", res.StatusCode)
	}
}

// TestMaxBufferedFailsOpen: when the body fits but its decoded copy or the
// room for its rewrite does not, the body goes upstream untouched and the
// answer says why.
func TestMaxBufferedFailsOpen(t *testing.T) {
	up := newUpstream(t, nil)
	plain := paddedBody(600 << 10)
	for _, tc := range []struct {
		name   string
		coding string
		body   []byte
	}{
		{"decoded copy", "gzip", anthropictest.Compress("gzip", plain)},
		{"rewrite output", "", plain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rw := &identity{}
			p, srv, logs := newProxy(t, up.URL, Options{Rewriter: rw, MaxBuffered: 1 << 20})
			h := jsonHeader()
			if tc.coding != "" {
				h.Set("Content-Encoding", tc.coding)
			}
			res, _ := do(t, rawClient(), "POST", srv.URL+"/v1/messages", h, bytes.NewReader(tc.body))
			got := up.last(t)
			if res.StatusCode != 200 || sha(got.Body) != sha(tc.body) || got.Header.Get("Content-Encoding") != tc.coding {
				t.Errorf("status %d; upstream got %d bytes (sent %d), encoding %q", res.StatusCode, len(got.Body), len(tc.body), got.Header.Get("Content-Encoding"))
			}
			if s := res.Header.Get("X-Ctxguard-Skipped"); s != "overloaded" {
				t.Errorf("X-Ctxguard-Skipped %q", s)
			}
			if rw.n() != 0 {
				t.Error("the Rewriter ran without room for its output")
			}
			if l := lineWith(logs.String(), "cap reached"); !strings.Contains(l, "reason=") {
				t.Errorf("log line %q", l)
			}
			if !waitFor(func() bool { return p.mem.used.Load() == 0 }) {
				t.Errorf("%d bytes still reserved", p.mem.used.Load())
			}
		})
	}
}

// TestBufferedReleasedOnEveryPath: whatever way an exchange ends, its
// reservation is given back.
func TestBufferedReleasedOnEveryPath(t *testing.T) {
	ok := newUpstream(t, nil)
	streaming := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		for r.Context().Err() == nil {
			_, _ = io.WriteString(w, "event: ping\ndata: {}\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(5 * time.Millisecond)
		}
	})
	unreachable := "http://" + unusedAddr(t)
	holding, closeHolding := holdingUpstream(t)
	small := paddedBody(2000)
	post := func(body io.Reader, h http.Header) func(t *testing.T, url string) int {
		return func(t *testing.T, url string) int {
			if h == nil {
				h = jsonHeader()
			}
			res, _ := do(t, rawClient(), "POST", url+"/v1/messages", h, body)
			return res.StatusCode
		}
	}
	raw := func(req string) func(t *testing.T, url string) int {
		return func(t *testing.T, url string) int {
			c := dialRaw(t, url)
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			res, _ := readRaw(t, bufio.NewReader(c))
			return res.StatusCode
		}
	}
	for _, tc := range []struct {
		name     string
		upstream string
		opts     Options
		run      func(t *testing.T, url string) int
		status   int // 0: none expected
	}{
		{name: "unchanged", upstream: ok.URL, opts: Options{Rewriter: &identity{}}, run: post(bytes.NewReader(small), nil), status: 200},
		{name: "rewritten", upstream: ok.URL, opts: Options{Rewriter: RewriterFunc(func(context.Context, *http.Request, protocol.Protocol, []byte) Outcome {
			return Outcome{Body: []byte(`{}`)}
		})}, run: post(bytes.NewReader(small), nil), status: 200},
		{name: "rewriter panics", upstream: ok.URL, opts: Options{Rewriter: RewriterFunc(func(context.Context, *http.Request, protocol.Protocol, []byte) Outcome { panic("boom") })},
			run: post(bytes.NewReader(small), nil), status: 200},
		{name: "over max_body", upstream: ok.URL, opts: Options{MaxBody: 1000}, run: post(bytes.NewReader(small), nil), status: 413},
		{name: "over max_body chunked", upstream: ok.URL, opts: Options{MaxBody: 1000}, run: post(io.MultiReader(bytes.NewReader(small)), nil), status: 413},
		{name: "decompression bomb", upstream: ok.URL, opts: Options{MaxBody: 1 << 20, Rewriter: &identity{}},
			run: post(bytes.NewReader(anthropictest.Compress("gzip", make([]byte, 16<<20))), http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}), status: 413},
		{name: "chunked body outgrows max_buffered", upstream: ok.URL, opts: Options{MaxBuffered: 100 << 10},
			run: post(io.MultiReader(bytes.NewReader(paddedBody(300<<10))), nil), status: 529},
		{name: "decoded copy does not fit", upstream: ok.URL, opts: Options{MaxBuffered: 1 << 20, Rewriter: &identity{}},
			run: post(bytes.NewReader(anthropictest.Compress("gzip", paddedBody(2<<20))), http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}), status: 200},
		{name: "output does not fit", upstream: ok.URL, opts: Options{MaxBuffered: 1 << 20, Rewriter: &identity{}}, run: post(bytes.NewReader(paddedBody(600<<10)), nil), status: 200},
		{name: "body stalls", upstream: ok.URL, opts: Options{Timeouts: Timeouts{BodyRead: 100 * time.Millisecond}},
			run: raw("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"), status: 408},
		{name: "client leaves mid-body", upstream: ok.URL, run: func(t *testing.T, url string) int {
			c := dialRaw(t, url)
			_, _ = io.WriteString(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
			time.Sleep(50 * time.Millisecond)
			c.Close()
			return 0
		}},
		{name: "upstream unreachable", upstream: unreachable, run: post(bytes.NewReader(small), nil), status: 502},
		{name: "upstream takes no body", upstream: holding, opts: Options{Timeouts: Timeouts{UpstreamWrite: 100 * time.Millisecond}},
			run: post(bytes.NewReader(paddedBody(16<<20)), nil), status: 504},
		{name: "client leaves mid-answer", upstream: streaming.URL, run: func(t *testing.T, url string) int {
			req, _ := http.NewRequest("POST", url+"/v1/messages", bytes.NewReader(small))
			req.Header = jsonHeader()
			res, err := rawClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadFull(res.Body, make([]byte, 100))
			res.Body.Close()
			return res.StatusCode
		}, status: 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, srv, _ := newProxy(t, tc.upstream, tc.opts)
			if tc.upstream == holding {
				t.Cleanup(closeHolding) // before the proxy's own cleanup
			}
			if got := tc.run(t, srv.URL); got != tc.status {
				t.Errorf("status %d, want %d", got, tc.status)
			}
			if !waitFor(func() bool { return p.mem.used.Load() == 0 }) {
				t.Errorf("%d bytes still reserved after the exchange", p.mem.used.Load())
			}
		})
	}
}

// TestEarlyAnswerReachesClient: a client that writes its whole body before
// it reads anything still gets the answer ctxguard gave before reading
// the body, whatever the reason.
func TestEarlyAnswerReachesClient(t *testing.T) {
	up := newUpstream(t, nil)
	unreachable := "http://" + unusedAddr(t)
	const token = "the-right-token-0123456789"
	big := paddedBody(33 << 20) // over DefaultMaxBody and the socket buffers
	for _, tc := range []struct {
		name, upstream, path string
		opts                 Options
		chunked              bool
		size                 int
		status               int
		typ, msg             string
	}{
		{"413 over max_body", up.URL, "/v1/messages", Options{}, false, len(big), 413, anthropic.RequestTooLarge, "exceeds"},
		{"413 over max_body chunked", up.URL, "/v1/messages", Options{}, true, len(big), 413, anthropic.RequestTooLarge, "exceeds"},
		{"401 no token", up.URL, "/v1/messages", Options{AuthToken: token}, false, len(big), 401, anthropic.AuthenticationError, "X-Ctxguard-Token"},
		{"529 over max_buffered", up.URL, "/v1/messages", Options{MaxBuffered: 16 << 20}, false, 20 << 20, 529, anthropic.OverloadedError, "retry"},
		{"502 upstream unreachable", unreachable, "/v1/messages/count_tokens", Options{}, false, len(big), 502, anthropic.APIError, "unreachable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv, _ := newProxy(t, tc.upstream, tc.opts)
			big := append(big[:tc.size-2:tc.size-2], `"}`...)
			conn := dialRaw(t, srv.URL)
			req := "POST " + tc.path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
			var err error
			if tc.chunked {
				_, err = fmt.Fprintf(conn, "%sTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", req, len(big), big)
			} else {
				_, err = fmt.Fprintf(conn, "%sContent-Length: %d\r\n\r\n%s", req, len(big), big)
			}
			if err != nil {
				t.Fatalf("writing the whole request: %v", err)
			}
			res, body := readRaw(t, bufio.NewReader(conn))
			checkAPIError(t, res, body, tc.status, tc.typ, tc.msg)
		})
	}
	t.Run("expect 100-continue", func(t *testing.T) {
		// The client waits for the go-ahead: the answer comes without it,
		// and the proxy does not wait for a body that will not come.
		_, srv, logs := newProxy(t, up.URL, Options{})
		conn := dialRaw(t, srv.URL)
		fmt.Fprintf(conn, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", len(big))
		br := bufio.NewReader(conn)
		res, body := readRaw(t, br)
		checkAPIError(t, res, body, 413, anthropic.RequestTooLarge, "exceeds")
		if n, err := br.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("after the answer: %d bytes, %v; want the connection closed", n, err)
		}
		if strings.Contains(logs.String(), "request body discarded") {
			t.Errorf("the proxy waited for the body:\n%s", logs.String())
		}
	})
}

// pythonClient sends a request the way Python's http.client does (the
// whole body, then it reads) and prints what it got as JSON.
const pythonClient = `
import http.client, json, sys
host, port, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
body = b'{"messages":[],"pad":"' + b'p' * (33 << 20) + b'"}'
headers = {"Content-Type": "application/json"}
if token:
    headers["X-Ctxguard-Token"] = token
conn = http.client.HTTPConnection(host, port, timeout=60)
conn.request("POST", "/v1/messages", body=body, headers=headers)
res = conn.getresponse()
json.dump({"status": res.status, "content_type": res.getheader("Content-Type"), "body": res.read().decode()}, sys.stdout)
`

func TestEarlyAnswerPythonClient(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed for this test: %v", err)
	}
	up := newUpstream(t, nil)
	for _, tc := range []struct {
		name, token string
		opts        Options
		status      int
		typ, msg    string
	}{
		{"413", "", Options{}, 413, anthropic.RequestTooLarge, "exceeds"},
		{"401", "a-wrong-token", Options{AuthToken: "the-right-token-0123456789"}, 401, anthropic.AuthenticationError, "X-Ctxguard-Token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv, _ := newProxy(t, up.URL, tc.opts)
			host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, python, "-c", pythonClient, host, port, tc.token)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("python client: %v\n%s", err, stderr.String())
			}
			var got struct {
				Status      int    `json:"status"`
				ContentType string `json:"content_type"`
				Body        string `json:"body"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("python client printed %q: %v", out, err)
			}
			res := &http.Response{StatusCode: got.Status, Header: http.Header{"Content-Type": {got.ContentType}}}
			checkAPIError(t, res, []byte(got.Body), tc.status, tc.typ, tc.msg)
		})
	}
}

// TestAuthToken: with a token configured every request must carry it;
// the token header never goes upstream nor into the log.
func TestAuthToken(t *testing.T) {
	const token = "s3cret-token-0123456789"
	up := newUpstream(t, nil)
	extra := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "local") })
	srv, logs := newProxyServer(t, up.URL, Options{AuthToken: token, Extra: extra, Rewriter: &identity{}})
	open, openLogs := newProxyServer(t, up.URL, Options{Rewriter: &identity{}})
	for _, tc := range []struct {
		name, srv, method, path string
		tokens                  []string
		status                  int
		reaches                 bool // the upstream gets the request
	}{
		{"messages without a token", srv.URL, "POST", "/v1/messages", nil, 401, false},
		{"messages with a wrong token", srv.URL, "POST", "/v1/messages", []string{"s3cret-token-012345678X"}, 401, false},
		{"messages with a shorter token", srv.URL, "POST", "/v1/messages", []string{"s3cret"}, 401, false},
		{"messages with the token twice", srv.URL, "POST", "/v1/messages", []string{token, token}, 401, false},
		{"messages with the token", srv.URL, "POST", "/v1/messages", []string{token}, 200, true},
		{"passthrough with the token", srv.URL, "GET", "/v1/models", []string{token}, 200, true},
		{"passthrough without a token", srv.URL, "GET", "/v1/models", nil, 401, false},
		{"local without a token", srv.URL, "GET", "/ctxguard/v1/stats", nil, 401, false},
		{"local with the token", srv.URL, "GET", "/ctxguard/v1/stats", []string{token}, 200, false},
		{"no token configured, header sent", open.URL, "POST", "/v1/messages", []string{token}, 200, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(up.received())
			h := jsonHeader()
			h["X-Ctxguard-Token"] = tc.tokens
			var body io.Reader
			if tc.method == "POST" {
				body = strings.NewReader(`{"messages":[]}`)
			}
			res, got := do(t, rawClient(), tc.method, tc.srv+tc.path, h, body)
			if tc.status == 401 {
				checkAPIError(t, res, got, 401, anthropic.AuthenticationError, "X-Ctxguard-Token")
			} else if res.StatusCode != tc.status {
				t.Errorf("status %d, want %d", res.StatusCode, tc.status)
			}
			rs := up.received()
			if reached := len(rs) > before; reached != tc.reaches {
				t.Fatalf("reached the upstream: %v, want %v", reached, tc.reaches)
			}
			if tc.reaches {
				if v, ok := rs[len(rs)-1].Header["X-Ctxguard-Token"]; ok {
					t.Errorf("the upstream got X-Ctxguard-Token %q", v)
				}
			}
		})
	}
	for _, l := range []string{logs.String(), openLogs.String()} {
		if strings.Contains(l, "s3cret") {
			t.Errorf("a token in the log:\n%s", l)
		}
	}
}

// TestLocalAuth: with a token, Options.LocalAuth admits local requests
// that carry no token header, and only those: never an API path, never
// one with a wrong token header. A browser's GET of a page it does not
// admit is sent to Options.SignIn; an API call or a blob gets 401.
func TestLocalAuth(t *testing.T) {
	const token = "s3cret-token-0123456789"
	up := newUpstream(t, nil)
	extra := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "local") })
	admit := func(r *http.Request) bool { return r.Header.Get("Cookie") == "ok=1" }
	srv, _ := newProxyServer(t, up.URL, Options{AuthToken: token, Extra: extra, Rewriter: &identity{}, LocalAuth: admit, SignIn: "/ctxguard/signin"})
	html := "text/html,application/xhtml+xml"
	for _, tc := range []struct {
		name, method, path, cookie, accept string
		token                              []string
		status                             int
		location                           string
	}{
		{"admitted", "GET", "/ctxguard/v1/stats", "ok=1", "", nil, 200, ""},
		{"admitted page", "GET", "/ctxguard/", "ok=1", html, nil, 200, ""},
		{"admitted, but a wrong token header", "GET", "/ctxguard/v1/stats", "ok=1", "", []string{"wrong"}, 401, ""},
		{"admitted cookie on the model API", "POST", "/v1/messages", "ok=1", "", nil, 401, ""},
		{"not admitted, API", "GET", "/ctxguard/api/overview", "", html, nil, 401, ""},
		{"not admitted, blob", "GET", "/ctxguard/v1/blobs/abcdefghijklm", "", html, nil, 401, ""},
		{"not admitted, metrics", "GET", "/metrics", "", html, nil, 401, ""},
		{"not admitted, page, browser", "GET", "/ctxguard/config", "", html, nil, 303, "/ctxguard/signin"},
		{"not admitted, page, not a browser", "GET", "/ctxguard/config", "", "*/*", nil, 401, ""},
		{"not admitted, page, POST", "POST", "/ctxguard/config", "", html, nil, 401, ""},
		{"the token", "GET", "/ctxguard/config", "", html, []string{token}, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := jsonHeader()
			if tc.cookie != "" {
				h.Set("Cookie", tc.cookie)
			}
			if tc.accept != "" {
				h.Set("Accept", tc.accept)
			}
			h["X-Ctxguard-Token"] = tc.token
			res, _ := do(t, rawClient(), tc.method, srv.URL+tc.path, h, strings.NewReader(`{"messages":[]}`))
			if res.StatusCode != tc.status || res.Header.Get("Location") != tc.location {
				t.Errorf("%d to %q, want %d to %q", res.StatusCode, res.Header.Get("Location"), tc.status, tc.location)
			}
		})
	}
}

// TestLocalUnreadBody: a local endpoint that answers a POST without
// reading its body (405, 403) leaves the connection usable for the next
// request. (Before: with full duplex on, net/http panicked reading the
// next request and reset the connection.)
func TestLocalUnreadBody(t *testing.T) {
	up := newUpstream(t, nil)
	extra := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusMethodNotAllowed) })
	srv, _ := newProxyServer(t, up.URL, Options{Extra: extra, Rewriter: &identity{}})
	c := rawClient()
	for i := range 3 {
		res, _ := do(t, c, "POST", srv.URL+"/ctxguard/api/overview", jsonHeader(), strings.NewReader(strings.Repeat("x", 10_000)))
		if res.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("request %d: %d", i, res.StatusCode)
		}
	}
}

// TestNoContentTypeInvented: an answer without Content-Type reaches the
// client without one (net/http would sniff one).
func TestNoContentTypeInvented(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header()["Content-Type"] = nil // this test server must not sniff either
		if r.URL.Query().Has("stream") {
			w.Header().Set("Transfer-Encoding", "chunked")
			w.(http.Flusher).Flush()
		}
		_, _ = io.WriteString(w, "<html><body>sniff me</body></html>")
	})
	srv, _ := newProxyServer(t, up.URL, Options{Rewriter: &identity{}})
	for _, path := range []string{"/v1/messages", "/v1/messages?stream", "/v1/other", "/v1/other?stream"} {
		res, body := do(t, rawClient(), "POST", srv.URL+path, jsonHeader(), strings.NewReader(`{}`))
		if diff := cmp.Diff([]string(nil), res.Header.Values("Content-Type")); diff != "" || string(body) != "<html><body>sniff me</body></html>" {
			t.Errorf("%s: Content-Type (-want +got)\n%s body %q", path, diff, body)
		}
	}
}
