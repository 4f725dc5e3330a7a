package responses

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/openai"
	"github.com/ctxguard/ctxguard/protocol"
)

// tapAll feeds body to a new tap in two writes split at every byte, and
// in single bytes, and checks that every feeding gives the same usage.
func tapAll(t *testing.T, contentType string, body []byte) (protocol.Usage, bool) {
	t.Helper()
	one := func(chunks ...[]byte) (protocol.Usage, bool) {
		tp := Protocol.NewUsageTap(contentType)
		for _, c := range chunks {
			if n, err := tp.Write(c); n != len(c) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		return tp.Usage()
	}
	want, wok := one(body)
	for i := 0; i <= len(body); i++ {
		got, ok := one(body[:i], body[i:])
		if ok != wok || got != want {
			t.Fatalf("split at %d: %+v %v, want %+v %v", i, got, ok, want, wok)
		}
	}
	var bytes [][]byte
	for i := range body {
		bytes = append(bytes, body[i:i+1])
	}
	if got, ok := one(bytes...); ok != wok || got != want {
		t.Fatalf("byte by byte: %+v %v, want %+v %v", got, ok, want, wok)
	}
	return want, wok
}

func TestUsageTapCaptures(t *testing.T) {
	tests := []struct {
		file string
		want protocol.Usage
	}{
		// usage {"input_tokens":6270,"input_tokens_details":{"cached_tokens":512},"output_tokens":42,...}
		{"codex-first-0001.resp.raw", protocol.Usage{Input: 6270 - 512, CacheRead: 512, Output: 42}},
		{"codex-ok-no-event-lines-0001.resp.raw", protocol.Usage{}},
		{"codex-http-multiturn-0006.resp.raw", protocol.Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body := read(t, "testdata/codex/"+tt.file)
			got, ok := tapAll(t, "text/event-stream; charset=utf-8", body)
			if !ok {
				t.Fatal("no usage found")
			}
			if tt.want != (protocol.Usage{}) && got != tt.want {
				t.Errorf("usage = %+v, want %+v", got, tt.want)
			}
			if got.PromptTokens() == 0 || got.Output == 0 {
				t.Errorf("usage = %+v", got)
			}
		})
	}
}

func TestUsageTap(t *testing.T) {
	usage := `{"input_tokens":100,"input_tokens_details":{"cached_tokens":60},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":107}`
	tests := []struct {
		name, ct, body string
		want           protocol.Usage
		ok             bool
	}{
		{"json answer", "application/json", `{"id":"resp_1","object":"response","output":[{"type":"message"}],"usage":` + usage + `}`,
			protocol.Usage{Input: 40, CacheRead: 60, Output: 7}, true},
		{"json without usage", "application/json", `{"id":"resp_1","usage":null}`, protocol.Usage{}, false},
		{"incomplete", "text/event-stream", "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"usage\":" + usage + "}}\n\n",
			protocol.Usage{Input: 40, CacheRead: 60, Output: 7}, true},
		{"no event lines, CRLF", "text/event-stream", "data: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\r\n\r\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":" + usage + "}}\r\n\r\n",
			protocol.Usage{Input: 40, CacheRead: 60, Output: 7}, true},
		{"usage null", "text/event-stream", "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":null}}\n\n", protocol.Usage{}, false},
		{"no cached details", "text/event-stream", "event: response.completed\ndata: {\"response\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
			protocol.Usage{Input: 5, Output: 1}, true},
		{"other content type", "text/plain", usage, protocol.Usage{}, false},
		{"error answer", "application/json", `{"error":{"message":"x"}}`, protocol.Usage{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tapAll(t, tt.ct, []byte(tt.body))
			if ok != tt.ok || got != tt.want {
				t.Errorf("usage = %+v %v, want %+v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestProtocol(t *testing.T) {
	p := Protocol
	if p.Name() != "responses" || p.Family() != openai.Family {
		t.Errorf("Name, Family = %q, %q", p.Name(), p.Family())
	}
	h := http.Header{}
	ant := http.Header{"Anthropic-Version": {"2023-06-01"}}
	claims := []struct {
		method, path string
		h            http.Header
		want         protocol.Claim
	}{
		{"POST", "/v1/responses", h, protocol.Yes},
		{"GET", "/v1/responses", h, protocol.Yes}, // the WebSocket upgrade
		{"POST", "/v1/responses/compact", h, protocol.Yes},
		{"GET", "/v1/responses/resp_1/input_items", ant, protocol.Yes},
		{"GET", "/v1/models", h, protocol.Maybe},
		{"POST", "/v1/messages", ant, protocol.No},
	}
	for _, c := range claims {
		if got := p.Claim(c.method, c.path, c.h); got != c.want {
			t.Errorf("Claim(%s %s) = %v, want %v", c.method, c.path, got, c.want)
		}
	}
	rewritable := map[[2]string]bool{
		{"POST", "/v1/responses"}: true, {"POST", "/v1/responses/compact"}: false,
		{"GET", "/v1/responses"}: false, {"POST", "/v1/chat/completions"}: false,
	}
	for k, want := range rewritable {
		if got := p.Rewritable(k[0], k[1]); got != want {
			t.Errorf("Rewritable(%s %s) = %v", k[0], k[1], got)
		}
	}
	got := string(p.AppendError(nil, protocol.TooLarge, "too big", "e1"))
	if want := string(openai.AppendError(nil, protocol.TooLarge, "too big", "e1")); got != want || !strings.Contains(got, `"request_too_large"`) {
		t.Errorf("AppendError = %s", got)
	}
	body := Session([]Round{{Output: "x"}})
	c, err := p.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := p.ParseAfter(body, c, p.Stable(c, body))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Dump(c), Dump(c2)); diff != "" {
		t.Error(diff)
	}
}
