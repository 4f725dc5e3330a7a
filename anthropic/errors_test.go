package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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

func TestWriteError(t *testing.T) {
	secret := errors.New("dial tcp 10.0.0.1:443: secret detail")
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantType   string
		wantMsg    string // prefix of the client message
	}{
		{"api error", &Error{Status: 502, Type: APIError, Message: "ctxguard: upstream x unreachable", Err: secret}, 502, APIError, "ctxguard: upstream x unreachable"},
		{"wrapped", fmt.Errorf("outer: %w", &Error{Status: 413, Type: RequestTooLarge, Message: "too big", Err: secret}), 413, RequestTooLarge, "too big"},
		{"bare error", secret, 500, APIError, "ctxguard: internal error"},
		{"zero fields", &Error{Message: "m"}, 500, APIError, "m"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logBuf bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			rec := httptest.NewRecorder()
			WriteError(context.Background(), rec, log, tc.err)
			if rec.Code != tc.wantStatus {
				t.Errorf("status %d, want %d", rec.Code, tc.wantStatus)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			var got wireError
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if got.RequestID == nil || !strings.HasPrefix(*got.RequestID, "ctxguard_") {
				t.Fatalf("request_id %v", got.RequestID)
			}
			id := *got.RequestID
			want := wireError{Type: "error", RequestID: &id}
			want.Error.Type = tc.wantType
			want.Error.Message = tc.wantMsg + " (error ID " + id + ")"
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("body (-want +got)\n%s", diff)
			}
			if rec.Header().Get("X-Ctxguard-Error-Id") != id {
				t.Errorf("error ID header %q", rec.Header().Get("X-Ctxguard-Error-Id"))
			}
			if strings.Contains(rec.Body.String(), "secret detail") {
				t.Error("detail leaked to the client")
			}
			logged := logBuf.String()
			if !strings.Contains(logged, id) || (errors.Is(tc.err, secret) && !strings.Contains(logged, "secret detail")) {
				t.Errorf("log lacks ID or detail: %s", logged)
			}
		})
	}
}

func TestWriteErrorClientGone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	WriteError(ctx, rec, nil, &Error{Status: 502, Message: "x"})
	if rec.Body.Len() != 0 || rec.Code != http.StatusOK && rec.Code != 0 {
		// httptest.ResponseRecorder reports 200 when nothing was written.
		t.Errorf("wrote %d %q to a client that went away", rec.Code, rec.Body.String())
	}
}
