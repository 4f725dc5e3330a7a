package anthropictest

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/anthropic"
)

type sseEvent struct {
	Name string
	Data map[string]any
	Raw  string
}

func post(t *testing.T, url, body string, h http.Header) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header[k] = v
	}
	res, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

func parseSSE(t *testing.T, b []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	for raw := range strings.SplitSeq(strings.TrimSuffix(string(b), "\n\n"), "\n\n") {
		lines := strings.Split(raw, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "event: ") || !strings.HasPrefix(lines[1], "data: ") {
			t.Fatalf("malformed event %q", raw)
		}
		e := sseEvent{Name: strings.TrimPrefix(lines[0], "event: "), Raw: raw}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "data: ")), &e.Data); err != nil {
			t.Fatalf("event data %q: %v", lines[1], err)
		}
		if e.Data["type"] != e.Name {
			t.Errorf("event %q has data type %v", e.Name, e.Data["type"])
		}
		out = append(out, e)
	}
	return out
}

// rebuild assembles the content blocks of a stream the way an SDK does.
func rebuild(t *testing.T, evs []sseEvent) (blocks []map[string]any, stop string, usage map[string]any) {
	t.Helper()
	partial := map[int]string{}
	for _, e := range evs {
		switch e.Name {
		case "content_block_start":
			blocks = append(blocks, e.Data["content_block"].(map[string]any))
		case "content_block_delta":
			i := int(e.Data["index"].(float64))
			d := e.Data["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				blocks[i]["text"] = blocks[i]["text"].(string) + d["text"].(string)
			case "thinking_delta":
				blocks[i]["thinking"] = blocks[i]["thinking"].(string) + d["thinking"].(string)
			case "signature_delta":
				blocks[i]["signature"] = d["signature"]
			case "input_json_delta":
				partial[i] += d["partial_json"].(string)
			default:
				t.Errorf("unknown delta %v", d["type"])
			}
		case "content_block_stop":
			i := int(e.Data["index"].(float64))
			if s, ok := partial[i]; ok {
				var in any
				if err := json.Unmarshal([]byte(s), &in); err != nil {
					t.Fatalf("tool input %q: %v", s, err)
				}
				blocks[i]["input"] = in
			}
		case "message_delta":
			stop = e.Data["delta"].(map[string]any)["stop_reason"].(string)
			usage = e.Data["usage"].(map[string]any)
		}
	}
	return blocks, stop, usage
}

