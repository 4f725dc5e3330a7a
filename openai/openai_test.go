package openai

import (
	"encoding/json"
	"net/http"
	"testing"

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
