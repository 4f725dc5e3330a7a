// Package anthropictest is a scripted fake of the Anthropic Messages API
// for tests and benchmarks.
//
// A Server answers POST /v1/messages in the API's exact wire format: a
// JSON message, or an SSE stream (message_start, content_block_start /
// content_block_delta / content_block_stop for text, tool_use with
// input_json_delta chunks, thinking with thinking_delta and
// signature_delta, redacted_thinking, message_delta with stop_reason and
// usage, message_stop, ping, and mid-stream error events). What it answers
// comes from a queue of Turns, then from a Script function, then a default
// text answer. It records every request it receives (method, path, query,
// headers and raw body) for assertions, and also serves
// /v1/messages/count_tokens and /v1/models plausibly.
//
// A Server is an http.Handler: use it with Start (an httptest server on
// 127.0.0.1), StartOn (a listener of your choice), or mount it yourself.
// All methods are safe for concurrent use.
package anthropictest

import (
	"context"
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
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Block is one content block of a scripted answer.
type Block struct {
	Type      string // "text", "tool_use", "thinking" or "redacted_thinking"
	Text      string // text: the text; thinking: the thinking text
	Signature string // thinking: the signature
	Data      string // redacted_thinking: the opaque data
	ID        string // tool_use: the call id ("" generates one)
	Name      string // tool_use: the tool name
	Input     string // tool_use: the input as raw JSON ("" means {})
}

// Text returns a text block.
func Text(s string) Block { return Block{Type: "text", Text: s} }

// ToolUse returns a tool_use block; input is raw JSON.
func ToolUse(id, name, input string) Block {
	return Block{Type: "tool_use", ID: id, Name: name, Input: input}
}

// Thinking returns a thinking block with its signature.
func Thinking(text, signature string) Block {
	return Block{Type: "thinking", Text: text, Signature: signature}
}

// RedactedThinking returns a redacted_thinking block.
func RedactedThinking(data string) Block { return Block{Type: "redacted_thinking", Data: data} }

// APIError is an error object as the API sends it.
type APIError struct {
	Type    string // e.g. "overloaded_error"
	Message string
}

// Turn is one scripted answer.
type Turn struct {
	Blocks []Block
	// StopReason defaults to "tool_use" when Blocks hold a tool_use, else
	// "end_turn".
	StopReason string
	// Usage is reported in message_start / message_delta or the JSON
	// answer. When zero, input tokens are estimated as body bytes / 4 and
	// output tokens as answer bytes / 4.
	Usage anthropic.Usage
	Model string // "" answers with the request's model

	// Status, when not 0 or 200, answers with that status and Error (or
	// a default error for the status) as the JSON body.
	Status int
	// Error with a 200 streamed answer sends a mid-stream error event
	// after ErrorAfter events (message_start is event 1) and ends the
	// stream there.
	Error      *APIError
	ErrorAfter int

	Header     http.Header   // added to the response headers
	Delay      time.Duration // before the response headers
	EventDelay time.Duration // between SSE events
	// ChunkSize splits every SSE event into writes of at most this many
	// bytes, each flushed on its own (0 writes whole events).
	ChunkSize int
	// ContentEncoding compresses the response body: "gzip", "br",
	// "zstd" or "deflate" (zlib), flushed per event.
	ContentEncoding string
	// Ping sends a ping event after message_start.
	Ping bool
	// Hook, if set, is called before each SSE event is written, with the
	// event's number (1 for message_start); it may block to pace the
	// stream.
	Hook func(event int)
	// Raw, if non-nil, is sent verbatim as the body (with Status, or 200,
	// and Header); nothing else of the Turn applies.
	Raw []byte
}

// Options configure a Server.
type Options struct {
	Turns  []Turn                // answers, in order, for POST /v1/messages
	Script func(r *Request) Turn // answers once Turns is used up
	Delay  time.Duration         // before every answer's headers
	// APIKey, if set, must arrive as x-api-key or Authorization: Bearer;
	// otherwise the answer is 401 authentication_error.
	APIKey string
	Models []string // served by /v1/models; defaults to three Claude models
	// TextChunk is the size of text and thinking deltas in bytes (default
	// 16); JSONChunk the size of input_json_delta chunks (default 24).
	TextChunk, JSONChunk int
}

// Request is one request the Server received.
type Request struct {
	Index    int // 0-based, in arrival order
	Method   string
	Path     string
	RawQuery string
	Header   http.Header
	Body     []byte // exactly as received (possibly content-encoded)
	// Decoded is Body with its Content-Encoding (gzip, br, zstd,
	// deflate) removed; it is Body when there is none or it fails.
	Decoded []byte
	Time    time.Time
}

// Stream reports whether the request asked for a streamed answer.
func (r *Request) Stream() bool {
	root, err := jsonscan.Root(r.Decoded)
	if err != nil || jsonscan.KindOf(r.Decoded, root) != jsonscan.Object {
		return false
	}
	v, err := jsonscan.Lookup(r.Decoded, root, "stream")
	return err == nil && string(v.Bytes(r.Decoded)) == "true"
}

// Conversation parses the decoded body as a Messages request.
func (r *Request) Conversation() (*conversation.Conversation, error) {
	return anthropic.Parse(r.Decoded)
}

// Server is the fake upstream.
type Server struct {
	// URL is the base URL ("http://127.0.0.1:PORT") once started.
	URL string

	opts Options
	srv  *httptest.Server

	mu    sync.Mutex
	queue []Turn
	reqs  []Request
	ids   int
}

// New returns a Server that is not listening yet; it is an http.Handler.
func New(opts Options) *Server {
	if opts.TextChunk <= 0 {
		opts.TextChunk = 16
	}
	if opts.JSONChunk <= 0 {
		opts.JSONChunk = 24
	}
	if len(opts.Models) == 0 {
		opts.Models = []string{"claude-opus-4-8", "claude-sonnet-4-6", "claude-haiku-4-5-20251001"}
	}
	return &Server{opts: opts, queue: append([]Turn(nil), opts.Turns...)}
}

// NewServer returns a Server listening on 127.0.0.1.
func NewServer(opts Options) *Server {
	s := New(opts)
	s.Start()
	return s
}

// Start serves on a fresh 127.0.0.1 port.
func (s *Server) Start() {
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL
}

// StartOn serves on l (for a fixed address).
func (s *Server) StartOn(l net.Listener) {
	s.srv = httptest.NewUnstartedServer(s)
	s.srv.Listener.Close()
	s.srv.Listener = l
	s.srv.Start()
	s.URL = s.srv.URL
}

// Close stops the server, interrupting open streams.
func (s *Server) Close() {
	if s.srv != nil {
		s.srv.CloseClientConnections()
		s.srv.Close()
	}
}

// Enqueue appends answers to the queue.
func (s *Server) Enqueue(turns ...Turn) {
	s.mu.Lock()
	s.queue = append(s.queue, turns...)
	s.mu.Unlock()
}

// Requests returns every request received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// MessagesRequests returns the POST /v1/messages requests received so far.
func (s *Server) MessagesRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Method == http.MethodPost && r.Path == "/v1/messages" {
			out = append(out, r)
		}
	}
	return out
}

