package openaitest

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// sseData returns the data lines of an SSE body, and the event names.
func sseData(t *testing.T, body string) (names []string, data []string) {
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			names = append(names, strings.TrimPrefix(line, "event: "))
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
	return names, data
}

func post(t *testing.T, s *Server, path, body string) string {
	res, err := http.Post(s.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

func TestResponsesStream(t *testing.T) {
	s := New(Options{Chunk: 3, Script: func(r *Request) Turn {
		return Turn{Items: []Item{Reasoning("thinking"), Call("exec_command", `{"cmd":"echo hi"}`), Text("done, it said hi")}, Usage: Usage{Input: 10, Cached: 90, Output: 7}}
	}})
	s.Start()
	defer s.Close()
	names, data := sseData(t, post(t, s, "/v1/responses", `{"model":"gpt-5.1-codex","stream":true,"input":[]}`))
	if names[0] != "response.created" || names[len(names)-1] != "response.completed" {
		t.Fatalf("events %v", names)
	}
	var done []map[string]any
	var args strings.Builder
	for _, d := range data {
		var ev map[string]any
		if err := json.Unmarshal([]byte(d), &ev); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		switch ev["type"] {
		case "response.output_item.done":
			done = append(done, ev["item"].(map[string]any))
		case "response.function_call_arguments.delta":
			args.WriteString(ev["delta"].(string))
		case "response.completed":
			u := ev["response"].(map[string]any)["usage"].(map[string]any)
			if u["input_tokens"].(float64) != 100 || u["input_tokens_details"].(map[string]any)["cached_tokens"].(float64) != 90 || u["output_tokens"].(float64) != 7 {
				t.Errorf("usage %v", u)
			}
		}
	}
	if len(done) != 3 || done[0]["type"] != "reasoning" || done[1]["call_id"] == "" || done[1]["arguments"] != `{"cmd":"echo hi"}` || args.String() != `{"cmd":"echo hi"}` {
		t.Errorf("items %v, args %q", done, args.String())
	}
	if got := s.Requests(); len(got) != 1 || got[0].Path != "/v1/responses" {
		t.Errorf("requests %+v", got)
	}
}

func TestChatStream(t *testing.T) {
	s := New(Options{Chunk: 4, Script: func(r *Request) Turn {
		return Turn{Items: []Item{Text("let me run it"), Call("bash", `{"command":"ls"}`)}, Usage: Usage{Input: 5, Cached: 15, Output: 3}}
	}})
	s.Start()
	defer s.Close()
	_, data := sseData(t, post(t, s, "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]}`))
	if data[len(data)-1] != "[DONE]" {
		t.Fatalf("last %q", data[len(data)-1])
	}
	var text, args strings.Builder
	finish := ""
	var usage map[string]any
	for _, d := range data[:len(data)-1] {
		var ch struct {
			Choices []struct {
				Delta struct {
					Content   string
					ToolCalls []struct{ Function struct{ Arguments string } } `json:"tool_calls"`
				}
				FinishReason *string `json:"finish_reason"`
			}
			Usage map[string]any
		}
		if err := json.Unmarshal([]byte(d), &ch); err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
			for _, tc := range c.Delta.ToolCalls {
				args.WriteString(tc.Function.Arguments)
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
		if ch.Usage != nil {
			usage = ch.Usage
		}
	}
	if text.String() != "let me run it" || args.String() != `{"command":"ls"}` || finish != "tool_calls" || usage["prompt_tokens"].(float64) != 20 {
		t.Errorf("text %q args %q finish %q usage %v", text.String(), args.String(), finish, usage)
	}
}

func TestJSONAndErrors(t *testing.T) {
	s := New(Options{Script: func(r *Request) Turn {
		if strings.Contains(string(r.Body), "fail") {
			return Turn{Status: 429}
		}
		return Turn{Items: []Item{Text("plain")}}
	}})
	s.Start()
	defer s.Close()
	for _, path := range []string{"/v1/responses", "/v1/chat/completions"} {
		var v map[string]any
		if err := json.Unmarshal([]byte(post(t, s, path, `{"model":"m"}`)), &v); err != nil || v["usage"] == nil {
			t.Errorf("%s: %v %v", path, v, err)
		}
		res, _ := http.Post(s.URL+path, "application/json", strings.NewReader(`{"model":"fail"}`))
		if res.StatusCode != 429 {
			t.Errorf("%s: scripted error gave %d", path, res.StatusCode)
		}
	}
}
