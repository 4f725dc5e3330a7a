package fault

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/internal/procs"
	"github.com/ctxguard/ctxguard/internal/shareddata"
	"github.com/ctxguard/ctxguard/tools/transcript"
)

// The cases in this file held before the safety review; they stay here so
// that they keep holding.

// TestUpstreamErrorsExact: 4xx and 5xx answers reach the client exactly:
// status, headers and body bytes.
func TestUpstreamErrorsExact(t *testing.T) {
	up := newUpstream(t)
	in := start(t, serveOpts{upstream: up.URL})
	for _, tc := range []struct {
		status int
		body   string
		header http.Header
	}{
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 212345 tokens > 200000 maximum"}}`, nil},
		{401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, nil},
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, http.Header{"Retry-After": {"17"}, "Anthropic-Ratelimit-Requests-Remaining": {"0"}}},
		{500, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, nil},
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n  \u00e9\t", http.Header{"Retry-After": {"3"}}},
		{503, "<html>upstream connect error</html>", http.Header{"Content-Type": {"text/html"}}},
	} {
		cue := fmt.Sprint("status-", tc.status)
		up.on(cue, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Request-Id", "req_fault")
			for k, vs := range tc.header {
				w.Header()[k] = vs
			}
			w.WriteHeader(tc.status)
			io.WriteString(w, tc.body)
		})
		res, body := post(t, client(), in.URL, http.Header{"X-Fault": {cue}}, smallBody("hi"))
		if res.StatusCode != tc.status || string(body) != tc.body {
			t.Errorf("%d: client got %d %q", tc.status, res.StatusCode, body)
		}
		want := http.Header{"Request-Id": {"req_fault"}}
		for k, vs := range tc.header {
			want[k] = vs
		}
		for k, vs := range want {
			if d := cmp.Diff(vs, res.Header[k]); d != "" {
				t.Errorf("%d: header %s (-upstream +client):\n%s", tc.status, k, d)
			}
		}
	}
}

// TestResetMidStream: an upstream that resets its connection mid-answer
// makes ctxguard cut the client's connection, so a truncated answer can
// never pass for a complete one.
func TestResetMidStream(t *testing.T) {
	up := newUpstream(t)
	up.on("reset", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n")
		http.NewResponseController(w).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.(*net.TCPConn).SetLinger(0) // RST, not FIN
		conn.Close()
	})
	in := start(t, serveOpts{upstream: up.URL})
	req, _ := http.NewRequest(http.MethodPost, in.URL+"/v1/messages", bytes.NewReader(smallBody("hi")))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Fault", "reset")
	res, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err == nil {
		t.Fatalf("the client read a clean end of a reset stream (%d bytes)", len(got))
	}
	if !bytes.Contains(got, []byte("message_start")) {
		t.Errorf("the events before the reset did not arrive: %q", got)
	}
	if !in.waitLog("response cut") {
		t.Errorf("ctxguard did not log the cut:\n%s", in.Tail())
	}
}

// TestClientDisconnectCancelsUpstream: a client that goes away mid-answer
// cancels the upstream request.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	up := newUpstream(t)
	gone := make(chan struct{})
	up.on("hang", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		io.WriteString(w, "event: ping\ndata: {\"type\": \"ping\"}\n\n")
		http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
			close(gone)
		case <-time.After(60 * time.Second):
		}
	})
	in := start(t, serveOpts{upstream: up.URL})
	c := dial(t, in.URL)
	body := smallBody("hi")
	fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Fault: hang\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	br := bufio.NewReader(c)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("status line %q, %v", line, err)
	}
	c.Close()
	select {
	case <-gone:
	case <-time.After(30 * time.Second):
		t.Fatal("the upstream request was not cancelled after the client left")
	}
}

// TestDecompressionBomb: a small gzip body that inflates past max_body is
// refused with 413 without inflating it all, and ctxguard's memory stays
// small.
func TestDecompressionBomb(t *testing.T) {
	up := newUpstream(t)
	in := start(t, serveOpts{upstream: up.URL})
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	zw.Write([]byte(`{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"`))
	for range 1 << 10 { // 1 GiB of zeros
		zw.Write(zeros)
	}
	zw.Close()
	_, rss0, _ := procs.Memory(in.Pid())
	res, body := post(t, client(), in.URL, http.Header{"Content-Encoding": {"gzip"}}, bomb.Bytes())
	if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "request_too_large") {
		t.Fatalf("a %d KB gzip bomb got %d %s", bomb.Len()>>10, res.StatusCode, body)
	}
	peak, _, err := procs.Memory(in.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if grown := peak - rss0; grown > 256<<20 {
		t.Errorf("peak RSS grew by %d MiB decoding a bomb (max_body is 32 MiB)", grown>>20)
	}
	if len(up.messages()) != 0 {
		t.Error("the bomb reached the upstream")
	}
}

// TestBlobPathTraversal: blob ids are 13 letters; anything else, however
// encoded, is refused and never reads a file.
func TestBlobPathTraversal(t *testing.T) {
	in := start(t, serveOpts{upstream: "http://127.0.0.1:1"})
	for _, id := range []string{
		"../../../../etc/passwd", "..%2F..%2F..%2F..%2Fetc%2Fpasswd", "%2e%2e/%2e%2e/etc/passwd",
		"abcdefghijklm/../../../etc/passwd", "..", ".", "abcdefghijklm%00", "ABCDEFGHIJKLM", "abcdefghijkl",
		"abcdefghijklmn", "abcdefghijkl1", "....%2f....%2fetc%2fpasswd",
	} {
		res, body := get(t, in.URL+"/ctxguard/v1/blobs/"+id, "", nil)
		if res.StatusCode == 200 || bytes.Contains(body, []byte("root:")) {
			t.Errorf("blob id %q: %d %q", id, res.StatusCode, body)
		}
	}
}

