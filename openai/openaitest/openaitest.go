// Package openaitest is a scripted fake of the OpenAI Responses API (POST
// /v1/responses) and Chat Completions (POST /v1/chat/completions) for
// tests: it answers in the APIs' exact wire formats, streamed (SSE) or
// not, as the real clients need them (Codex: response.output_item.done
// for every item and response.completed; opencode: output_item.added
// before .done, a finish_reason), and records every request.
//
// What it answers comes from Options.Script, called with each request,
// else a default text answer. A Server is an http.Handler; Start runs it
// on 127.0.0.1. All methods are safe for concurrent use.
package openaitest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Item is one output item of a scripted answer.
type Item struct {
	// Type is "message" (assistant text), "function_call", "custom_tool_call"
	// or "reasoning".
	Type string
	Text string // message: the text; reasoning: the summary text
	// Name and Arguments are a function call's (Arguments raw JSON; for
	// a custom tool call, Input is its free-form input).
	Name, Arguments, Input string
	CallID                 string // "" generates one
	Encrypted              string // reasoning: the encrypted_content ("" generates one)
}

// Text returns an assistant text item.
func Text(s string) Item { return Item{Type: "message", Text: s} }

// Call returns a function call item; args is raw JSON.
func Call(name, args string) Item { return Item{Type: "function_call", Name: name, Arguments: args} }

// Reasoning returns a reasoning item with a summary.
func Reasoning(summary string) Item { return Item{Type: "reasoning", Text: summary} }

// Usage is the usage an answer reports.
type Usage struct{ Input, Cached, Output int }

// Turn is one scripted answer.
type Turn struct {
	Items []Item
	Usage Usage // zero: estimated from the request and answer sizes
	// Status, when not 0 or 200, answers with that status and an error
	// body instead.
	Status int
}

// Request is one request the Server received.
type Request struct {
	Index  int
	Method string
	Path   string
	Header http.Header
	Body   []byte
	Time   time.Time
}

// JSON decodes the request body into v.
func (r *Request) JSON(v any) error { return json.Unmarshal(r.Body, v) }

// Options configure a Server.
type Options struct {
	// Script returns the answer to a request (for either API).
	Script func(r *Request) Turn
	// Chunk is the size of text and argument deltas (default 24).
	Chunk int
}

// Server is the fake.
type Server struct {
	*httptest.Server
	opts Options
	mu   sync.Mutex
	reqs []Request
	n    int
}

// New returns a Server that is not started.
func New(opts Options) *Server {
	if opts.Chunk <= 0 {
		opts.Chunk = 24
	}
	return &Server{opts: opts}
}

// Start serves on 127.0.0.1 until Close.
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

func (s *Server) id(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return fmt.Sprintf("%s_fake%016d", prefix, s.n)
}

// ServeHTTP records a request and answers it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	rec := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Time: time.Now()}
	s.mu.Lock()
	rec.Index = len(s.reqs)
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		http.Error(w, "no websocket here", http.StatusUpgradeRequired)
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if r.Method != http.MethodPost || json.Unmarshal(body, &req) != nil {
		writeError(w, http.StatusBadRequest, "invalid request")
		return
	}
	t := Turn{Items: []Item{Text("ok")}}
	if s.opts.Script != nil {
		t = s.opts.Script(&rec)
	}
	if t.Status != 0 && t.Status != 200 {
		writeError(w, t.Status, "scripted error")
		return
	}
	out := 0
	for i := range t.Items {
		it := &t.Items[i]
		out += len(it.Text) + len(it.Arguments) + len(it.Input)
		if (it.Type == "function_call" || it.Type == "custom_tool_call") && it.CallID == "" {
			it.CallID = s.id("call")
		}
		if it.Type == "reasoning" && it.Encrypted == "" {
			it.Encrypted = "gAAAAAB" + s.id("enc")
		}
	}
	if t.Usage == (Usage{}) {
		t.Usage = Usage{Input: len(body) / 4, Output: out/4 + 1}
	}
	switch r.URL.Path {
	case "/v1/responses":
		s.responses(w, req.Model, req.Stream, t)
	case "/v1/chat/completions":
		s.chat(w, req.Model, req.Stream, body, t)
	default:
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error","param":null,"code":null}}`, msg)
}

