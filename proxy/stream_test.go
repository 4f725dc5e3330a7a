package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
)

// usageLog collects the usage of the records the proxy publishes
// (Options.Record); it does so after the last byte went out, so a test
// that has read the body may need to wait.
type usageLog struct {
	mu    sync.Mutex
	calls []protocol.Usage
}

func (l *usageLog) rec(x *record.Exchange) {
	if x.Usage != nil {
		l.mu.Lock()
		l.calls = append(l.calls, *x.Usage)
		l.mu.Unlock()
	}
}

// wait returns the calls once there are n, or after a second.
func (l *usageLog) wait(n int) []protocol.Usage {
	deadline := time.Now().Add(time.Second)
	for {
		l.mu.Lock()
		c := append([]protocol.Usage(nil), l.calls...)
		l.mu.Unlock()
		if len(c) >= n || time.Now().After(deadline) {
			time.Sleep(20 * time.Millisecond) // would a second call follow?
			l.mu.Lock()
			defer l.mu.Unlock()
			return append([]protocol.Usage(nil), l.calls...)
		}
		time.Sleep(time.Millisecond)
	}
}

const streamReq = `{"model":"claude-opus-4-8","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`

func jsonHeader() http.Header { return http.Header{"Content-Type": {"application/json"}} }

// readEvents reads SSE events (up to the blank line) from r, sending each
// one's position as it completes.
func readEvents(r io.Reader, each func(n int, ev string)) error {
	br := bufio.NewReader(r)
	var cur strings.Builder
	n := 0
	for {
		line, err := br.ReadString('\n')
		cur.WriteString(line)
		if line == "\n" {
			n++
			each(n, cur.String())
			cur.Reset()
		}
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// TestSSEForwardedPerEvent proves that no event is held back: the fake
// upstream writes event k only once the client has received event k-1.
func TestSSEForwardedPerEvent(t *testing.T) {
	got := make(chan int, 1000)
	var mu sync.Mutex
	var late []int
	turn := anthropictest.Turn{
		Blocks: []anthropictest.Block{
			anthropictest.Thinking("let me think about it", "c2lnbmF0dXJl"),
			anthropictest.Text("Here is the answer, in several deltas."),
			anthropictest.ToolUse("toolu_1", "Bash", `{"command":"ls -la","description":"list"}`),
		},
		Ping: true,
		Hook: func(ev int) {
			if ev == 1 {
				return
			}
			mu.Lock()
			wait := 5 * time.Second
			if len(late) > 0 {
				wait = 50 * time.Millisecond // already failed: do not drag on
			}
			mu.Unlock()
			select {
			case n := <-got:
				if n != ev-1 {
					mu.Lock()
					late = append(late, ev)
					mu.Unlock()
				}
			case <-time.After(wait):
				mu.Lock()
				late = append(late, ev)
				mu.Unlock()
			}
		},
	}
	fake := anthropictest.NewServer(anthropictest.Options{Turns: []anthropictest.Turn{turn}, TextChunk: 8})
	defer fake.Close()
	var ul usageLog
	rw := RewriterFunc(func(_ context.Context, _ *http.Request, _ protocol.Protocol, body []byte) Outcome {
		return Outcome{Body: body}
	})
	srv, _ := newProxyServer(t, fake.URL, Options{Rewriter: rw, Record: ul.rec})
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages?beta=true", strings.NewReader(streamReq))
	req.Header = jsonHeader()
	res, err := rawClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
		t.Errorf("content type %q", ct)
	}
	var events []string
	err = readEvents(res.Body, func(n int, ev string) {
		events = append(events, ev)
		got <- n
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(late) > 0 {
		t.Errorf("events %v were not forwarded before the upstream sent the next one", late)
	}
	if len(events) < 15 || !strings.HasPrefix(events[0], "event: message_start\n") || events[len(events)-1] != "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n" {
		t.Errorf("%d events: first %q last %q", len(events), events[0], events[len(events)-1])
	}
	for _, want := range []string{"thinking_delta", "signature_delta", "input_json_delta", "text_delta", `"stop_reason":"tool_use"`, "event: ping"} {
		if !strings.Contains(strings.Join(events, ""), want) {
			t.Errorf("stream lacks %s", want)
		}
	}
	if usage := ul.wait(1); len(usage) != 1 || usage[0].Input != len(streamReq)/4 {
		t.Errorf("usage recorded %+v", usage)
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	for _, tc := range []struct {
		name        string
		path        string
		beforeFirst bool // disconnect while waiting for the response headers
	}{
		{"messages mid-stream", "/v1/messages", false},
		{"messages before headers", "/v1/messages", true},
		{"passthrough mid-stream", "/v1/other", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			canceled := make(chan struct{})
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				if !tc.beforeFirst {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = io.WriteString(w, "event: ping\ndata: {\"type\": \"ping\"}\n\n")
					w.(http.Flusher).Flush()
				}
				select {
				case <-r.Context().Done():
					close(canceled)
				case <-time.After(10 * time.Second):
				}
			})
			srv, _ := newProxyServer(t, up.URL, Options{Rewriter: &identity{}})
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+tc.path, strings.NewReader(streamReq))
			req.Header = jsonHeader()
			if tc.beforeFirst {
				go func() { time.Sleep(100 * time.Millisecond); cancel() }()
				_, err := rawClient().Do(req)
				if err == nil {
					t.Fatal("request succeeded")
				}
			} else {
				res, err := rawClient().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 10)
				if _, err := io.ReadFull(res.Body, buf); err != nil {
					t.Fatal(err)
				}
				cancel()
				res.Body.Close()
			}
			select {
			case <-canceled:
			case <-time.After(5 * time.Second):
				t.Fatal("the upstream request was not canceled")
			}
		})
	}
}

