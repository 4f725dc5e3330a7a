// Package geminitest is a scripted fake of the Gemini API for tests:
// POST /v1beta/models/{model}:generateContent answers one JSON object,
// :streamGenerateContent?alt=sse answers SSE ("data: {...}\r\n\r\n" per
// chunk, as the API writes it), :streamGenerateContent without alt=sse
// the JSON array stream ("[{...}\r\n,\r\n{...}]"), and :countTokens
// {"totalTokens":N}; the same on /v1/. Every chunk of a stream carries
// usageMetadata, the last one complete, as the API sends it. It records
// every request.
//
// What it answers comes from Options.Script, called with each request,
// else a text answer. A Server is an http.Handler; Start runs it on
// 127.0.0.1. All methods are safe for concurrent use.
package geminitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/gemini"
)

// Part is one part of a scripted answer.
type Part struct {
	Text    string
	Thought bool // a thought summary part
	// Call, when Name is set, makes the part a functionCall with Args
	// (raw JSON; "" is {}).
	Call struct{ Name, Args, ID string }
	// Signature is the part's thoughtSignature ("" for none).
	Signature string
}

// Text returns a text part.
func Text(s string) Part { return Part{Text: s} }

// Call returns a functionCall part carrying signature sig ("" for none).
func Call(name, args, sig string) Part {
	p := Part{Signature: sig}
	p.Call.Name, p.Call.Args = name, args
	return p
}

// Usage is the usageMetadata of an answer.
type Usage struct{ Prompt, Cached, Output, Thoughts int }

// Turn is one scripted answer.
type Turn struct {
	Parts []Part
	Usage Usage // zero: Prompt estimated from the request's size
	// Status, when not 0 or 200, answers with that status and an error
	// of the API's shape whose message is Message.
	Status  int
	Message string
}

// Request is one request the Server received.
type Request struct {
	Index         int
	Method, Path  string
	Query         string
	Model, Action string // from the path
	Header        http.Header
	Body          []byte
	Time          time.Time
}

// Options configure a Server.
type Options struct {
	Script func(r *Request) Turn
}

// Server is the fake.
type Server struct {
	*httptest.Server
	opts Options
	mu   sync.Mutex
	reqs []Request
}

// New returns a Server; call Start to listen.
func New(opts Options) *Server { return &Server{opts: opts} }

// Start serves on 127.0.0.1.
func (s *Server) Start() { s.Server = httptest.NewServer(s) }

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Reset forgets the requests received so far.
func (s *Server) Reset() {
	s.mu.Lock()
	s.reqs = nil
	s.mu.Unlock()
}

// ServeHTTP answers one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "unreadable body")
		return
	}
	path := r.URL.Path
	if i := strings.Index(path, "/v1"); i > 0 {
		path = path[i:] // behind a gateway's prefix
	}
	model, action, ok := gemini.SplitPath(path)
	s.mu.Lock()
	req := Request{Index: len(s.reqs), Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Model: model, Action: action,
		Header: r.Header.Clone(), Body: body, Time: time.Now()}
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	if !ok || r.Method != http.MethodPost {
		writeError(w, http.StatusNotFound, "no such method")
		return
	}
	if !json.Valid(body) {
		writeError(w, http.StatusBadRequest, "Invalid JSON payload received.")
		return
	}
	if action == "countTokens" {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		fmt.Fprintf(w, "{\n  \"totalTokens\": %d\n}\n", len(body)/4)
		return
	}
	t := Turn{Parts: []Part{Text("ok")}}
	if s.opts.Script != nil {
		t = s.opts.Script(&req)
	}
	if t.Status != 0 && t.Status != http.StatusOK {
		writeError(w, t.Status, t.Message)
		return
	}
	if t.Usage == (Usage{}) {
		t.Usage = Usage{Prompt: len(body) / 4, Output: 10}
	}
	switch {
	case action == "generateContent":
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.Write(chunk(t.Parts, model, t.Usage, true))
	case action == "streamGenerateContent" && r.URL.Query().Get("alt") == "sse":
		w.Header().Set("Content-Type", "text/event-stream")
		fl, _ := w.(http.Flusher)
		for i, p := range t.Parts {
			u := Usage{Prompt: t.Usage.Prompt}
			last := i == len(t.Parts)-1
			if last {
				u = t.Usage
			}
			fmt.Fprintf(w, "data: %s\r\n\r\n", chunk([]Part{p}, model, u, last))
			if fl != nil {
				fl.Flush()
			}
		}
	case action == "streamGenerateContent":
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.Write([]byte("["))
		for i, p := range t.Parts {
			u := Usage{Prompt: t.Usage.Prompt}
			last := i == len(t.Parts)-1
			if last {
				u = t.Usage
			}
			if i > 0 {
				w.Write([]byte("\r\n,\r\n"))
			}
			w.Write(chunk([]Part{p}, model, u, last))
		}
		w.Write([]byte("]"))
	default:
		writeError(w, http.StatusNotFound, "no such method")
	}
}

// chunk renders one GenerateContentResponse.
func chunk(parts []Part, model string, u Usage, last bool) []byte {
	type fc struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
		ID   string          `json:"id,omitempty"`
	}
	type part struct {
		Text      string `json:"text,omitempty"`
		Thought   bool   `json:"thought,omitempty"`
		Call      *fc    `json:"functionCall,omitempty"`
		Signature string `json:"thoughtSignature,omitempty"`
	}
	var ps []part
	for _, p := range parts {
		q := part{Text: p.Text, Thought: p.Thought, Signature: p.Signature}
		if p.Call.Name != "" {
			args := p.Call.Args
			if args == "" {
				args = "{}"
			}
			q.Call = &fc{p.Call.Name, json.RawMessage(args), p.Call.ID}
		}
		ps = append(ps, q)
	}
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": ps}, "index": 0}
	if last {
		cand["finishReason"] = "STOP"
	}
	um := map[string]int{"promptTokenCount": u.Prompt, "totalTokenCount": u.Prompt + u.Output + u.Thoughts}
	if u.Output > 0 {
		um["candidatesTokenCount"] = u.Output
	}
	if u.Thoughts > 0 {
		um["thoughtsTokenCount"] = u.Thoughts
	}
	if u.Cached > 0 {
		um["cachedContentTokenCount"] = u.Cached
	}
	b, _ := json.Marshal(map[string]any{"candidates": []any{cand}, "usageMetadata": um, "modelVersion": model, "responseId": "fake"})
	return b
}

// Overflow returns the Turn of the API's answer to a prompt over the
// model's limit.
func Overflow(tokens, limit int) Turn {
	return Turn{Status: http.StatusBadRequest,
		Message: fmt.Sprintf("The input token count (%d) exceeds the maximum number of tokens allowed (%d).", tokens, limit)}
}

// writeError answers an error in the API's shape.
func writeError(w http.ResponseWriter, status int, msg string) {
	names := map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}
	name := names[status]
	if name == "" {
		name = "INTERNAL"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": status, "message": msg, "status": name}})
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	w.Write(b)
}