func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func chunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		k := min(n, len(s))
		for k < len(s) && k > 0 && s[k]&0xC0 == 0x80 {
			k--
		}
		if k == 0 {
			k = min(n, len(s))
		}
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

// sse writes events flushed one by one.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	f, _ := w.(http.Flusher)
	return sse{w, f}
}

func (e sse) send(name, data string) {
	if name != "" {
		io.WriteString(e.w, "event: "+name+"\n")
	}
	io.WriteString(e.w, "data: "+data+"\n\n")
	if e.f != nil {
		e.f.Flush()
	}
}

// itemJSON renders a Responses output item as done.
func itemJSON(it Item, id string) string {
	switch it.Type {
	case "message":
		return `{"id":` + q(id) + `,"type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":` + q(it.Text) + `,"annotations":[],"logprobs":[]}]}`
	case "function_call":
		return `{"id":` + q(id) + `,"type":"function_call","status":"completed","arguments":` + q(it.Arguments) + `,"call_id":` + q(it.CallID) + `,"name":` + q(it.Name) + `}`
	case "custom_tool_call":
		return `{"id":` + q(id) + `,"type":"custom_tool_call","status":"completed","call_id":` + q(it.CallID) + `,"name":` + q(it.Name) + `,"input":` + q(it.Input) + `}`
	case "reasoning":
		return `{"id":` + q(id) + `,"type":"reasoning","summary":[{"type":"summary_text","text":` + q(it.Text) + `}],"encrypted_content":` + q(it.Encrypted) + `}`
	}
	return `{"id":` + q(id) + `,"type":` + q(it.Type) + `}`
}

