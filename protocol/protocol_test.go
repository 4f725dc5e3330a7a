package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/conversation"
)

// shape is a protocol whose errors are {"kind":K,"message":M,"id":I}.
type shape struct{ name string }

func (s shape) Name() string   { return s.name }
func (s shape) Family() string { return s.name }
func (s shape) Claim(_, path string, h http.Header) Claim {
	switch {
	case path == "/"+s.name:
		return Yes
	case h.Get("X-"+s.name) != "":
		return Maybe
	}
	return No
}
func (shape) Rewritable(string, string) bool                   { return false }
func (shape) Parse([]byte) (*conversation.Conversation, error) { return nil, ErrShape }
func (shape) ParseAfter([]byte, *conversation.Conversation, int) (*conversation.Conversation, error) {
	return nil, ErrShape
}
func (shape) Stable(*conversation.Conversation, []byte) int { return 0 }
func (shape) NewUsageTap(string) UsageTap                   { return nil }
func (shape) QuickKey(maphash.Seed, []byte) (uint64, bool)  { return 0, false }
func (shape) Features(http.Header, *conversation.Conversation) Features {
	return Features{}
}
func (shape) AppendError(dst []byte, k Kind, msg, id string) []byte {
	b, _ := json.Marshal(map[string]any{"kind": int(k), "message": msg, "id": id})
	return append(dst, b...)
}

func TestWrite(t *testing.T) {
	secret := errors.New("dial tcp 10.0.0.1:443: secret detail")
	for _, tc := range []struct {
		name       string
		err        error
		proto      Protocol
		wantStatus int
		wantKind   Kind
		wantMsg    string
	}{
		{"error", &Error{Status: 502, Kind: Internal, Message: "ctxguard: upstream x unreachable", Err: secret}, shape{"a"}, 502, Internal, "ctxguard: upstream x unreachable"},
		{"wrapped", fmt.Errorf("outer: %w", &Error{Status: 413, Kind: TooLarge, Message: "too big", Err: secret}), shape{"a"}, 413, TooLarge, "too big"},
		{"bare error", secret, shape{"a"}, 500, Internal, "ctxguard: internal error"},
		{"zero fields", &Error{Message: "m"}, shape{"a"}, 500, Internal, "m"},
		{"no protocol", &Error{Status: 404, Kind: NotFound, Message: "nope"}, nil, 404, NotFound, "nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logBuf bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			rec := httptest.NewRecorder()
			e := Write(context.Background(), rec, log, tc.proto, tc.err)
			if rec.Code != tc.wantStatus || rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("status %d %q, want %d", rec.Code, rec.Header().Get("Content-Type"), tc.wantStatus)
			}
			id := rec.Header().Get("X-Ctxguard-Error-Id")
			if !strings.HasPrefix(id, "ctxguard_") || e.ID != id {
				t.Fatalf("error ID header %q, returned %q", id, e.ID)
			}
			wantMsg := tc.wantMsg + " (error ID " + id + ")"
			if tc.proto == nil {
				var got struct{ Error struct{ Message, ID string } }
				if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Error.Message != wantMsg || got.Error.ID != id {
					t.Errorf("plain body %s (%v)", rec.Body, err)
				}
			} else {
				var got struct {
					Kind    Kind
					Message string
					ID      string
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(struct {
					Kind    Kind
					Message string
					ID      string
				}{tc.wantKind, wantMsg, id}, got); d != "" {
					t.Errorf("body (-want +got)\n%s", d)
				}
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

// mapped is a protocol that answers overloaded with 503.
type mapped struct{ shape }

func (mapped) ErrorStatus(k Kind, status int) int {
	if k == Overloaded {
		return 503
	}
	return status
}

func TestWriteStatusMapper(t *testing.T) {
	for _, tc := range []struct {
		p    Protocol
		e    *Error
		want int
	}{
		{shape{"a"}, &Error{Status: 529, Kind: Overloaded, Message: "busy"}, 529},
		{mapped{shape{"b"}}, &Error{Status: 529, Kind: Overloaded, Message: "busy"}, 503},
		{mapped{shape{"b"}}, &Error{Status: 413, Kind: TooLarge, Message: "big"}, 413},
	} {
		rec := httptest.NewRecorder()
		Write(context.Background(), rec, nil, tc.p, tc.e)
		if rec.Code != tc.want {
			t.Errorf("%s %v: status %d, want %d", tc.p.Name(), tc.e.Kind, rec.Code, tc.want)
		}
	}
}

func TestWriteHeaderAndClientGone(t *testing.T) {
	rec := httptest.NewRecorder()
	Write(context.Background(), rec, nil, shape{"a"}, &Error{Status: 529, Kind: Overloaded, Message: "busy", Header: http.Header{"Retry-After": {"5"}}})
	if rec.Code != 529 || rec.Header().Get("Retry-After") != "5" {
		t.Errorf("%d %v", rec.Code, rec.Header())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec = httptest.NewRecorder()
	Write(ctx, rec, nil, shape{"a"}, &Error{Status: 502, Message: "x"})
	if rec.Body.Len() != 0 {
		t.Errorf("wrote %q to a client that went away", rec.Body.String())
	}
}

func TestPick(t *testing.T) {
	a, b := shape{"a"}, shape{"b"}
	protos := []Protocol{a, b}
	for _, tc := range []struct {
		path string
		h    http.Header
		want Protocol
	}{
		{"/a", nil, a},
		{"/b", nil, b},
		{"/b", http.Header{"X-A": {"1"}}, b}, // a path beats a header
		{"/c", http.Header{"X-B": {"1"}}, b},
		{"/c", http.Header{"X-A": {"1"}, "X-B": {"1"}}, a}, // a tie: the first
		{"/c", nil, nil},
	} {
		if got := Pick(protos, "POST", tc.path, tc.h); got != tc.want {
			t.Errorf("Pick(%s, %v) = %v, want %v", tc.path, tc.h, got, tc.want)
		}
	}
}

func TestAppendList(t *testing.T) {
	for _, tc := range []struct {
		in, add, want []string
	}{
		{nil, []string{"x"}, []string{"x"}},
		{[]string{"a,b"}, []string{"b", "c", "c", " "}, []string{"a,b,c"}},
		{[]string{"a", "b"}, []string{"c"}, []string{"a", "b,c"}},
		{[]string{" "}, []string{"c"}, []string{" c"}},
		{[]string{"a"}, nil, []string{"a"}},
	} {
		h := http.Header{}
		if tc.in != nil {
			h["Anthropic-Beta"] = tc.in
		}
		AppendList(h, "anthropic-beta", tc.add...)
		if d := cmp.Diff(tc.want, h["Anthropic-Beta"]); d != "" {
			t.Errorf("AppendList(%q, %q):\n%s", tc.in, tc.add, d)
		}
	}
}

// boundProto is a protocol that reads its model from the path.
type boundProto struct {
	Protocol
	path string
}

func (b boundProto) Claim(string, string, http.Header) Claim { return Yes }
func (b boundProto) ForPath(path string) Protocol            { return boundProto{b.Protocol, path} }

// TestPickPathBound: Pick hands out a PathBound protocol bound to the
// request's path.
func TestPickPathBound(t *testing.T) {
	got := Pick([]Protocol{boundProto{}}, "POST", "/v1beta/models/m:generateContent", nil)
	if b, ok := got.(boundProto); !ok || b.path != "/v1beta/models/m:generateContent" {
		t.Errorf("Pick = %#v", got)
	}
	if Pick(nil, "POST", "/x", nil) != nil {
		t.Error("Pick of no protocol")
	}
}