func TestUpstreamErrorsUnchanged(t *testing.T) {
	errBody := []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011CSHoEeqs5C35K2UUqR7Fy"}`)
	midStream := "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}` + "\n\n" +
		"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
		"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}` + "\n\n" +
		"event: error\n" + `data: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}` + "\n\n"
	tests := []struct {
		name   string
		status int
		header http.Header
		body   []byte
		chunks bool
	}{
		{"529 overloaded", 529, http.Header{"Content-Type": {"application/json"}, "Request-Id": {"req_1"}, "X-Should-Retry": {"true"}}, errBody, false},
		{"429 with retry-after", 429, http.Header{"Content-Type": {"application/json"}, "Retry-After": {"17"}, "Anthropic-Ratelimit-Requests-Reset": {"2026-11-22T00:00:00Z"}}, errBody, false},
		{"400 prompt too long", 400, http.Header{"Content-Type": {"application/json"}}, []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"},"request_id":"req_2"}`), false},
		{"502 html from a load balancer", 502, http.Header{"Content-Type": {"text/html"}}, []byte("<html><body>bad gateway</body></html>"), false},
		{"mid-stream error event", 200, http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}, "Request-Id": {"req_3"}}, []byte(midStream), true},
		{"redirect", 307, http.Header{"Location": {"https://elsewhere.example/v1/messages"}}, nil, false},
	}
	for _, tc := range tests {
		up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			for k, v := range tc.header {
				w.Header()[k] = v
			}
			w.WriteHeader(tc.status)
			if !tc.chunks {
				_, _ = w.Write(tc.body)
				return
			}
			for ev := range strings.SplitAfterSeq(string(tc.body), "\n\n") {
				_, _ = io.WriteString(w, ev)
				w.(http.Flusher).Flush()
			}
		})
		var ul usageLog
		rw := RewriterFunc(func(_ context.Context, _ *http.Request, _ protocol.Protocol, body []byte) Outcome {
			return Outcome{Body: body}
		})
		srv, _ := newProxyServer(t, up.URL, Options{Rewriter: rw, Record: ul.rec})
		for _, path := range []string{"/v1/messages?beta=true", "/v1/messages/count_tokens"} {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				res, got := do(t, rawClient(), "POST", srv.URL+path, jsonHeader(), strings.NewReader(streamReq))
				if res.StatusCode != tc.status || !bytes.Equal(got, tc.body) {
					t.Errorf("got %d %q", res.StatusCode, got)
				}
				gotH := without(res.Header, "Date", "Content-Length")
				if diff := cmp.Diff(tc.header, gotH); diff != "" {
					t.Errorf("headers (-want +got)\n%s", diff)
				}
			})
		}
		if tc.status != 200 && len(ul.wait(0)) != 0 {
			t.Errorf("%s: usage recorded for an error answer", tc.name)
		}
	}
}

