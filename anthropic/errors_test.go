package anthropic

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/ctxguard/ctxguard/protocol"
)

type wireError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID *string `json:"request_id"`
}

func TestAppendErrorJSON(t *testing.T) {
	for _, tc := range []struct{ typ, msg, id string }{
		{APIError, "plain", "ctxguard_1"},
		{InvalidRequestError, "quotes \" and \\ and \n and \u2028 and <html>", ""},
	} {
		b := AppendErrorJSON([]byte("prefix:"), tc.typ, tc.msg, tc.id)
		b = bytes.TrimPrefix(b, []byte("prefix:"))
		var got wireError
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if got.Type != "error" || got.Error.Type != tc.typ || got.Error.Message != tc.msg {
			t.Errorf("round trip: %+v", got)
		}
		if (tc.id == "") != (got.RequestID == nil) || (got.RequestID != nil && *got.RequestID != tc.id) {
			t.Errorf("request_id %v, want %q", got.RequestID, tc.id)
		}
	}
}

func TestErrorType(t *testing.T) {
	for k, want := range map[protocol.Kind]string{
		protocol.Internal: APIError, protocol.InvalidRequest: InvalidRequestError, protocol.Authentication: AuthenticationError,
		protocol.Permission: PermissionError, protocol.NotFound: NotFoundError, protocol.TooLarge: RequestTooLarge,
		protocol.RateLimited: RateLimitError, protocol.Overloaded: OverloadedError, protocol.GatewayTimeout: TimeoutError,
		protocol.Kind(200): APIError,
	} {
		if got := ErrorType(k); got != want {
			t.Errorf("ErrorType(%d) = %q, want %q", k, got, want)
		}
	}
}
