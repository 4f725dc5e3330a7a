package loadtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/openai/openaitest"
)

// Headers the harness sets on every request and the upstream reads.
const (
	idHeader   = "X-Loadtest-Id"   // identifies the request to the upstream's log
	modeHeader = "X-Loadtest-Mode" // "sse" or "json": how the upstream answers
)

// answers are the fake upstream's precomputed replies to one API's
// requests, rendered once by the API's scripted fake (anthropictest,
// openaitest) so their bytes are the API's wire format: a coding agent's
// turn (reasoning, text, a shell tool call).
type answers struct {
	events []string // SSE events, each "event: ...\ndata: ...\n\n"
	sse    int      // total bytes of the events
	json   []byte   // the non-streamed answer
}

// answerPaths are the API paths the fake upstream answers, with the
// protocol whose answers it sends.
var answerPaths = map[string]Protocol{
	"/v1/messages":         Anthropic,
	"/v1/responses":        Responses,
	"/v1/chat/completions": Chat,
}

// Answer texts shared by every API's rendering.
const (
	answerThinking = "The failing test compares the rewritten body with the original; the splice must keep the bytes outside the edits. "
	answerText     = "The splice dropped the comma between two edited blocks. I will fix the join and rerun the package tests."
	answerArgs     = `{"command":"go test ./splice/...","description":"Run the splice tests"}`
)

// newAnswers renders every protocol's answers.
func newAnswers() (map[Protocol]*answers, error) {
	out := map[Protocol]*answers{}
	a, err := anthropicAnswers()
	if err != nil {
		return nil, err
	}
	out[Anthropic] = a
	for _, p := range []Protocol{Responses, Chat} {
		if out[p], err = openaiAnswers(p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func anthropicAnswers() (*answers, error) {
	turn := anthropictest.Turn{
		Blocks: []anthropictest.Block{
			anthropictest.Thinking(strings.Repeat(answerThinking, 5), strings.Repeat("EqkBCkYICBgCKkC0", 8)),
			anthropictest.Text(answerText),
			anthropictest.ToolUse("toolu_01LoadtestFixedAnswerId01", "Bash", answerArgs),
		},
		Ping:  true,
		Usage: anthropic.Usage{InputTokens: 4, CacheCreationInputTokens: 1800, CacheReadInputTokens: 250_000, OutputTokens: 310},
	}
	const req = `{"model":"claude-opus-4-8","messages":[],"context_management":{"edits":[]},"stream":%s}`
	srv := anthropictest.New(anthropictest.Options{Turns: []anthropictest.Turn{turn}, TextChunk: 32, JSONChunk: 24})
	a := &answers{events: srv.Events(&anthropictest.Request{Decoded: []byte(strings.Replace(req, "%s", "true", 1))}, turn)}
	for _, e := range a.events {
		a.sse += len(e)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(strings.Replace(req, "%s", "false", 1))))
	if rec.Code != http.StatusOK {
		return nil, errors.New("loadtest: anthropictest did not render the JSON answer: " + rec.Body.String())
	}
	a.json = rec.Body.Bytes()
	return a, nil
}

// openaiAnswers renders the answers of an OpenAI API through openaitest:
// the stream is recorded whole and split into its events.
func openaiAnswers(p Protocol) (*answers, error) {
	turn := openaitest.Turn{
		Items: []openaitest.Item{
			{Type: "reasoning", Text: strings.Repeat(answerThinking, 2), CallID: "", Encrypted: "gAAAAABloadtest" + strings.Repeat("EqkBCkYICBgCKkC0", 8)},
			openaitest.Text(answerText),
			{Type: "function_call", Name: "shell", Arguments: answerArgs, CallID: "call_LoadtestFixedAnswerId01"},
		},
		Usage: openaitest.Usage{Input: 1804, Cached: 250_000, Output: 310},
	}
	srv := openaitest.New(openaitest.Options{Script: func(*openaitest.Request) openaitest.Turn { return turn }, Chunk: 32})
	path := pathOf(p)
	render := func(stream bool) ([]byte, error) {
		body := `{"model":"gpt-5.1-codex","input":[],"messages":[],"stream":` + strconv.FormatBool(stream) + `,"stream_options":{"include_usage":true}}`
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
		if rec.Code != http.StatusOK {
			return nil, fmt.Errorf("loadtest: openaitest did not render the %s answer: %s", p, rec.Body.String())
		}
		return rec.Body.Bytes(), nil
	}
	a := &answers{}
	var err error
	if a.json, err = render(false); err != nil {
		return nil, err
	}
	stream, err := render(true)
	if err != nil {
		return nil, err
	}
	for len(stream) > 0 {
		i := bytes.Index(stream, []byte("\n\n"))
		if i < 0 {
			return nil, errors.New("loadtest: openaitest's stream does not end with a blank line")
		}
		a.events = append(a.events, string(stream[:i+2]))
		a.sse += i + 2
		stream = stream[i+2:]
	}
	return a, nil
}

// upstreamRecord is what the upstream saw of one request.
type upstreamRecord struct {
	received  int64     // request body bytes
	firstByte time.Time // just after the first answer bytes were flushed
}

// upstream is the fake Messages API. It runs in the harness's process, so
// it shares the client's monotonic clock, and allocates nothing per
// request beyond net/http's own (pooled read buffers, precomputed
// answers).
type upstream struct {
	ans        map[Protocol]*answers
	delay      time.Duration // before the response headers
	eventDelay time.Duration // between SSE events

	srv *http.Server
	ln  net.Listener
	URL string

	mu   sync.Mutex
	recs map[string]upstreamRecord
}

var readBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

func startUpstream(ans map[Protocol]*answers, delay, eventDelay time.Duration) (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{ans: ans, delay: delay, eventDelay: eventDelay, ln: ln, URL: "http://" + ln.Addr().String(),
		recs: map[string]upstreamRecord{}}
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

func (u *upstream) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if u.srv.Shutdown(ctx) != nil {
		_ = u.srv.Close()
	}
}

// take returns and forgets the record of request id.
func (u *upstream) take(id string) (upstreamRecord, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	r, ok := u.recs[id]
	delete(u.recs, id)
	return r, ok
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, ok := answerPaths[r.URL.Path]
	if r.Method != http.MethodPost || !ok {
		http.Error(w, "loadtest upstream: only POST /v1/messages, /v1/responses and /v1/chat/completions", http.StatusNotFound)
		return
	}
	ans := u.ans[p]
	bp := readBufs.Get().(*[]byte)
	var n int64
	for {
		k, err := r.Body.Read(*bp)
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			readBufs.Put(bp)
			return
		}
	}
	readBufs.Put(bp)
	if u.delay > 0 && !sleep(r.Context(), u.delay) {
		return
	}
	// The record is stored just before the first answer bytes are
	// written, so it is there when the client has read them.
	mark := func() {
		u.mu.Lock()
		u.recs[r.Header.Get(idHeader)] = upstreamRecord{received: n, firstByte: time.Now()}
		u.mu.Unlock()
	}
	h := w.Header()
	h.Set("Request-Id", "req_loadtest")
	if r.Header.Get(modeHeader) != "sse" {
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(ans.json)))
		mark()
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(ans.json)
		return
	}
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	for i, e := range ans.events {
		if i > 0 && u.eventDelay > 0 && !sleep(r.Context(), u.eventDelay) {
			return
		}
		if i == 0 {
			mark()
		}
		if _, err := io.WriteString(w, e); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
