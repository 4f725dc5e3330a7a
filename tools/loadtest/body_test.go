package loadtest

import (
	"bytes"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/internal/module"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/tools/validate"
)

func testSource(t *testing.T) *Source {
	t.Helper()
	root, err := module.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewSource([]string{filepath.Join(root, "tools", "transcript", "testdata", "claude-code")}, "")
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestNewSource(t *testing.T) {
	src := testSource(t)
	// The main session with the most content among the repository's
	// transcripts.
	if got, want := src.Session.ID, "8914a511-2982-4b5b-886b-cb526da278b1"; got != want {
		t.Errorf("picked session %s, want %s", got, want)
	}
	if src.Rounds == 0 {
		t.Error("no rounds")
	}
	byID, err := NewSource([]string{src.Session.Path}, "8914")
	if err != nil || byID.Session.ID != src.Session.ID {
		t.Errorf("NewSource by ID prefix: %v, %v", byID, err)
	}
	if _, err := NewSource([]string{src.Session.Path}, "nope"); err == nil {
		t.Error("NewSource with an unknown ID: no error")
	}
}

var (
	toolUseID    = regexp.MustCompile(`"type":"tool_use","id":"([^"]+)"`)
	toolResultID = regexp.MustCompile(`"tool_use_id":"([^"]+)"`)
)

func TestBody(t *testing.T) {
	src := testSource(t)
	n := 3*src.Rounds + 2 // three copies and a part
	body, err := src.Body(Anthropic, n, sessionID(1), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Request(body); err != nil {
		t.Fatalf("invalid request: %v", err)
	}
	again, _ := src.Body(Anthropic, n, sessionID(1), true)
	if !bytes.Equal(body, again) {
		t.Error("Body is not deterministic")
	}
	if !bytes.HasSuffix(body, []byte(`,"stream":true}`)) || !bytes.Contains(body, []byte(sessionID(1))) {
		t.Error("body lacks stream true or its session id")
	}
	json, err := src.Body(Anthropic, n, sessionID(1), false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(json[:len(json)-len(`false}`)], body[:len(body)-len(`true}`)]) || !bytes.HasSuffix(json, []byte(`"stream":false}`)) {
		t.Error("the non-streamed body differs from the streamed one by more than the stream flag")
	}

	// Every tool call id is used once, and every result answers one.
	uses := map[string]int{}
	for _, m := range toolUseID.FindAllSubmatch(body, -1) {
		uses[string(m[1])]++
	}
	results := 0
	for _, m := range toolResultID.FindAllSubmatch(body, -1) {
		results++
		if uses[string(m[1])] != 1 {
			t.Errorf("result for %s, used %d times", m[1], uses[string(m[1])])
		}
	}
	for id, k := range uses {
		if k != 1 {
			t.Errorf("tool id %s used %d times", id, k)
		}
	}
	if len(uses) == 0 || results == 0 {
		t.Fatalf("%d tool calls, %d results: the session has no tool rounds to repeat", len(uses), results)
	}
	if !bytes.Contains(body, []byte(`_r3"`)) {
		t.Error("no fresh id of the fourth pass over the rounds")
	}
}

func TestSized(t *testing.T) {
	src := testSource(t)
	for _, size := range []int{1 << 10, 64 << 10, 256 << 10} {
		b, err := src.Sized(Anthropic, size, sessionID(0))
		if err != nil {
			t.Fatal(err)
		}
		if b.Rounds < 1 || b.Copies != (b.Rounds+src.Rounds-1)/src.Rounds {
			t.Errorf("size %d: %d rounds, %d copies", size, b.Rounds, b.Copies)
		}
		want, _ := src.Body(Anthropic, b.Rounds, sessionID(0), true)
		if !bytes.Equal(b.Data, want) {
			t.Errorf("size %d: Sized's body is not Body(%d)", size, b.Rounds)
		}
		// No other number of rounds comes closer.
		for _, n := range []int{b.Rounds - 1, b.Rounds + 1} {
			if n < 1 {
				continue
			}
			other, _ := src.Body(Anthropic, n, sessionID(0), true)
			if abs(len(other)-size) < abs(len(b.Data)-size) {
				t.Errorf("size %d: %d rounds give %d bytes, closer than %d rounds' %d", size, n, len(other), b.Rounds, len(b.Data))
			}
		}
	}
}

func abs(n int) int { return max(n, -n) }

// TestBodyProtocols: the same session's bodies in every protocol parse,
// are valid requests of their API, carry the worker's session id, and
// differ between stream and JSON only in the stream flag.
func TestBodyProtocols(t *testing.T) {
	src := testSource(t)
	n := src.Rounds + 1
	for _, tc := range []struct {
		p        Protocol
		proto    protocol.Protocol
		validate func([]byte) error
	}{
		{Anthropic, anthropic.Protocol, validate.Request},
		{Responses, responses.Protocol, responses.Validate},
		{Chat, chat.Protocol, chat.Validate},
	} {
		body, err := src.Body(tc.p, n, sessionID(2), true)
		if err != nil {
			t.Fatalf("%s: %v", tc.p, err)
		}
		if err := tc.validate(body); err != nil {
			t.Errorf("%s: invalid request: %v", tc.p, err)
		}
		c, err := tc.proto.Parse(body)
		if err != nil {
			t.Fatalf("%s: %v", tc.p, err)
		}
		if !c.Stream || len(c.Messages) < 2*src.Rounds {
			t.Errorf("%s: stream %v, %d messages for %d rounds", tc.p, c.Stream, len(c.Messages), n)
		}
		c.Release()
		if tc.p != Chat && !bytes.Contains(body, []byte(sessionID(2))) {
			t.Errorf("%s: the session id is not in the body", tc.p)
		}
		js, err := src.Body(tc.p, n, sessionID(2), false)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(bytes.Replace(js, []byte(`"stream":false`), []byte(`"stream":true`), 1), body) {
			t.Errorf("%s: the JSON body differs from the streamed one by more than the stream flag", tc.p)
		}
	}
}
