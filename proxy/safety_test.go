package proxy

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

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
	const idle = 200 * time.Millisecond
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
	time.Sleep(5 * idle) // the client reads nothing; the proxy's writes block
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
	srv, logs := newProxyServer(t, up.URL, Options{Timeouts: Timeouts{ClientWrite: 200 * time.Millisecond, Idle: 100 * time.Millisecond}})
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
	if l := lineWith(logs.String(), "response cut"); !strings.Contains(l, "client stopped reading") {
		t.Errorf("the cut does not blame the client: %q", l)
	}
	if strings.Contains(logs.String(), "sent nothing") {
		t.Errorf("a stalled client was logged as an idle upstream:\n%s", logs.String())
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