func TestStreamAndJSONAnswersAgree(t *testing.T) {
	turn := Turn{
		Blocks: []Block{
			Thinking("I should list the files first. ü", "RXVnZW5pYQ=="),
			Text("Let me look — ✓ done?"),
			ToolUse("toolu_01", "Bash", `{"command":"ls -la \"dir\"","description":"List files"}`),
			RedactedThinking("ZW5jcnlwdGVk"),
		},
		Usage: anthropic.Usage{InputTokens: 10, CacheCreationInputTokens: 20, CacheReadInputTokens: 30, OutputTokens: 40},
		Ping:  true,
	}
	s := NewServer(Options{Turns: []Turn{turn, turn}, TextChunk: 5, JSONChunk: 7})
	defer s.Close()

	res, body := post(t, s.URL+"/v1/messages?beta=true", `{"model":"claude-opus-4-8","stream":true,"context_management":{"edits":[]},"messages":[]}`, nil)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" || !strings.HasPrefix(res.Header.Get("Request-Id"), "req_") {
		t.Fatalf("stream answer %d %v", res.StatusCode, res.Header)
	}
	evs := parseSSE(t, body)
	var names []string
	for _, e := range evs {
		names = append(names, e.Name)
	}
	if names[0] != "message_start" || names[1] != "ping" || names[len(names)-2] != "message_delta" || names[len(names)-1] != "message_stop" {
		t.Errorf("event order %v", names)
	}
	blocks, stop, usage := rebuild(t, evs)
	if !strings.Contains(string(body), `"context_management":{"applied_edits":[]}`) {
		t.Error("message_delta lacks context_management although the request had it")
	}

	res, body = post(t, s.URL+"/v1/messages", `{"model":"claude-opus-4-8","messages":[]}`, nil)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("JSON answer %d %v", res.StatusCode, res.Header)
	}
	var msg struct {
		Type       string           `json:"type"`
		Role       string           `json:"role"`
		Model      string           `json:"model"`
		Content    []map[string]any `json:"content"`
		StopReason string           `json:"stop_reason"`
		Usage      map[string]any   `json:"usage"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatal(err)
	}
	if msg.Type != "message" || msg.Role != "assistant" || msg.Model != "claude-opus-4-8" {
		t.Errorf("message %+v", msg)
	}
	if diff := cmp.Diff(msg.Content, blocks); diff != "" {
		t.Errorf("streamed blocks differ from the JSON answer (-json +stream)\n%s", diff)
	}
	if stop != "tool_use" || msg.StopReason != "tool_use" {
		t.Errorf("stop reasons %q %q", stop, msg.StopReason)
	}
	if diff := cmp.Diff(msg.Usage, usage); diff != "" {
		t.Errorf("usage (-json +stream)\n%s", diff)
	}
	tap := anthropic.NewUsageTap("application/json")
	tap.Write(body)
	if u, ok := tap.Usage(); !ok || u != turn.Usage {
		t.Errorf("usage read back %+v", u)
	}
}

func TestRecordsRequests(t *testing.T) {
	s := NewServer(Options{})
	defer s.Close()
	gz := Compress("gzip", []byte(`{"model":"m","stream":true,"messages":[]}`))
	req, _ := http.NewRequest("POST", s.URL+"/v1/messages?beta=true", bytes.NewReader(gz))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("X-Api-Key", "k")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	rs := s.MessagesRequests()
	if len(rs) != 1 {
		t.Fatalf("%d requests", len(rs))
	}
	r := rs[0]
	if r.Method != "POST" || r.Path != "/v1/messages" || r.RawQuery != "beta=true" || r.Header.Get("X-Api-Key") != "k" ||
		!bytes.Equal(r.Body, gz) || string(r.Decoded) != `{"model":"m","stream":true,"messages":[]}` || !r.Stream() {
		t.Errorf("recorded %+v", r)
	}
	if res.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Errorf("a gzip-coded streaming request got %q", res.Header.Get("Content-Type"))
	}
	s.Reset()
	if len(s.Requests()) != 0 {
		t.Error("Reset kept requests")
	}
}

func TestOtherEndpoints(t *testing.T) {
	s := NewServer(Options{APIKey: "sk-test", Models: []string{"claude-a", "claude-b"}})
	defer s.Close()
	auth := http.Header{"X-Api-Key": {"sk-test"}}
	res, body := post(t, s.URL+"/v1/messages/count_tokens", `{"model":"m","messages":[{"role":"user","content":"hello there"}]}`, auth)
	if res.StatusCode != 200 || !strings.HasPrefix(string(body), `{"input_tokens":`) {
		t.Errorf("count_tokens %d %s", res.StatusCode, body)
	}
	get := func(path string, h http.Header) (int, string) {
		req, _ := http.NewRequest("GET", s.URL+path, nil)
		req.Header = h
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, b := get("/v1/models", auth); code != 200 || !strings.Contains(b, `"id":"claude-b"`) || !strings.Contains(b, `"has_more":false`) {
		t.Errorf("models %d %s", code, b)
	}
	if code, b := get("/v1/models/claude-a", auth); code != 200 || !strings.Contains(b, `"type":"model"`) {
		t.Errorf("model %d %s", code, b)
	}
	if code, b := get("/v1/models/nope", auth); code != 404 || !strings.Contains(b, "not_found_error") {
		t.Errorf("missing model %d %s", code, b)
	}
	if code, b := get("/v1/nothing", auth); code != 404 || !strings.Contains(b, `"type":"error"`) {
		t.Errorf("unknown path %d %s", code, b)
	}
	if code, b := get("/v1/models", nil); code != 401 || !strings.Contains(b, "authentication_error") {
		t.Errorf("no key %d %s", code, b)
	}
	if code, _ := get("/v1/models", http.Header{"Authorization": {"Bearer sk-test"}}); code != 200 {
		t.Errorf("bearer token %d", code)
	}
	res, body = post(t, s.URL+"/v1/messages", `{"messages":[`, auth)
	if res.StatusCode != 400 || !strings.Contains(string(body), "invalid_request_error") {
		t.Errorf("invalid JSON %d %s", res.StatusCode, body)
	}
}

func TestErrorsAndScript(t *testing.T) {
	var seen []int
	s := NewServer(Options{
		Turns: []Turn{
			{Status: 529},
			{Status: 429, Header: http.Header{"Retry-After": {"3"}}, Error: &APIError{"rate_limit_error", "slow down"}},
			{Blocks: []Block{Text("partial answer that is long")}, Error: &APIError{"overloaded_error", "Overloaded"}, ErrorAfter: 3},
		},
		Script: func(r *Request) Turn {
			seen = append(seen, r.Index)
			return Turn{Blocks: []Block{Text("scripted")}, StopReason: "max_tokens"}
		},
	})
	defer s.Close()
	req := `{"model":"m","stream":true,"messages":[]}`
	res, body := post(t, s.URL+"/v1/messages", req, nil)
	if res.StatusCode != 529 || !strings.Contains(string(body), `"overloaded_error"`) || !strings.Contains(string(body), `"request_id":"req_`) {
		t.Errorf("529: %s", body)
	}
	res, body = post(t, s.URL+"/v1/messages", req, nil)
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "3" || !strings.Contains(string(body), "slow down") {
		t.Errorf("429: %s", body)
	}
	res, body = post(t, s.URL+"/v1/messages", req, nil)
	evs := parseSSE(t, body)
	if len(evs) != 4 || evs[3].Name != "error" || evs[3].Data["error"].(map[string]any)["type"] != "overloaded_error" {
		t.Errorf("mid-stream error: %d events, last %q", len(evs), evs[len(evs)-1].Raw)
	}
	_, body = post(t, s.URL+"/v1/messages", req, nil)
	if _, stop, _ := rebuild(t, parseSSE(t, body)); stop != "max_tokens" || len(seen) != 1 || seen[0] != 3 {
		t.Errorf("script: stop %q, seen %v", stop, seen)
	}
}

func TestCompressedAnswers(t *testing.T) {
	for _, coding := range []string{"gzip", "br", "zstd", "deflate"} {
		s := NewServer(Options{Turns: []Turn{{Blocks: []Block{Text("compressed hello")}, ContentEncoding: coding}}})
		res, body := post(t, s.URL+"/v1/messages", `{"model":"m","stream":true,"messages":[]}`, nil)
		s.Close()
		if res.Header.Get("Content-Encoding") != coding {
			t.Fatalf("%s: encoding %q", coding, res.Header.Get("Content-Encoding"))
		}
		plain := decode(coding, body)
		if bytes.Equal(plain, body) {
			t.Fatalf("%s: body not compressed", coding)
		}
		blocks, _, _ := rebuild(t, parseSSE(t, plain))
		if len(blocks) != 1 || blocks[0]["text"] != "compressed hello" {
			t.Errorf("%s: %v", coding, blocks)
		}
	}
}

func TestStartOnListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{})
	s.StartOn(l)
	defer s.Close()
	if s.URL != "http://"+l.Addr().String() {
		t.Errorf("URL %q for %s", s.URL, l.Addr())
	}
	res, body := post(t, s.URL+"/v1/messages", `{"model":"m","messages":[]}`, nil)
	if res.StatusCode != 200 || !strings.Contains(string(body), `"text":"ok"`) {
		t.Errorf("%d %s", res.StatusCode, body)
	}
}