// Reset forgets recorded requests and queued turns.
func (s *Server) Reset() {
	s.mu.Lock()
	s.reqs, s.queue = nil, nil
	s.mu.Unlock()
}

func (s *Server) nextID(prefix string) string {
	s.mu.Lock()
	s.ids++
	n := s.ids
	s.mu.Unlock()
	return fmt.Sprintf("%s_fake%018d", prefix, n)
}

// ServeHTTP records the request and answers it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	rec := Request{
		Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body, Decoded: decode(r.Header.Get("Content-Encoding"), body),
		Time: time.Now(),
	}
	s.mu.Lock()
	rec.Index = len(s.reqs)
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()

	reqID := s.nextID("req")
	w.Header().Set("request-id", reqID)
	if s.opts.APIKey != "" && !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, anthropic.AuthenticationError, "invalid x-api-key", reqID)
		return
	}
	switch {
	case r.URL.Path == "/v1/messages" && r.Method == http.MethodPost:
		s.messages(w, r, &rec, reqID)
	case r.URL.Path == "/v1/messages/count_tokens" && r.Method == http.MethodPost:
		if !jsonscan.Valid(rec.Decoded) {
			writeError(w, http.StatusBadRequest, anthropic.InvalidRequestError, "invalid JSON body", reqID)
			return
		}
		writeJSON(w, http.StatusOK, fmt.Appendf(nil, `{"input_tokens":%d}`, len(rec.Decoded)/4))
	case r.URL.Path == "/v1/models" && r.Method == http.MethodGet:
		s.models(w)
	case strings.HasPrefix(r.URL.Path, "/v1/models/") && r.Method == http.MethodGet:
		id := strings.TrimPrefix(r.URL.Path, "/v1/models/")
		for _, m := range s.opts.Models {
			if m == id {
				writeJSON(w, http.StatusOK, modelJSON(nil, m))
				return
			}
		}
		writeError(w, http.StatusNotFound, anthropic.NotFoundError, "model: "+id, reqID)
	default:
		writeError(w, http.StatusNotFound, anthropic.NotFoundError, "Not Found", reqID)
	}
}

