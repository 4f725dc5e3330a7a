package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/convbuild"
	"github.com/ctxguard/ctxguard/protocol"
)

func TestAppendError(t *testing.T) {
	for k, want := range map[protocol.Kind][2]string{
		protocol.Internal: {"server_error", ""}, protocol.TooLarge: {"invalid_request_error", "request_too_large"},
		protocol.Authentication: {"invalid_request_error", "invalid_api_key"}, protocol.Kind(99): {"server_error", ""},
	} {
		var got struct {
			Error struct {
				Message, Type string
				Param         any
				Code          *string
				ID            string `json:"ctxguard_error_id"`
			}
		}
		b := AppendError([]byte("x"), k, `a "quoted" message`, "ctxguard_1")
		if err := json.Unmarshal(b[1:], &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		code := ""
		if got.Error.Code != nil {
			code = *got.Error.Code
		}
		if got.Error.Message != `a "quoted" message` || got.Error.Type != want[0] || code != want[1] || got.Error.ID != "ctxguard_1" || got.Error.Param != nil {
			t.Errorf("kind %d: %s", k, b[1:])
		}
	}
}

func TestClaim(t *testing.T) {
	anth := http.Header{"Anthropic-Version": {"2023-06-01"}}
	for _, tc := range []struct {
		path string
		h    http.Header
		want protocol.Claim
	}{
		{"/v1/models", http.Header{}, protocol.Maybe},
		{"/v1/files/file-1/content", http.Header{}, protocol.Maybe},
		{"/v1/responses/resp_1", http.Header{}, protocol.Maybe},
		{"/v1/models", anth, protocol.No},
		{"/api/oauth/profile", http.Header{}, protocol.No},
		{"/v1/messages/count_tokens", http.Header{}, protocol.No},
		{"/v1", http.Header{}, protocol.No},
		{"/", http.Header{}, protocol.No},
	} {
		if got := Claim(tc.path, tc.h); got != tc.want {
			t.Errorf("%s %v: claim %d, want %d", tc.path, tc.h, got, tc.want)
		}
	}
}

func TestErrorStatus(t *testing.T) {
	for _, tc := range []struct {
		k          protocol.Kind
		in, status int
	}{{protocol.Overloaded, 529, 503}, {protocol.TooLarge, 413, 413}, {protocol.GatewayTimeout, 504, 504}} {
		if got := ErrorStatus(tc.k, tc.in); got != tc.status {
			t.Errorf("kind %d, %d: got %d, want %d", tc.k, tc.in, got, tc.status)
		}
	}
}

func TestAPIFeatures(t *testing.T) {
	body := []byte(`{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"Your task is to create a detailed summary of the conversation so far."}]}`)
	var b convbuild.Builder
	b.Reset(len(body))
	at := bytes.Index(body, []byte(`"Your`))
	text := conversation.Span{Start: at, End: bytes.LastIndexByte(body, '"') + 1}
	b.Block(conversation.Block{Kind: conversation.Text, Span: text, Text: text}, 0)
	b.Message(conversation.Message{Role: conversation.RoleUser, Span: text}, 0)
	c := &conversation.Conversation{Body: body, Messages: b.Done()}
	got := API{}.Features(http.Header{"Anthropic-Beta": {"context-1m-2025-08-07"}}, c)
	if len(got.Betas) != 1 || got.Betas[0] != "context-1m-2025-08-07" || !got.ClientCompaction {
		t.Errorf("features %+v: want the anthropic-beta value and a client compaction", got)
	}
	if got := (API{}).Features(http.Header{}, &conversation.Conversation{}); got.Betas != nil || got.ClientCompaction {
		t.Errorf("a plain request: %+v", got)
	}
}

// TestAPICallKey: a configured key goes as a bearer token; a session's
// call takes the session's credentials and billing headers only.
func TestAPICallKey(t *testing.T) {
	h := http.Header{}
	API{}.CallHeader(h, nil)
	API{}.CallKey(h, "sk-proj-key")
	if len(h) != 1 || h.Get("Authorization") != "Bearer sk-proj-key" {
		t.Errorf("configured key: %v", h)
	}
	h = http.Header{}
	API{}.CallHeader(h, http.Header{"Authorization": {"Bearer s"}, "Openai-Project": {"p"}, "Session-Id": {"x"}})
	if len(h) != 2 || h.Get("Authorization") != "Bearer s" || h.Get("Openai-Project") != "p" {
		t.Errorf("session's credentials: %v", h)
	}
}
