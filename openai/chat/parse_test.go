package chat

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/convbuild/convbuildtest"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// dump renders a parse as text, one line per message and block, with the
// bytes of every span, so a golden file shows what each span holds.
func dump(c *conversation.Conversation) string {
	var sb strings.Builder
	short := func(sp conversation.Span) string {
		if sp.IsZero() {
			return "-"
		}
		s := string(c.Bytes(sp))
		if len(s) > 60 {
			s = s[:40] + fmt.Sprintf("…(%d bytes)…", len(s)-52) + s[len(s)-12:]
		}
		return s
	}
	fmt.Fprintf(&sb, "model %q stream %v tools %d bytes markers %d session %q\n", c.Model, c.Stream, c.Tools.Len(), c.CacheMarkers, c.Dialect.SessionID(c))
	for mi, m := range c.Messages {
		fmt.Fprintf(&sb, "%d %s string=%v content=%s\n", mi, m.Role, m.ContentString, short(m.Content))
		for _, b := range m.Blocks {
			fmt.Fprintf(&sb, "  %s %q %s", b.Kind, b.Type, short(b.Span))
			switch b.Kind {
			case conversation.Text:
				fmt.Fprintf(&sb, " text=%s", short(b.Text))
			case conversation.ToolCall:
				fmt.Fprintf(&sb, " id=%s name=%s input=%s encoded=%v", short(b.ID), short(b.Name), short(b.Input), b.InputEncoded)
			case conversation.ToolResult:
				fmt.Fprintf(&sb, " id=%s name=%s call=%v content=%s", short(b.ID), short(b.Name), b.Call, short(b.Content))
			}
			if !b.CacheControl.IsZero() {
				fmt.Fprintf(&sb, " cc=%s", short(b.CacheControl))
			}
			sb.WriteByte('\n')
			for _, pt := range b.Parts {
				fmt.Fprintf(&sb, "    part %s %s", pt.Kind, short(pt.Span))
				if !pt.CacheControl.IsZero() {
					fmt.Fprintf(&sb, " cc=%s", short(pt.CacheControl))
				}
				sb.WriteByte('\n')
			}
		}
	}
	return sb.String()
}

// golden compares got with testdata/golden/name.golden (-update writes it).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".golden")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, d)
	}
}

// captures are real opencode 1.18.33 request bodies (see testdata/README.md).
var captures = []string{
	"opencode-first-0001-title",
	"opencode-first-0004",
	"opencode-reasoning-0004",
	"opencode-multiturn-0006",
	"opencode-multiturn-0007",
}

func readBody(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".body.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseCaptures(t *testing.T) {
	for _, name := range captures {
		t.Run(name, func(t *testing.T) {
			c, err := Parse(readBody(t, name))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release()
			golden(t, name, dump(c))
		})
	}
}

// shapes holds a hand-written body for every message shape the adapter
// knows.
var shapes = map[string]string{
	"every-role": `{"model":"m","messages":[
	 {"role":"system","content":"sys"},
	 {"role":"developer","content":[{"type":"text","text":"dev"}]},
	 {"role":"user","content":"hi"},
	 {"role":"assistant","content":null,"refusal":"no"},
	 {"role":"function","name":"f","content":"legacy"},
	 {"role":"user","content":[{"type":"text","text":"look","cache_control":{"type":"ephemeral"}},
	   {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}},
	   {"type":"input_audio","input_audio":{"data":"AAA","format":"wav"}},
	   {"type":"file","file":{"file_id":"file-1"}},{"type":"mystery"},"bare",{"type":"text","text":1}]}
	],"prompt_cache_key":"ses_123","user":"u-1","metadata":{"a":"b"}}`,
	"tool-rounds": `{"model":"m","stream":true,"messages":[
	 {"role":"user","content":"go"},
	 {"role":"assistant","content":"","reasoning_content":"think","tool_calls":[
	   {"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}},
	   {"id":"call_2","type":"function","function":{"arguments":"{}","name":"read"}},
	   {"id":"call_3","type":"custom","custom":{"name":"patch","input":"x"}},
	   {"id":"call_4","type":"function","function":{"name":"bad","arguments":{}}}]},
	 {"role":"tool","tool_call_id":"call_2","content":"file text"},
	 {"content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}],"role":"tool","tool_call_id":"call_\u0031"},
	 {"role":"tool","tool_call_id":"call_9","content":"unanswered"},
	 {"role":"tool","content":"no id"},
	 {"role":"assistant","content":"done","reasoning":"r","reasoning_details":[{"type":"reasoning.text","text":"r"}]},
	 {"role":"tool","tool_call_id":"call_1","content":"after text"},
	 {"role":"assistant","function_call":{"name":"old","arguments":"{}"}},
	 {"role":"user","content":"bye"}
	]}`,
}

