package responses

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/protocol"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// captures are the real Codex CLI 0.169.0 request bodies in testdata/codex
// (see testdata/codex/README.md), in session order.
func captures(t testing.TB) []string {
	fs, err := filepath.Glob("testdata/codex/*.body.raw")
	if err != nil || len(fs) == 0 {
		t.Fatalf("no captures: %v", err)
	}
	return fs
}

func read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseCaptures parses every captured Codex body, checks it against
// Validate, and compares the parse with its golden dump.
func TestParseCaptures(t *testing.T) {
	for _, f := range captures(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			body := read(t, f)
			if err := Validate(body); err != nil {
				t.Errorf("Validate: %v", err)
			}
			c, err := Parse(body)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release()
			got := strings.Join(Dump(c), "\n") + "\n"
			golden := strings.TrimSuffix(f, ".body.raw") + ".parse.golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(string(read(t, golden)), got); diff != "" {
				t.Errorf("parse (-golden +got):\n%s", diff)
			}
		})
	}
}

// TestParseItems covers every item type and part type, one at a time.
func TestParseItems(t *testing.T) {
	dev := `{"type":"message","role":"developer","content":"be brief"}`
	tests := []struct {
		name  string
		body  string
		want  []string
		shape bool // Parse fails with ErrShape
	}{{
		name: "string input",
		body: `{"model":"gpt-5","input":"hello","instructions":"be brief","prompt_cache_key":"k1"}`,
		want: []string{`model="gpt-5" stream=false continued=false system=true tools=false list=true session="k1"`,
			`0 user string=true`, `  text input_text text="hello"`},
	}, {
		name: "message parts",
		body: `{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:image/png;base64,AAAA"},{"type":"input_file","file_id":"f1"},{"type":"input_text"}]},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"b"},{"type":"refusal","refusal":"no"}]}],"stream":true}`,
		want: []string{`model="" stream=true continued=false system=false tools=false list=true session=""`,
			`0 user string=false`, `  text input_text text="a"`, `  image input_image`, `  document input_file`, `  opaque input_text`,
			`1 assistant string=false`, `  text output_text text="b"`, `  opaque refusal`},
	}, {
		name: "string contents and the short form",
		body: `{"input":[` + dev + `,{"role":"system","content":"sys"},{"role":"user","content":"hi"},{"type":"message","role":"assistant","content":"ok"},{"role":"critic","content":"x"}]}`,
		want: []string{`model="" stream=false continued=false system=false tools=false list=true session=""`,
			`0 developer string=false`, `  text input_text text="be brief"`,
			`1 system string=false`, `  text input_text text="sys"`,
			`2 user string=false`, `  text input_text text="hi"`,
			`3 assistant string=false`, `  text output_text text="ok"`,
			`4 other string=false`, `  text input_text text="x"`},
	}, {
		name: "function call",
		body: `{"input":[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"},{"type":"function_call","name":"sh","arguments":"{\"cmd\":\"ls\"}","call_id":"c1"},` +
			`{"type":"function_call_output","call_id":"c1","output":"a\nb"}],"previous_response_id":null}`,
		want: []string{`model="" stream=false continued=false system=false tools=false list=true session=""`,
			`0 assistant string=false`, `  opaque reasoning`, `  tool_call function_call id=c1 name=sh input="{\"cmd\":\"ls\"}" encoded=true`,
			`1 tool string=false`, `  tool_result function_call_output id=c1 name=sh call=[0 1] content="a\nb" part:text="a\nb"`},
	}, {
		name: "custom tool call with an array output",
		body: `{"input":[{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch","call_id":"c1"},` +
			`{"type":"custom_tool_call_output","call_id":"c1","output":[{"type":"input_text","text":"done"},{"type":"input_image","image_url":"https://x/y.png"},{"type":"input_file","file_data":"x"},7]}]}`,
		want: []string{`model="" stream=false continued=false system=false tools=false list=true session=""`,
			`0 assistant string=false`, `  tool_call custom_tool_call id=c1 name=apply_patch input="*** Begin Patch" encoded=false`,
			`1 tool string=false`, `  tool_result custom_tool_call_output id=c1 name=apply_patch call=[0 0] content=[{"type":"input_text","text":"…(130) part:text="done" part:image part:document part:opaque`},
	}, {
		name: "local shell call",
		body: `{"input":[{"type":"local_shell_call","id":"lsc_1","call_id":"c1","status":"completed","action":{"type":"exec","command":["ls"]}},` +
			`{"type":"local_shell_call_output","id":"c1","output":"{\"output\":\"x\"}"}]}`,
		want: []string{`model="" stream=false continued=false system=false tools=false list=true session=""`,
			`0 assistant string=false`, `  tool_call local_shell_call id=c1`,
			`1 tool string=false`, `  tool_result local_shell_call_output id=c1 call=[0 0] content="{\"output\":\"x\"}" part:text="{\"output\":\"x\"}"`},
	}, {
		name: "opaque items",
		body: `{"input":[{"type":"additional_tools","role":"developer","tools":[]},{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search"}},` +
			`{"type":"compaction","id":"cmp_1","encrypted_content":"gAAA"},{"type":"item_reference","id":"msg_1"},{"type":"compaction_trigger"},{"type":"mcp_call_output","output":"x"},{"type":"new_thing","x":1}]}`,
		want: []string{`model="" stream=false continued=false system=false tools=false list=true session=""`,
			`0 developer string=false`, `  opaque additional_tools`,
			`1 assistant string=false`, `  opaque web_search_call`,
			`2 other string=false`, `  opaque compaction`, `  opaque item_reference`, `  opaque compaction_trigger`,
			`3 tool string=false`, `  opaque mcp_call_output`,
			`4 other string=false`, `  opaque new_thing`},
	}, {
		name: "calls without what they need are opaque; a result without its call is unpaired",
		body: `{"input":[{"type":"function_call","name":"sh","arguments":{},"call_id":"c1"},{"type":"function_call_output","call_id":"c2","output":"x"},{"type":"function_call_output","call_id":"c3","output":{}}]}`,
		want: []string{`model="" stream=false continued=false system=false tools=false list=true session=""`,
			`0 assistant string=false`, `  opaque function_call`,
			`1 tool string=false`, `  tool_result function_call_output id=c2 content="x" part:text="x"`, `  opaque function_call_output`},
	}, {
		name: "continued",
		body: `{"previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"c1","output":"x"}],"model":"o3"}`,
		want: []string{`model="o3" stream=false continued=true system=false tools=false list=true session=""`,
			`0 tool string=false`, `  tool_result function_call_output id=c1 content="x" part:text="x"`},
	}, {
		name: "repeated keys: the last wins",
		body: `{"input":[{"role":"user","content":"a"}],"input":[{"type":"function_call_output","call_id":"c","output":"o","output":"p"}]}`,
		want: []string{`model="" stream=false continued=false system=false tools=false list=true session=""`,
			`0 tool string=false`, `  tool_result function_call_output id=c content="p" part:text="p"`},
	},
		{name: "no input", body: `{"model":"gpt-5"}`, shape: true},
		{name: "input object", body: `{"input":{}}`, shape: true},
		{name: "item not an object", body: `{"input":["x"]}`, shape: true},
		{name: "array body", body: `[1]`, shape: true},
		{name: "model not a string", body: `{"model":5,"input":[]}`, shape: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.body))
			if tt.shape {
				if !errors.Is(err, protocol.ErrShape) {
					t.Fatalf("err = %v, want ErrShape", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, Dump(c)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseMalformed: invalid JSON fails with a syntax error, never a
// panic, at every truncation of a real body.
func TestParseMalformed(t *testing.T) {
	body := read(t, "testdata/codex/codex-http-multiturn-0005.body.raw")
	for n := 0; n < len(body); n += 97 {
		_, err := Parse(body[:n])
		var se *jsonscan.SyntaxError
		if !errors.As(err, &se) {
			t.Fatalf("Parse(body[:%d]) = %v, want a syntax error", n, err)
		}
	}
	for _, b := range []string{``, `{`, `{"input":[}`, `{"input":[{"type":"message"}]} x`, `{"input":"\x01"}`} {
		if _, err := Parse([]byte(b)); err == nil || errors.Is(err, protocol.ErrShape) {
			t.Errorf("Parse(%q) = %v, want a syntax error", b, err)
		}
	}
}

// TestParseAfterCaptures: over consecutive requests of real sessions,
// ParseAfter with Stable's count gives what Parse gives, and reuses
// messages.
func TestParseAfterCaptures(t *testing.T) {
	chains := [][]string{
		{"codex-http-multiturn-0003", "codex-http-multiturn-0004", "codex-http-multiturn-0005", "codex-http-multiturn-0006"},
		{"codex-openai-compact-0003", "codex-openai-compact-0004", "codex-openai-compact-0010"},
	}
	for _, chain := range chains {
		var prev []byte
		reused := 0
		for _, name := range chain {
			body := read(t, "testdata/codex/"+name+".body.raw")
			if prev != nil {
				reused += checkParseAfter(t, prev, body)
			}
			prev = body
		}
		if reused == 0 {
			t.Errorf("%s: no message reused", chain[0])
		}
	}
}

// checkParseAfter checks ParseAfter(body, Parse(prev), Stable) against
// Parse(body) and returns how many messages it reused.
func checkParseAfter(t testing.TB, prev, body []byte) int {
	t.Helper()
	pc, err := Parse(prev)
	if err != nil {
		return 0
	}
	defer pc.Release()
	want, werr := Parse(body)
	n := Stable(pc, body)
	got, gerr := ParseAfter(body, pc, n)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("Parse err %v, ParseAfter err %v", werr, gerr)
	}
	if werr != nil {
		return n
	}
	defer want.Release()
	defer got.Release()
	if diff := cmp.Diff(want.Messages, got.Messages); diff != "" {
		t.Fatalf("ParseAfter(stable %d) differs from Parse (-Parse +ParseAfter):\n%s", n, diff)
	}
	if diff := cmp.Diff(Dump(want), Dump(got)); diff != "" {
		t.Fatalf("ParseAfter(stable %d) differs from Parse (-Parse +ParseAfter):\n%s", n, diff)
	}
	return n
}

// TestParseAfterPrefixes: for a body and every shorter body a session
// could have sent before it (the same items, fewer of them), ParseAfter
// agrees with Parse, and Stable never counts the last message.
func TestParseAfterPrefixes(t *testing.T) {
	body := Session([]Round{
		{Reasoning: true, Output: "one"}, {Output: "two", Text: "done"},
		{Kind: "custom", Reasoning: true, Args: "*** Begin Patch", Output: []any{map[string]any{"type": "input_text", "text": "ok"}}},
		{Kind: "shell", Output: "x"},
	})
	c, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	for mi := range c.Messages {
		m := c.Messages[mi]
		prev := append(append([]byte{}, body[:m.Span.End]...), "]}"...)
		checkParseAfter(t, prev, body)
		pc, err := Parse(prev)
		if err != nil {
			t.Fatal(err)
		}
		if n := Stable(pc, body); n >= len(pc.Messages) {
			t.Errorf("Stable = %d of %d messages", n, len(pc.Messages))
		}
		pc.Release()
	}
}

func BenchmarkParse(b *testing.B) {
	var rounds []Round
	for i := 0; len(Session(rounds)) < 1<<20; i++ {
		rounds = append(rounds, Round{Reasoning: i%2 == 0, Output: strings.Repeat("build output line\n", 100), Text: map[bool]string{true: "ok"}[i%5 == 0]})
	}
	body := Session(rounds)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		c, err := Parse(body)
		if err != nil {
			b.Fatal(err)
		}
		c.Release()
	}
}

// BenchmarkParseAfter is the next request of a ~1 MB session: one round
// more, the rest taken from the previous parse.
func BenchmarkParseAfter(b *testing.B) {
	var rounds []Round
	for i := 0; len(Session(rounds)) < 1<<20; i++ {
		rounds = append(rounds, Round{Reasoning: i%2 == 0, Output: strings.Repeat("build output line\n", 100)})
	}
	prev, body := Session(rounds[:len(rounds)-1]), Session(rounds)
	pc, err := Parse(prev)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		c, err := ParseAfter(body, pc, Stable(pc, body))
		if err != nil {
			b.Fatal(err)
		}
		c.Release()
	}
}