// sessionStream returns the request bodies of a real Claude Code session
// with edit events at the defaults (the one the repository keeps of the
// shared data), as Claude Code would send them.
func sessionStream(t *testing.T) [][]byte {
	t.Helper()
	ss, err := transcript.Load([]string{shareddata.SubsetFile(t, "claude-code", "57bb5674-54b1-4ce6-9157-2d341cd9bfc1.jsonl")}, transcript.Options{SkipSidechains: true})
	if err != nil {
		t.Fatal(err)
	}
	var best [][]byte
	for _, s := range ss {
		b, err := transcript.NewBuilder(s, transcript.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var bodies [][]byte
		for k := 0; k < b.Len(); k++ {
			r, err := b.Request(k)
			if err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, r.Body)
		}
		if len(bodies) > len(best) {
			best = bodies
		}
	}
	return best
}

// replay sends bodies to the instance as one session and returns the
// number of edit events its answers reported.
func replay(t *testing.T, in *instance, bodies [][]byte) (events int) {
	t.Helper()
	c := client()
	for i, b := range bodies {
		res, body := post(t, c, in.URL, http.Header{"X-Claude-Code-Session-Id": {"fault-session"}}, b)
		if res.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, res.StatusCode, body)
		}
		if res.Header.Get("X-Ctxguard-Edit-Event") == "1" {
			events++
		}
	}
	return events
}

// freePort returns a loopback address nothing listens on now.
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func digests(bodies [][]byte) []string {
	out := make([]string, len(bodies))
	for i, b := range bodies {
		out[i] = fmt.Sprintf("%x", sha256.Sum256(b))[:16]
	}
	return out
}

// TestRestartDeterminism: a proxy restarted in the middle of a session
// sends the upstream exactly the bytes one uninterrupted proxy sends.
// (Stubs name the data dir and the address, so both runs use the same.)
func TestRestartDeterminism(t *testing.T) {
	bodies := sessionStream(t)
	addr := freePort(t)
	dataDir := filepath.Join(t.TempDir(), "data")

	upA := newUpstream(t)
	a := start(t, serveOpts{upstream: upA.URL, listen: addr, dataDir: dataDir})
	events := replay(t, a, bodies)
	a.Stop()
	if events == 0 {
		t.Fatal("the session made no edit event: the test checks too little")
	}

	upB := newUpstream(t)
	half := len(bodies) / 2
	b1 := start(t, serveOpts{upstream: upB.URL, listen: addr, dataDir: dataDir})
	replay(t, b1, bodies[:half])
	b1.Stop()
	b2 := start(t, serveOpts{upstream: upB.URL, listen: addr, dataDir: dataDir})
	replay(t, b2, bodies[half:])

	if d := cmp.Diff(digests(upA.messages()), digests(upB.messages())); d != "" {
		t.Errorf("bodies sent upstream (-one process +restarted at %d):\n%s", half, d)
	}
}

var blobRef = regexp.MustCompile(`blob ([a-z]{13})\b`)

// TestTwoProcessesOneDataDir: two proxies sharing a data dir both work;
// each serves the blobs the other stored.
func TestTwoProcessesOneDataDir(t *testing.T) {
	bodies := sessionStream(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	upA, upB := newUpstream(t), newUpstream(t)
	a := start(t, serveOpts{upstream: upA.URL, dataDir: dataDir})
	b := start(t, serveOpts{upstream: upB.URL, dataDir: dataDir})
	done := make(chan int)
	go func() { done <- replay(t, a, bodies) }()
	replay(t, b, bodies)
	<-done
	sent := upA.messages()
	last := sent[len(sent)-1]
	ids := map[string]bool{}
	for _, m := range blobRef.FindAllSubmatch(last, -1) {
		ids[string(m[1])] = true
	}
	if len(ids) == 0 {
		t.Fatal("no blob referenced: the test checks too little")
	}
	for id := range ids {
		for _, in := range []*instance{a, b} {
			res, body := get(t, in.URL+"/ctxguard/v1/blobs/"+id, "", nil)
			if res.StatusCode != 200 || len(body) == 0 {
				t.Errorf("%s: blob %s: %d", in.URL, id, res.StatusCode)
			}
		}
	}
	// The stubs name each proxy's own address; apart from that the bytes
	// are the same.
	if d := cmp.Diff(digests(withoutAddr(upA.messages(), a)), digests(withoutAddr(upB.messages(), b))); d != "" {
		t.Errorf("the two processes sent different bytes for the same session:\n%s", d)
	}
	if n := a.ErrorLines() + b.ErrorLines(); n != 0 {
		t.Errorf("%d error lines:\n%s\n%s", n, a.Tail(), b.Tail())
	}
}

// withoutAddr replaces the instance's address in bodies.
func withoutAddr(bodies [][]byte, in *instance) [][]byte {
	out := make([][]byte, len(bodies))
	for i, b := range bodies {
		out[i] = bytes.ReplaceAll(b, []byte(hostPort(in.URL)), []byte("ADDR"))
	}
	return out
}

// contentLength reads a Content-Length header value.
func contentLength(h http.Header) int {
	n, _ := strconv.Atoi(h.Get("Content-Length"))
	return n
}
