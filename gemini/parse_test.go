package gemini

import (
	"hash/maphash"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/protocol"
)

// captures returns the Gemini CLI's captured request bodies, by file name
// (testdata/cli).
func captures(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("testdata/cli/*.body.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures: %v", err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

// shape is what a test checks of a parse: per message its role and the
// kind and type of its blocks.
func shape(c *conversation.Conversation) [][]string {
	var out [][]string
	for _, m := range c.Messages {
		row := []string{m.Role.String()}
		for _, b := range m.Blocks {
			s := b.Kind.String() + ":" + b.Type
			if !b.Signature.IsZero() {
				s += "+sig"
			}
			if b.Kind == conversation.ToolResult {
				s += "->" + string(rune('0'+b.Call[0])) + "." + string(rune('0'+b.Call[1]))
			}
			row = append(row, s)
		}
		out = append(out, row)
	}
	return out
}

func TestParseCapture(t *testing.T) {
	body := captures(t)["04-stream.body.json"]
	p := Protocol.(protocol.PathBound).ForPath("/v1beta/models/gemini-3.8-flash:streamGenerateContent")
	c, err := p.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	want := [][]string{
		{"user", "text:text", "text:text"},
		{"assistant", "tool_call:functionCall+sig"},
		{"user", "tool_result:functionResponse->1.0"},
		{"assistant", "tool_call:functionCall+sig", "tool_call:functionCall"},
		{"user", "tool_result:functionResponse->3.0", "tool_result:functionResponse->3.1"},
	}
	if d := cmp.Diff(want, shape(c)); d != "" {
		t.Errorf("shape (-want +got):\n%s", d)
	}
	if c.Model != "gemini-3.8-flash" || !c.Stream {
		t.Errorf("model %q, stream %v: want the path's", c.Model, c.Stream)
	}
	if c.System.IsZero() || c.Tools.IsZero() || c.Continued {
		t.Errorf("system %v, tools %v, continued %v", c.System, c.Tools, c.Continued)
	}
	res := &c.Messages[4].Blocks[0]
	if got := c.String(res.Content); got != "hello\n" {
		t.Errorf("result content %q, want the output's value", got)
	}
	if got := c.ToolName(res); got != "read_file" {
		t.Errorf("result name %q", got)
	}
	if got := string(c.Bytes(c.Messages[1].Blocks[0].Input)); got != `{"dir_path":"."}` {
		t.Errorf("call input %s", got)
	}
}

// TestCapturesValid: every request the real CLI sent is valid, the
// resumed session's repeated responses included, and parses the same
// incrementally from the one before it.
func TestCapturesValid(t *testing.T) {
	caps := captures(t)
	var prev *conversation.Conversation
	for _, name := range []string{"02-stream.body.json", "03-stream.body.json", "04-stream.body.json", "06-stream.body.json", "07-stream.body.json", "08-stream.body.json", "01-route.body.json", "05-route.body.json"} {
		body := caps[name]
		if err := Validate(body); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		c, err := Parse(body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if prev != nil {
			st := Stable(prev, body)
			a, err := ParseAfter(body, prev, st)
			if err != nil {
				t.Fatalf("%s: ParseAfter: %v", name, err)
			}
			if d := cmp.Diff(shape(c), shape(a)); d != "" || len(a.Messages) != len(c.Messages) {
				t.Errorf("%s: ParseAfter(stable %d) differs from Parse:\n%s", name, st, d)
			}
		}
		prev = c
	}
}

// TestQuickKey: a session's requests share a key; another session's
// first request does not.
func TestQuickKey(t *testing.T) {
	caps := captures(t)
	seed := maphash.MakeSeed()
	k2, ok2 := Protocol.QuickKey(seed, caps["02-stream.body.json"])
	k4, ok4 := Protocol.QuickKey(seed, caps["04-stream.body.json"])
	k1, ok1 := Protocol.QuickKey(seed, caps["01-route.body.json"])
	if !ok2 || !ok4 || !ok1 {
		t.Fatal("QuickKey refused a capture")
	}
	if k2 != k4 {
		t.Error("two requests of one prompt have different keys")
	}
	if k1 == k2 {
		t.Error("the routing call (its first content is the session context alone) has the turn's key")
	}
	other := []byte(`{"contents":[{"role":"user","parts":[{"text":"something else"}]}]}`)
	if k, _ := Protocol.QuickKey(seed, other); k == k2 {
		t.Error("another conversation has the same key")
	}
}

func TestParseParts(t *testing.T) {
	body := []byte(`{"model":"models/gemini-2.5-pro","contents":[` +
		`{"role":"user","parts":[{"text":"look"},{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},{"fileData":{"mimeType":"application/pdf","fileUri":"gs://x"}}]},` +
		`{"role":"model","parts":[{"text":"hm","thought":true,"thoughtSignature":"c2ln"},{"thought":true,"thoughtSignature":"b3Bx"},{"executableCode":{"language":"PYTHON","code":"1+1"}},{"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"2"}},{"functionCall":{"name":"ls","args":{}}},{"functionCall":{"name":"ls"}},{"functionCall":{"name":"cat","args":{"f":"a"}}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"name":"cat","response":{"content":"x"}}},{"functionResponse":{"name":"ls","response":{"a":1,"b":2}}},{"functionResponse":{"name":"ls","response":{"output":{"files":[]}}}}]}` +
		`],"cachedContent":"cachedContents/abc"}`)
	c, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	want := [][]string{
		{"user", "text:text", "image:inlineData", "document:fileData"},
		{"assistant", "thinking:thought+sig", "redacted_thinking:thought+sig", "opaque:executableCode", "opaque:codeExecutionResult",
			"tool_call:functionCall", "tool_call:functionCall", "tool_call:functionCall"},
		// cat pairs by name; the response of two members is opaque; the
		// last ls pairs with the first ls call no response answered.
		{"user", "tool_result:functionResponse->1.6", "opaque:functionResponse", "tool_result:functionResponse->1.4"},
	}
	if d := cmp.Diff(want, shape(c)); d != "" {
		t.Errorf("shape (-want +got):\n%s", d)
	}
	if c.Model != "gemini-2.5-pro" || c.Stream || !c.Continued {
		t.Errorf("model %q stream %v continued %v", c.Model, c.Stream, c.Continued)
	}
	if pt := c.Messages[2].Blocks[2].Parts; len(pt) != 1 || pt[0].Kind != conversation.Opaque {
		t.Errorf("an object output's part: %+v", pt)
	}
}

func TestParseShapes(t *testing.T) {
	for _, body := range []string{
		`{}`,
		`{"contents":{}}`,
		`{"contents":[1]}`,
		`{"contents":[{"role":"user","parts":{}}]}`,
		`[]`,
	} {
		if _, err := Parse([]byte(body)); err == nil {
			t.Errorf("%s: accepted", body)
		}
	}
	if _, err := Parse([]byte(`{"contents":[{"parts":[{"text":"x"}]}]`)); err == nil {
		t.Error("invalid JSON accepted")
	}
}

func TestPaths(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		claim        protocol.Claim
		rewritable   bool
		model        string
	}{
		{"POST", "/v1beta/models/gemini-2.5-pro:generateContent", protocol.Yes, true, "gemini-2.5-pro"},
		{"POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", protocol.Yes, true, "gemini-2.5-pro"},
		{"POST", "/v1/models/gemini-2.5-flash:streamGenerateContent", protocol.Yes, true, "gemini-2.5-flash"},
		{"POST", "/v1beta/models/gemini-2.5-pro:countTokens", protocol.Yes, false, "gemini-2.5-pro"},
		{"GET", "/v1beta/models", protocol.Yes, false, ""},
		{"POST", "/v1/messages", protocol.No, false, ""},
		{"POST", "/v1/responses", protocol.No, false, ""},
	} {
		if got := Protocol.Claim(tc.method, tc.path, nil); got != tc.claim {
			t.Errorf("%s %s: claim %v, want %v", tc.method, tc.path, got, tc.claim)
		}
		if got := Protocol.Rewritable(tc.method, tc.path); got != tc.rewritable {
			t.Errorf("%s %s: rewritable %v", tc.method, tc.path, got)
		}
		m, _, _ := SplitPath(tc.path)
		if m != tc.model {
			t.Errorf("%s: model %q, want %q", tc.path, m, tc.model)
		}
	}
}

// TestCLICompaction: the Gemini CLI's compression request (its system
// instruction and last user text, as its source writes them) is the
// client's own compaction; an ordinary turn is not.
func TestCLICompaction(t *testing.T) {
	history := `{"role":"user","parts":[{"text":"fix it"}]},{"role":"model","parts":[{"text":"done"}]},`
	system := `"systemInstruction":{"parts":[{"text":"\nYou are a specialized system component responsible for distilling chat history into a structured XML <state_snapshot>.\n"}],"role":"user"}`
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"contents":[` + history + `{"role":"user","parts":[{"text":"Generate a new <state_snapshot> based on the provided history.\n\nFirst, reason in your scratchpad. Then, generate the updated <state_snapshot>."}]}],` + system + `}`, true},
		{`{"contents":[` + history + `{"role":"model","parts":[{"text":"<state_snapshot>...</state_snapshot>"}]},{"role":"user","parts":[{"text":"Critically evaluate the \u003cstate_snapshot> you just generated."}]}],` + system + `}`, true},
		{`{"contents":[` + history + `{"role":"user","parts":[{"text":"go on"}]}],` + system + `}`, false},
		{`{"contents":[` + history + `{"role":"user","parts":[{"text":"what is a <state_snapshot>?"}]}],"systemInstruction":{"parts":[{"text":"You are an agent."}]}}`, false},
	} {
		c, err := Parse([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if got := Protocol.Features(nil, c).ClientCompaction; got != tc.want {
			t.Errorf("%s: client compaction %v, want %v", tc.body, got, tc.want)
		}
		c.Release()
	}
}

// TestParseErrorResponse: a functionResponse whose response is
// {"error": ...} (the SDKs' and the Gemini CLI's failed call) is an error
// result, so summaries keep why it failed; {"output": ...} is not.
func TestParseErrorResponse(t *testing.T) {
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"go"}]},` +
		`{"role":"model","parts":[{"functionCall":{"id":"a","name":"sh","args":{}}},{"functionCall":{"id":"b","name":"sh","args":{}}}]},` +
		`{"role":"user","parts":[{"functionResponse":{"id":"a","name":"sh","response":{"error":"permission denied"}}},{"functionResponse":{"id":"b","name":"sh","response":{"output":"ok"}}}]}]}`)
	c, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	var got []bool
	for _, b := range c.Messages[2].Blocks {
		got = append(got, b.IsError)
	}
	if d := cmp.Diff([]bool{true, false}, got); d != "" {
		t.Errorf("IsError (-want +got):\n%s", d)
	}
}
