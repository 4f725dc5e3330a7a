package gemini

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/protocol"
)

const chunkUsage = `"usageMetadata":{"promptTokenCount":1200,"candidatesTokenCount":30,"totalTokenCount":1300,"thoughtsTokenCount":70,"cachedContentTokenCount":1000,"promptTokensDetails":[{"modality":"TEXT","tokenCount":1200}]}`

// answers are one answer in the API's three shapes, the usage in its
// last chunk.
var shapesOfAnswers = []struct {
	name, contentType, body string
}{
	{"sse", "text/event-stream", "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"a\\\"}\"}]}}],\"usageMetadata\":{\"promptTokenCount\":1200}}\r\n\r\n" +
		"data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"b\"}]},\"finishReason\":\"STOP\"}]," + chunkUsage + "}\r\n\r\n"},
	{"json array", "application/json; charset=UTF-8", "[{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"[{a}]\"}]}}],\"usageMetadata\":{\"promptTokenCount\":1200}}\r\n,\r\n" +
		"{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"b\"}]}}]," + chunkUsage + "}\r\n]"},
	{"json", "application/json", "{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"b\"}]}}]," + chunkUsage + "}"},
}

// TestUsageTap reads the usage of each shape fed whole and cut at every
// byte.
func TestUsageTap(t *testing.T) {
	want := protocol.Usage{Input: 200, CacheRead: 1000, Output: 100}
	for _, a := range shapesOfAnswers {
		for cut := 0; cut <= len(a.body); cut++ {
			tp := Protocol.NewUsageTap(a.contentType)
			tp.Write([]byte(a.body[:cut]))
			tp.Write([]byte(a.body[cut:]))
			got, ok := tp.Usage()
			if !ok || got != want {
				t.Fatalf("%s cut at %d: %+v %v, want %+v", a.name, cut, got, ok, want)
			}
		}
	}
	if _, ok := NewUsageTap("text/plain").Usage(); ok {
		t.Error("a text/plain answer gave usage")
	}
}

func TestParseUsage(t *testing.T) {
	u, ok := ParseUsage([]byte(`{"promptTokenCount":100,"toolUsePromptTokenCount":5,"candidatesTokenCount":7}`))
	if d := cmp.Diff(protocol.Usage{Input: 105, Output: 7}, u); !ok || d != "" {
		t.Errorf("%v %s", ok, d)
	}
	if _, ok := ParseUsage([]byte(`[]`)); ok {
		t.Error("an array read as usage")
	}
}

func TestAppendError(t *testing.T) {
	for k := protocol.Internal; k <= protocol.GatewayTimeout+1; k++ {
		b := AppendError(nil, k, `bad "thing"`, "ctxguard_1")
		var e struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Status  string `json:"status"`
				ID      string `json:"ctxguard_error_id"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("kind %d: %v: %s", k, err, b)
		}
		if e.Error.Code < 400 || e.Error.Status == "" || e.Error.Message != `bad "thing"` || e.Error.ID != "ctxguard_1" {
			t.Errorf("kind %d: %s", k, b)
		}
	}
	if ErrorStatus(protocol.Overloaded, 529) != http.StatusServiceUnavailable || ErrorStatus(protocol.InvalidRequest, 400) != 400 {
		t.Error("ErrorStatus")
	}
}

func TestOverflow(t *testing.T) {
	msg := `{"error":{"code":400,"message":"The input token count (1250000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}`
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   protocol.Overflow
		ok     bool
	}{
		{"object", 400, msg, protocol.Overflow{Tokens: 1250000, Limit: 1048576}, true},
		{"array stream", 400, "[" + msg + "]", protocol.Overflow{Tokens: 1250000, Limit: 1048576}, true},
		{"older wording", 400, `{"error":{"code":400,"message":"The input token count exceeds the maximum number of tokens allowed 1048576.","status":"INVALID_ARGUMENT"}}`, protocol.Overflow{Limit: 1048576}, true},
		{"other 400", 400, `{"error":{"code":400,"message":"Invalid JSON payload","status":"INVALID_ARGUMENT"}}`, protocol.Overflow{}, false},
		{"other status", 429, msg, protocol.Overflow{}, false},
		{"not json", 400, "exceeds the maximum number of tokens allowed", protocol.Overflow{}, false},
	} {
		got, ok := Overflow(tc.status, []byte(tc.body))
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestCaller(t *testing.T) {
	c := Protocol.(protocol.Caller)
	path, body := c.CallRequest("gemini-2.5-flash", "sys", "user text", 500)
	if path != "/v1beta/models/gemini-2.5-flash:generateContent" {
		t.Errorf("path %s", path)
	}
	if err := Validate(body); err != nil {
		t.Errorf("the call's request: %v", err)
	}
	if !strings.Contains(string(body), `"maxOutputTokens":500`) || !strings.Contains(string(body), `"systemInstruction":{"parts":[{"text":"sys"}]}`) {
		t.Errorf("body %s", body)
	}
	text, u, err := c.CallAnswer([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"think","thought":true},{"text":" the summary "}]},"finishReason":"STOP"}],` + chunkUsage + `}`))
	if err != nil || text != "the summary" || u.Output != 100 {
		t.Errorf("%q %+v %v", text, u, err)
	}
	for _, bad := range []string{`{"candidates":[]}`, `{"promptFeedback":{"blockReason":"SAFETY"}}`, `{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"SAFETY"}]}`, `nope`} {
		if _, _, err := c.CallAnswer([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if c.SmallModel("gemini-3-pro-preview") != SmallModel || c.SmallModel("claude-sonnet-4-5") != "claude-sonnet-4-5" {
		t.Error("SmallModel")
	}
	h := http.Header{}
	c.CallHeader(h, http.Header{"X-Goog-Api-Key": {"k"}, "X-Goog-Api-Client": {"sdk"}, "Cookie": {"c"}})
	if d := cmp.Diff(http.Header{"X-Goog-Api-Key": {"k"}}, h); d != "" {
		t.Errorf("CallHeader: %s", d)
	}
	c.CallKey(h, "k2")
	if h.Get("X-Goog-Api-Key") != "k2" {
		t.Error("CallKey")
	}
}