func (s *Server) responses(w http.ResponseWriter, model string, stream bool, t Turn) {
	rid := s.id("resp")
	ids := make([]string, len(t.Items))
	for i, it := range t.Items {
		prefix := map[string]string{"message": "msg", "function_call": "fc", "custom_tool_call": "ctc", "reasoning": "rs"}[it.Type]
		ids[i] = s.id(prefix)
	}
	usage := fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":%d}`,
		t.Usage.Input+t.Usage.Cached, t.Usage.Cached, t.Usage.Output, t.Usage.Input+t.Usage.Cached+t.Usage.Output)
	resp := func(status, output, usage string) string {
		return `{"id":` + q(rid) + `,"object":"response","created_at":1795462542,"status":` + q(status) + `,"error":null,"model":` + q(model) +
			`,"output":[` + output + `],"parallel_tool_calls":true,"previous_response_id":null,"store":false,"usage":` + usage + `}`
	}
	var done []string
	for i, it := range t.Items {
		done = append(done, itemJSON(it, ids[i]))
	}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, resp("completed", strings.Join(done, ","), usage))
		return
	}
	e := newSSE(w)
	seq := 0
	send := func(name, data string) {
		e.send(name, data[:len(data)-1]+fmt.Sprintf(`,"sequence_number":%d}`, seq))
		seq++
	}
	send("response.created", `{"type":"response.created","response":`+resp("in_progress", "", "null")+`}`)
	send("response.in_progress", `{"type":"response.in_progress","response":`+resp("in_progress", "", "null")+`}`)
	for i, it := range t.Items {
		idx := fmt.Sprint(i)
		added := done[i]
		switch it.Type {
		case "message":
			added = `{"id":` + q(ids[i]) + `,"type":"message","status":"in_progress","role":"assistant","content":[]}`
		case "function_call":
			added = `{"id":` + q(ids[i]) + `,"type":"function_call","status":"in_progress","arguments":"","call_id":` + q(it.CallID) + `,"name":` + q(it.Name) + `}`
		case "reasoning":
			added = `{"id":` + q(ids[i]) + `,"type":"reasoning","summary":[]}`
		}
		send("response.output_item.added", `{"type":"response.output_item.added","output_index":`+idx+`,"item":`+added+`}`)
		switch it.Type {
		case "message":
			send("response.content_part.added", `{"type":"response.content_part.added","item_id":`+q(ids[i])+`,"output_index":`+idx+`,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`)
			for _, c := range chunks(it.Text, s.opts.Chunk) {
				send("response.output_text.delta", `{"type":"response.output_text.delta","item_id":`+q(ids[i])+`,"output_index":`+idx+`,"content_index":0,"delta":`+q(c)+`}`)
			}
			send("response.output_text.done", `{"type":"response.output_text.done","item_id":`+q(ids[i])+`,"output_index":`+idx+`,"content_index":0,"text":`+q(it.Text)+`}`)
			send("response.content_part.done", `{"type":"response.content_part.done","item_id":`+q(ids[i])+`,"output_index":`+idx+`,"content_index":0,"part":{"type":"output_text","text":`+q(it.Text)+`,"annotations":[]}}`)
		case "function_call":
			for _, c := range chunks(it.Arguments, s.opts.Chunk) {
				send("response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","item_id":`+q(ids[i])+`,"output_index":`+idx+`,"delta":`+q(c)+`}`)
			}
			send("response.function_call_arguments.done", `{"type":"response.function_call_arguments.done","item_id":`+q(ids[i])+`,"output_index":`+idx+`,"arguments":`+q(it.Arguments)+`}`)
		}
		send("response.output_item.done", `{"type":"response.output_item.done","output_index":`+idx+`,"item":`+done[i]+`}`)
	}
	send("response.completed", `{"type":"response.completed","response":`+resp("completed", strings.Join(done, ","), usage)+`}`)
}

func (s *Server) chat(w http.ResponseWriter, model string, stream bool, body []byte, t Turn) {
	var req struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	_ = json.Unmarshal(body, &req)
	id := s.id("chatcmpl")
	var text strings.Builder
	var calls []Item
	for _, it := range t.Items {
		switch it.Type {
		case "message":
			text.WriteString(it.Text)
		case "function_call":
			calls = append(calls, it)
		}
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d},"completion_tokens_details":{"reasoning_tokens":0}}`,
		t.Usage.Input+t.Usage.Cached, t.Usage.Output, t.Usage.Input+t.Usage.Cached+t.Usage.Output, t.Usage.Cached)
	head := `{"id":` + q(id) + `,"object":"chat.completion.chunk","created":1795462542,"model":` + q(model)
	if !stream {
		var tc []string
		for _, c := range calls {
			tc = append(tc, `{"id":`+q(c.CallID)+`,"type":"function","function":{"name":`+q(c.Name)+`,"arguments":`+q(c.Arguments)+`}}`)
		}
		msg := `{"role":"assistant","content":` + q(text.String())
		if len(tc) > 0 {
			msg += `,"tool_calls":[` + strings.Join(tc, ",") + `]`
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":`+q(id)+`,"object":"chat.completion","created":1795462542,"model":`+q(model)+
			`,"choices":[{"index":0,"message":`+msg+`},"finish_reason":`+q(finish)+`}],"usage":`+usage+`}`)
		return
	}
	e := newSSE(w)
	chunk := func(delta, fin string) {
		f := "null"
		if fin != "" {
			f = q(fin)
		}
		e.send("", head+`,"choices":[{"index":0,"delta":`+delta+`,"finish_reason":`+f+`}]}`)
	}
	chunk(`{"role":"assistant","content":"","refusal":null}`, "")
	for _, c := range chunks(text.String(), s.opts.Chunk) {
		chunk(`{"content":`+q(c)+`}`, "")
	}
	for i, c := range calls {
		chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%s,"type":"function","function":{"name":%s,"arguments":""}}]}`, i, q(c.CallID), q(c.Name)), "")
		for _, a := range chunks(c.Arguments, s.opts.Chunk) {
			chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, q(a)), "")
		}
	}
	chunk(`{}`, finish)
	if req.StreamOptions.IncludeUsage {
		e.send("", head+`,"choices":[],"usage":`+usage+`}`)
	}
	e.send("", "[DONE]")
}