// sseText is a complete stream for the usage tap tests.
const sseText = "event: message_start\n" +
	`data: {"type":"message_start","message":{"model":"claude-opus-4-8","id":"msg_1","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":11,"cache_creation_input_tokens":2000,"cache_read_input_tokens":30000,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
	"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\n\n" +
	"event: content_block_stop\n" + `data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"input_tokens":11,"cache_creation_input_tokens":2000,"cache_read_input_tokens":30000,"output_tokens":42}}` + "\n\n" +
	"event: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"

func TestUsageTapThroughProxy(t *testing.T) {
	want := protocol.Usage{Input: 11, CacheWrite: 2000, CacheRead: 30000, Output: 42}
	jsonAnswer := `{"model":"claude-opus-4-8","id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":11,"cache_creation_input_tokens":2000,"cache_read_input_tokens":30000,"output_tokens":42}}`
	type answer struct {
		ct, body, coding string
		chunk            int
	}
	var tests []struct {
		name string
		a    answer
	}
	for _, coding := range []string{"", "gzip", "br", "zstd", "deflate"} {
		for _, chunk := range []int{0, 1, 7} {
			name := coding
			if name == "" {
				name = "identity"
			}
			name += "/chunk" + string(rune('0'+chunk))
			tests = append(tests,
				struct {
					name string
					a    answer
				}{"sse/" + name, answer{"text/event-stream; charset=utf-8", sseText, coding, chunk}},
				struct {
					name string
					a    answer
				}{"json/" + name, answer{"application/json", jsonAnswer, coding, chunk}})
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wire := []byte(tc.a.body)
			if tc.a.coding != "" {
				wire = anthropictest.Compress(tc.a.coding, wire)
			}
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				w.Header().Set("Content-Type", tc.a.ct)
				if tc.a.coding != "" {
					w.Header().Set("Content-Encoding", tc.a.coding)
				}
				if tc.a.chunk == 0 {
					_, _ = w.Write(wire)
					return
				}
				for b := wire; len(b) > 0; {
					n := min(tc.a.chunk, len(b))
					_, _ = w.Write(b[:n])
					w.(http.Flusher).Flush()
					b = b[n:]
				}
			})
			var ul usageLog
			rw := RewriterFunc(func(_ context.Context, _ *http.Request, _ protocol.Protocol, body []byte) Outcome {
				return Outcome{Body: body}
			})
			srv, _ := newProxyServer(t, up.URL, Options{Rewriter: rw, Record: ul.rec})
			h := jsonHeader()
			h.Set("Accept-Encoding", "gzip, deflate, br, zstd")
			res, body := do(t, rawClient(), "POST", srv.URL+"/v1/messages?beta=true", h, strings.NewReader(streamReq))
			if !bytes.Equal(body, wire) || res.Header.Get("Content-Encoding") != tc.a.coding {
				t.Errorf("client got %d bytes (encoding %q), upstream sent %d", len(body), res.Header.Get("Content-Encoding"), len(wire))
			}
			if diff := cmp.Diff([]protocol.Usage{want}, ul.wait(1)); diff != "" {
				t.Errorf("usage recorded (-want +got)\n%s", diff)
			}
		})
	}
}

func TestFakeStreamChunkedAtEveryByte(t *testing.T) {
	fake := anthropictest.NewServer(anthropictest.Options{Turns: []anthropictest.Turn{{
		Blocks: []anthropictest.Block{anthropictest.Text("héllo wörld"), anthropictest.ToolUse("", "Read", `{"file_path":"/tmp/x"}`)},
		Usage:  anthropic.Usage{InputTokens: 3, CacheReadInputTokens: 1000, OutputTokens: 77},
		Ping:   true, ChunkSize: 1,
	}}})
	defer fake.Close()
	var ul usageLog
	rw := RewriterFunc(func(_ context.Context, _ *http.Request, _ protocol.Protocol, body []byte) Outcome {
		return Outcome{Body: body}
	})
	srv, _ := newProxyServer(t, fake.URL, Options{Rewriter: rw, Record: ul.rec})
	res, body := do(t, rawClient(), "POST", srv.URL+"/v1/messages", jsonHeader(), strings.NewReader(streamReq))
	if res.StatusCode != 200 || !strings.HasSuffix(string(body), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
		t.Fatalf("%d %q", res.StatusCode, body)
	}
	if diff := cmp.Diff([]protocol.Usage{{Input: 3, CacheRead: 1000, Output: 77}}, ul.wait(1)); diff != "" {
		t.Errorf("usage (-want +got)\n%s", diff)
	}
}

func TestIdleUpstreamCutsTheStream(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: ping\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	srv, logs := newProxyServer(t, up.URL, Options{Timeouts: Timeouts{Idle: 200 * time.Millisecond}})
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", strings.NewReader(streamReq))
	req.Header = jsonHeader()
	start := time.Now()
	res, err := rawClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(res.Body)
	res.Body.Close()
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) && !strings.Contains(err.Error(), "unexpected EOF") {
		t.Errorf("client read ended with %v, want a cut stream", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
	if !strings.Contains(logs.String(), "sent nothing for 200ms") {
		t.Errorf("idle cut not logged:\n%s", logs.String())
	}
}

func TestHTTP2Client(t *testing.T) {
	fake := anthropictest.NewServer(anthropictest.Options{Turns: []anthropictest.Turn{{Blocks: []anthropictest.Block{anthropictest.Text("over h2")}}}})
	defer fake.Close()
	u, _ := url.Parse(fake.URL)
	var ul usageLog
	rw := RewriterFunc(func(_ context.Context, _ *http.Request, _ protocol.Protocol, body []byte) Outcome {
		return Outcome{Body: body}
	})
	p, err := New(Options{Upstream: u, Rewriter: rw, Record: ul.rec, Protocols: []protocol.Protocol{anthropic.Protocol}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(p)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages", strings.NewReader(streamReq))
	req.Header = jsonHeader()
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.ProtoMajor != 2 || res.StatusCode != 200 || !strings.Contains(string(body), `"text":"over h2"`) {
		t.Errorf("%s %d %q", res.Proto, res.StatusCode, body)
	}
	if len(ul.wait(1)) != 1 {
		t.Error("no usage over HTTP/2")
	}
}

func TestDumpBodies(t *testing.T) {
	up := newUpstream(t, nil)
	srv, logs := newProxyServer(t, up.URL, Options{DumpBodies: true, Rewriter: &identity{}})
	do(t, rawClient(), "POST", srv.URL+"/v1/messages", http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {"sk-ant-dump-secret"}}, strings.NewReader(`{"messages":["dumped"]}`))
	if !strings.Contains(logs.String(), "dumped") {
		t.Error("body not dumped")
	}
	if strings.Contains(logs.String(), "sk-ant-dump-secret") {
		t.Error("API key logged")
	}
}

func FuzzDecodingTap(f *testing.F) {
	f.Add([]byte(sseText), uint64(1), uint8(0))
	f.Add([]byte(sseText), uint64(2), uint8(3))
	f.Add([]byte("event: message_delta\ndata: {\"usage\":{\"output_tokens\":1}}\n\n"), uint64(3), uint8(1))
	codings := []string{"gzip", "br", "zstd", "deflate"}
	f.Fuzz(func(t *testing.T, data []byte, seed uint64, c uint8) {
		coding := codings[int(c)%len(codings)]
		want := anthropic.Protocol.NewUsageTap("text/event-stream")
		want.Write(data)
		wire := anthropictest.Compress(coding, data)
		got := anthropic.Protocol.NewUsageTap("text/event-stream")
		d := newDecodingTap(coding, got)
		r := rand.New(rand.NewPCG(seed, seed))
		for len(wire) > 0 {
			n := 1 + r.IntN(len(wire))
			d.Write(wire[:n])
			wire = wire[n:]
		}
		d.Close()
		wu, wok := want.Usage()
		gu, gok := got.Usage()
		if wu != gu || wok != gok {
			t.Fatalf("%s: decoded tap %+v %v, plain %+v %v", coding, gu, gok, wu, wok)
		}
		// A corrupt stream must not block or panic.
		bad := newDecodingTap(coding, anthropic.Protocol.NewUsageTap("text/event-stream"))
		bad.Write(append([]byte{0xff, 0xfe}, data...))
		bad.Write(data)
		bad.Close()
	})
}

// slowReader hands out its data in pieces with pauses, so a request body
// is still in flight when the answer starts.
type slowReader struct {
	data  []byte
	piece int
	pause time.Duration
	done  time.Time // when the last byte was handed out
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		if s.done.IsZero() {
			s.done = time.Now()
		}
		return 0, io.EOF
	}
	time.Sleep(s.pause)
	n := copy(p[:min(len(p), s.piece)], s.data)
	s.data = s.data[n:]
	return n, nil
}

// TestConcurrentStreamsComplete runs many streamed answers at once whose
// request bodies are still arriving when the answers start (the case of
// golang/go#40747, where a stock reverse proxy cut answers short), and
// checks that every answer is complete and every body arrived whole.
func TestConcurrentStreamsComplete(t *testing.T) {
	var mu sync.Mutex
	var cut []string
	fail := func(format string, a ...any) {
		mu.Lock()
		cut = append(cut, fmt.Sprintf(format, a...))
		mu.Unlock()
	}
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("y", 600<<10) + `"}]}`
	// This upstream answers before it has read the request body, as an
	// API front end may.
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		done := make(chan int64)
		go func() { n, _ := io.Copy(io.Discard, r.Body); done <- n }()
		for i := range 30 {
			_, _ = io.WriteString(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"word "+strings.Repeat("x", i)+"\"}}\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(time.Millisecond)
		}
		if n := <-done; n != int64(len(body)) {
			fail("%s: upstream got %d body bytes of %d", r.URL.Path, n, len(body))
		}
		_, _ = io.WriteString(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	defer up.Close()
	srv, _ := newProxyServer(t, up.URL, Options{Rewriter: &identity{}})
	const workers, each = 8, 4
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := rawClient()
			for i := range each {
				path := "/v1/messages?beta=true"
				if (w+i)%2 == 1 {
					path = "/v1/messages/count_tokens" // streamed, not buffered
				}
				req, _ := http.NewRequest("POST", srv.URL+path, &slowReader{data: []byte(body), piece: 32 << 10, pause: time.Millisecond})
				req.ContentLength = int64(len(body))
				req.Header = jsonHeader()
				res, err := c.Do(req)
				var got []byte
				if err == nil {
					got, err = io.ReadAll(res.Body)
					res.Body.Close()
				}
				if err != nil || !strings.HasSuffix(string(got), "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n") {
					fail("%s: %v (%d bytes)", path, err, len(got))
				}
			}
		}()
	}
	wg.Wait()
	if len(cut) > 0 {
		t.Errorf("%d failures in %d streams, e.g. %s", len(cut), workers*each, cut[0])
	}

	// Full duplex: on a passthrough path the answer streams back while the
	// client is still sending.
	sr := &slowReader{data: []byte(body), piece: 16 << 10, pause: 2 * time.Millisecond}
	req, _ := http.NewRequest("POST", srv.URL+"/v1/messages/count_tokens", sr)
	req.ContentLength = int64(len(body))
	req.Header = jsonHeader()
	res, err := rawClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 1)
	if _, err := io.ReadFull(res.Body, first); err != nil {
		t.Fatal(err)
	}
	firstAt := time.Now()
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if !firstAt.Before(sr.done) {
		t.Errorf("the first answer byte came %v after the upload ended; want it while uploading", firstAt.Sub(sr.done))
	}
}