func TestParseShapes(t *testing.T) {
	for name, body := range shapes {
		t.Run(name, func(t *testing.T) {
			c, err := Parse([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release()
			golden(t, name, dump(c))
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		body  string
		shape bool
	}{
		{``, false},
		{`{"messages":[}`, false},
		{`{"messages":[]} x`, false},
		{`{"messages":[{"role":"user","content":"a\x"}]}`, false},
		{`[1]`, true},
		{`"x"`, true},
		{`{"model":"x"}`, true},
		{`{"messages":{}}`, true},
		{`{"messages":[1]}`, true},
		{`{"model":1,"messages":[]}`, true},
		{`{"messages":[{"role":"user","content":"a","content":"b"}]}`, true},
		{`{"messages":[{"role":"assistant","tool_calls":[],"tool_calls":[]}]}`, true},
		{`{"input":[{"role":"user","content":"responses api"}]}`, true},
	} {
		_, err := Parse([]byte(tc.body))
		var se *jsonscan.SyntaxError
		switch {
		case err == nil:
			t.Errorf("%s: no error", tc.body)
		case tc.shape && !errors.Is(err, ErrShape):
			t.Errorf("%s: err %v, want ErrShape", tc.body, err)
		case !tc.shape && !errors.As(err, &se):
			t.Errorf("%s: err %v, want a syntax error", tc.body, err)
		}
	}
}

// A repeated messages key: the last one wins, as in encoding/json.
func TestParseRepeatedMessages(t *testing.T) {
	c, err := Parse([]byte(`{"messages":[{"role":"tool","tool_call_id":"a","content":"x"}],"messages":[{"role":"tool","tool_call_id":"b","content":"y"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Messages) != 1 || c.String(c.Messages[0].Blocks[0].ID) != "b" {
		t.Errorf("got %s", dump(c))
	}
}

// equalParse checks that ParseAfter(b, prev, Stable(prev, b)) gives what
// Parse(b) gives, errors included, and returns the stable count.
func equalParse(t *testing.T, prev *conversation.Conversation, b []byte) int {
	t.Helper()
	return convbuildtest.SameParse(t, Protocol, prev, b, cmp.AllowUnexported(dialect{}))
}

// opencode's next request repeats the previous one's messages byte for
// byte (WIRE.md §2.4): ParseAfter reuses them and equals Parse.
func TestParseAfterCaptures(t *testing.T) {
	prev, err := Parse(readBody(t, "opencode-multiturn-0006"))
	if err != nil {
		t.Fatal(err)
	}
	next := readBody(t, "opencode-multiturn-0007")
	if st := equalParse(t, prev, next); st != len(prev.Messages)-1 {
		t.Errorf("stable %d of %d messages", st, len(prev.Messages))
	}
}

// Every cut of a body, and a tool message appended to a run the previous
// body ended with, parse the same after as from scratch.
func TestParseAfterCuts(t *testing.T) {
	for name, body := range shapes {
		b := []byte(body)
		prev, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		for i := range len(b) {
			t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) {
				next := append(append([]byte(nil), b[:i]...), `{"role":"tool","tool_call_id":"call_1","content":"x"}]}`...)
				equalParse(t, prev, next)
			})
		}
	}
	// A run extended by the next request.
	a := []byte(`{"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"n","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"m","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"1"},{"role":"user","content":"x"}]}`)
	b := []byte(`{"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"n","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"m","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"1"},{"role":"tool","tool_call_id":"c2","content":"2"}]}`)
	prev, err := Parse(a)
	if err != nil {
		t.Fatal(err)
	}
	if st := equalParse(t, prev, b); st != 1 {
		t.Errorf("stable %d, want 1 (the run is not stable: it goes on)", st)
	}
	c, _ := Parse(b)
	if len(c.Messages) != 2 || len(c.Messages[1].Blocks) != 2 || c.Messages[1].Blocks[1].Call != [2]int{0, 1} {
		t.Errorf("run not extended: %s", dump(c))
	}
}