func (s *Server) authorized(r *http.Request) bool {
	if r.Header.Get("x-api-key") == s.opts.APIKey {
		return true
	}
	return r.Header.Get("Authorization") == "Bearer "+s.opts.APIKey
}

func (s *Server) models(w http.ResponseWriter) {
	b := []byte(`{"data":[`)
	for i, m := range s.opts.Models {
		if i > 0 {
			b = append(b, ',')
		}
		b = modelJSON(b, m)
	}
	b = fmt.Appendf(b, `],"has_more":false,"first_id":%q,"last_id":%q}`, s.opts.Models[0], s.opts.Models[len(s.opts.Models)-1])
	writeJSON(w, http.StatusOK, b)
}

func modelJSON(b []byte, id string) []byte {
	return fmt.Appendf(b, `{"type":"model","id":%q,"display_name":%q,"created_at":"2025-10-01T00:00:00Z"}`, id, id)
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeError(w http.ResponseWriter, status int, typ, msg, reqID string) {
	writeJSON(w, status, anthropic.AppendErrorJSON(nil, typ, msg, reqID))
}

// next picks the answer to r.
func (s *Server) next(r *Request) Turn {
	s.mu.Lock()
	if len(s.queue) > 0 {
		t := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		return t
	}
	s.mu.Unlock()
	if s.opts.Script != nil {
		return s.opts.Script(r)
	}
	return Turn{Blocks: []Block{Text("ok")}}
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request, rec *Request, reqID string) {
	root, err := jsonscan.Root(rec.Decoded)
	if err != nil || jsonscan.KindOf(rec.Decoded, root) != jsonscan.Object {
		writeError(w, http.StatusBadRequest, anthropic.InvalidRequestError, "invalid JSON body", reqID)
		return
	}
	t := s.next(rec)
	if d := s.opts.Delay + t.Delay; d > 0 {
		if !sleep(r.Context(), d) {
			return
		}
	}
	for k, vs := range t.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if t.Raw != nil {
		status := t.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		_, _ = w.Write(t.Raw)
		return
	}
	if t.Status != 0 && t.Status != http.StatusOK {
		e := t.Error
		if e == nil {
			e = defaultError(t.Status)
		}
		writeError(w, t.Status, e.Type, e.Message, reqID)
		return
	}
	a := s.answer(rec, &t)
	if rec.Stream() {
		s.stream(w, r, &t, a)
		return
	}
	body := a.json()
	if t.ContentEncoding != "" {
		body = Compress(t.ContentEncoding, body)
		w.Header().Set("Content-Encoding", t.ContentEncoding)
	}
	writeJSON(w, http.StatusOK, body)
}

func defaultError(status int) *APIError {
	switch status {
	case 400:
		return &APIError{anthropic.InvalidRequestError, "invalid request"}
	case 401:
		return &APIError{anthropic.AuthenticationError, "invalid x-api-key"}
	case 403:
		return &APIError{anthropic.PermissionError, "permission denied"}
	case 404:
		return &APIError{anthropic.NotFoundError, "not found"}
	case 413:
		return &APIError{anthropic.RequestTooLarge, "Request exceeds the maximum allowed number of bytes."}
	case 429:
		return &APIError{anthropic.RateLimitError, "rate limited"}
	case 529:
		return &APIError{anthropic.OverloadedError, "Overloaded"}
	}
	return &APIError{anthropic.APIError, "Internal server error"}
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
