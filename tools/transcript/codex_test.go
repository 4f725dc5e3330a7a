package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// codexSummary describes a loaded Codex session for the golden files.
func codexSummary(s *Session) string {
	var b strings.Builder
	cx := s.Codex
	fmt.Fprintf(&b, "session %s format=%s model=%q client_session=%q cli=%q instructions=%dB requests=%d\n",
		s.ID, s.Format, s.Model, s.ClientSessionID, cx.CLIVersion, len(cx.Instructions), s.Requests())
	fmt.Fprintf(&b, "stats %+v\n", s.Stats)
	for i, it := range cx.Items {
		fmt.Fprintf(&b, "item %3d line=%d %s %s output=%v %dB\n", i, it.Line, it.Type, it.Role, it.Output, len(it.Raw))
	}
	for k, t := range cx.Turns {
		u := "none"
		if t.Usage != nil {
			u = fmt.Sprintf("%d+%d/%d", t.Usage.InputTokens, t.Usage.CacheReadInputTokens, t.Usage.OutputTokens)
		}
		fmt.Fprintf(&b, "request %2d line=%d input=[%d,%d) output=[%d,%d) model=%s effort=%q turn=%q reset=%v compaction=%v usage=%s\n",
			k, t.Line, t.Start, t.End, t.End, t.Out, t.Model, t.Effort, t.TurnID, t.Reset, t.Compaction, u)
	}
	return b.String()
}

// checkCodexRequests checks every request of a Codex session (see
// checkRendered).
func checkCodexRequests(t *testing.T, s *Session) {
	t.Helper()
	checkRendered(t, s, ProtoResponses)
}

func TestCodexGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/codex/*.jsonl")
	if len(files) < 2 {
		t.Fatalf("testdata missing: %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ss, err := LoadFile(f, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(ss) != 1 || ss[0].Format != Codex {
				t.Fatalf("not loaded as one Codex session: %d sessions", len(ss))
			}
			s := ss[0]
			checkCodexRequests(t, s)
			base := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
			golden(t, filepath.Join("testdata", "golden", "codex-"+base+".txt"), []byte(codexSummary(s)))
			b, _ := NewBuilder(s, BuildOptions{})
			r, _ := b.Request(b.Len() - 1)
			golden(t, filepath.Join("testdata", "golden", "codex-"+base+".last.json"), r.Body)
		})
	}
}

// TestCodexCaptureLayout rebuilds the third request of a real Codex CLI
// 0.169.0 session from its rollout and compares it with the body that
// client sent (research/captures/codex-first/0003): the same top-level
// keys in the same order, the same values but for the two the rollout
// cannot give back (see codexBuilder), and every history item byte for
// byte.
func TestCodexCaptureLayout(t *testing.T) {
	ss, err := LoadFile("testdata/codex/capture-codex-first.rollout.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := ss[0]
	if s.Requests() != 3 {
		t.Fatalf("%d requests, want 3 (captures 0001-0003)", s.Requests())
	}
	b, _ := NewBuilder(s, BuildOptions{})
	r, _ := b.Request(2)
	want, err := os.ReadFile("testdata/codex/capture-codex-first-0003.body.raw")
	if err != nil {
		t.Fatal(err)
	}
	keys := func(body []byte) []string {
		var out []string
		root, _ := jsonscan.Root(body)
		it := jsonscan.Members(body, root)
		for k, _, ok := it.NextMember(); ok; k, _, ok = it.NextMember() {
			out = append(out, string(k.Bytes(body)))
		}
		return out
	}
	if d := cmp.Diff(keys(want), keys(r.Body)); d != "" {
		t.Errorf("top-level keys (-captured +rebuilt):\n%s", d)
	}
	for _, k := range []string{"model", "stream", "tools", "tool_choice", "parallel_tool_calls", "reasoning", "store", "include", "prompt_cache_key"} {
		if g, w := string(member(r.Body, k).Bytes(r.Body)), string(member(want, k).Bytes(want)); g != w {
			t.Errorf("%s = %.200s, captured %.200s", k, g, w)
		}
	}
	gi, wi := inputItems(r.Body), inputItems(want)
	if len(gi) != len(wi) {
		t.Fatalf("%d input items, captured %d", len(gi), len(wi))
	}
	// Item 0 is the base instructions: Codex trimmed the recorded text
	// before sending it and its id is not recorded.
	var g0, w0 map[string]any
	json.Unmarshal([]byte(gi[0]), &g0)
	json.Unmarshal([]byte(wi[0]), &w0)
	if g0["type"] != w0["type"] || g0["role"] != w0["role"] || g0["role"] != "developer" {
		t.Errorf("first item %v/%v, captured %v/%v", g0["type"], g0["role"], w0["type"], w0["role"])
	}
	if d := cmp.Diff(wi[1:], gi[1:]); d != "" {
		t.Errorf("history items differ (-captured +rebuilt):\n%s", d)
	}
	var gm, wm map[string]any
	json.Unmarshal(member(r.Body, "client_metadata").Bytes(r.Body), &gm)
	json.Unmarshal(member(want, "client_metadata").Bytes(want), &wm)
	for k, v := range gm {
		if wm[k] != v {
			t.Errorf("client_metadata.%s = %v, captured %v", k, v, wm[k])
		}
	}
}

// TestCodexCaptureCompaction rebuilds a real Codex CLI 0.169.0 session
// with a local compaction (research/captures/codex-custom-compact): the
// compaction request is marked, the history restarts with the recorded
// replacement history, and the requests after it carry the same items,
// byte for byte, as the bodies the client sent (0003, the first after
// the compaction, and 0008, the last, after a resumed second turn).
func TestCodexCaptureCompaction(t *testing.T) {
	ss, err := LoadFile("testdata/codex/capture-codex-custom-compact.rollout.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := ss[0]
	if s.Requests() != 8 || s.Stats.Resets != 1 {
		t.Fatalf("%d requests, %d compactions; want 8 and 1", s.Requests(), s.Stats.Resets)
	}
	var flags []string
	for _, tr := range s.Codex.Turns {
		flags = append(flags, fmt.Sprintf("reset=%v compaction=%v usage=%v", tr.Reset, tr.Compaction, tr.Usage != nil))
	}
	want := []string{"reset=false compaction=false usage=true", "reset=false compaction=true usage=true", "reset=true compaction=false usage=true"}
	for range 5 {
		want = append(want, "reset=false compaction=false usage=true")
	}
	if d := cmp.Diff(want, flags); d != "" {
		t.Errorf("turns (-want +got):\n%s", d)
	}
	b, _ := NewBuilder(s, BuildOptions{})
	for k, name := range map[int]string{2: "0003", 7: "0008"} {
		r, _ := b.Request(k)
		body, err := os.ReadFile("testdata/codex/capture-codex-custom-compact-" + name + ".body.raw")
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(inputItems(body)[1:], inputItems(r.Body)[1:]); d != "" {
			t.Errorf("request %d vs capture %s (-captured +rebuilt):\n%s", k, name, d)
		}
	}
	checkCodexRequests(t, s)
}

// inputItems returns the items of a Responses body's input array.
func inputItems(body []byte) []string {
	var out []string
	in := member(body, "input")
	it := jsonscan.Elements(body, in)
	for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
		out = append(out, string(v.Bytes(body)))
	}
	return out
}

func TestParseCodexCases(t *testing.T) {
	meta := `{"type":"session_meta","payload":{"id":"th-1","cli_version":"0.169.0","base_instructions":{"text":"BASE"}}}`
	tc := `{"type":"turn_context","payload":{"model":"gpt-5.2-codex","effort":"high","turn_id":"tu-1"}}`
	user := `{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}}`
	rs := `{"type":"response_item","payload":{"type":"reasoning","summary":[],"content":null,"encrypted_content":"gAAA"}}`
	call := `{"type":"response_item","payload":{"type":"function_call","name":"sh","arguments":"{}","call_id":"c1","internal_chat_message_metadata_passthrough":{"x":1}}}`
	out := `{"type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"ok"}}`
	call2 := `{"type":"response_item","payload":{"type":"function_call","name":"sh","arguments":"{}","call_id":"c2"}}`
	out2 := `{"type":"response_item","payload":{"type":"function_call_output","call_id":"c2","output":"ok"}}`
	asst := `{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}}`
	tok := func(total, in, cached, outTok int) string {
		return fmt.Sprintf(`{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"total_tokens":%d},"last_token_usage":{"input_tokens":%d,"cached_input_tokens":%d,"output_tokens":%d}}}}`, total, in, cached, outTok)
	}
	type turn struct {
		start, end, out int
		usage           string
		reset           bool
	}
	cases := []struct {
		name  string
		lines []string
		want  []turn
		items int
		stats Stats
	}{
		{"usage before output (0.9x)", []string{meta, tc, user, rs, call, tok(10, 8, 4, 2), tok(10, 8, 4, 2), out, asst, tok(20, 12, 8, 3)},
			[]turn{{0, 1, 3, "4+4/2", false}, {0, 4, 5, "4+8/3", false}}, 5, Stats{Lines: 10, Ignored: 0}},
		{"usage after output (0.169)", []string{meta, tc, user, rs, call, out, tok(10, 8, 4, 2), asst, tok(20, 12, 8, 3)},
			[]turn{{0, 1, 3, "4+4/2", false}, {0, 4, 5, "4+8/3", false}}, 5, Stats{Lines: 9}},
		{"parallel outputs before the usage (0.169)", []string{meta, tc, user, rs, call, call2, out, out2, tok(10, 8, 4, 2), asst, tok(20, 12, 8, 3)},
			[]turn{{0, 1, 4, "4+4/2", false}, {0, 6, 7, "4+8/3", false}}, 7, Stats{Lines: 11}},
		{"no usage, bad lines", []string{meta, `{bad`, user, `{"type":"response_item","payload":{"role":"x"}}`, asst, `[1]`, `{"type":"event_msg","payload":{"type":"token_count","info":null}}`, `{"type":"world_state","payload":{}}`,
			`{"type":"response_item","payload":{"type":"ghost_snapshot","ghost_commit":{}}}`},
			[]turn{{0, 1, 2, "none", false}}, 2, Stats{Lines: 9, Malformed: 2, Ignored: 2, Repairs: Repairs{BadBlock: 1}}},
		{"compaction with replacement history", []string{meta, user, asst, tok(5, 5, 0, 1),
			`{"type":"compacted","payload":{"message":"","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"summary"}]},3]}}`,
			user, rs, call, tok(9, 9, 0, 1)},
			[]turn{{0, 1, 2, "5+0/1", false}, {2, 4, 6, "9+0/1", true}}, 6, Stats{Lines: 9, Resets: 1, Repairs: Repairs{BadBlock: 1}}},
		{"compaction with a summary only", []string{meta, user, asst, `{"type":"compacted","payload":{"message":"SUMMARY"}}`, user, asst},
			[]turn{{0, 1, 2, "none", false}, {2, 4, 5, "none", true}}, 5, Stats{Lines: 6, Resets: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := ParseCodex([]byte(strings.Join(c.lines, "\n")), "x/rollout-a.jsonl")
			var got []turn
			for _, tr := range s.Codex.Turns {
				u := "none"
				if tr.Usage != nil {
					u = fmt.Sprintf("%d+%d/%d", tr.Usage.InputTokens, tr.Usage.CacheReadInputTokens, tr.Usage.OutputTokens)
				}
				got = append(got, turn{tr.Start, tr.End, tr.Out, u, tr.Reset})
			}
			if d := cmp.Diff(c.want, got, cmp.AllowUnexported(turn{})); d != "" {
				t.Errorf("turns (-want +got):\n%s", d)
			}
			if len(s.Codex.Items) != c.items {
				t.Errorf("%d items, want %d", len(s.Codex.Items), c.items)
			}
			if d := cmp.Diff(c.stats, s.Stats); d != "" {
				t.Errorf("stats (-want +got):\n%s", d)
			}
			if s.ID != "th-1" || s.Codex.Instructions != "BASE" {
				t.Errorf("id %q instructions %q", s.ID, s.Codex.Instructions)
			}
			for _, it := range s.Codex.Items {
				if bytes.Contains(it.Raw, []byte("internal_chat")) {
					t.Errorf("internal metadata kept: %s", it.Raw)
				}
			}
			checkCodexRequests(t, s)
		})
	}
}

func TestCodexRequestLayout(t *testing.T) {
	data := strings.Join([]string{
		`{"type":"session_meta","payload":{"id":"th-1","base_instructions":"BASE"}}`,
		`{"type":"turn_context","payload":{"model":"gpt-5.2-codex","effort":"high","turn_id":"tu-1"}}`,
		`{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}}`,
		`{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}}`,
	}, "\n")
	s := ParseCodex([]byte(data), "rollout-x.jsonl")
	p := DefaultProfile()
	p.ResponsesTools = json.RawMessage(`[ {"type":"function","name":"sh"} ]`)
	b, err := NewBuilder(s, BuildOptions{Profile: &p})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := b.Request(0)
	want := `{"model":"gpt-5.2-codex","stream":true,"input":[{"type":"message","id":"msg_` + textUUID("BASE") +
		`","role":"developer","content":[{"type":"input_text","text":"BASE"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}],` +
		`"tools":[{"type":"function","name":"sh"}],"tool_choice":"auto","parallel_tool_calls":true,"reasoning":{"effort":"high","summary":"auto"},` +
		`"store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"th-1",` +
		`"client_metadata":{"turn_id":"tu-1","thread_id":"th-1","root_turn_id":"tu-1","x-codex-window-id":"th-1:0","session_id":"th-1"}}`
	if d := cmp.Diff(want, string(r.Body)); d != "" {
		t.Errorf("body (-want +got):\n%s", d)
	}
	if got := string(r.Body[:r.Stable]); !strings.HasSuffix(got, `"text":"go"}]}`) {
		t.Errorf("stable prefix ends %q", got[len(got)-20:])
	}
	if r.Usage != nil || r.Message != -1 || r.Model != "gpt-5.2-codex" {
		t.Errorf("request %+v", r)
	}
	if b2, _ := NewBuilder(s, BuildOptions{Model: "o3"}); b2 != nil {
		if r2, _ := b2.Request(0); !bytes.HasPrefix(r2.Body, []byte(`{"model":"o3"`)) {
			t.Errorf("model override: %.40s", r2.Body)
		}
	}
}

func TestIsCodex(t *testing.T) {
	for _, c := range []struct {
		path, data string
		want       bool
	}{
		{"a/rollout-2026.jsonl", "", true},
		{"a/x.jsonl", "\n" + `{"timestamp":"t","type":"session_meta","payload":{}}`, true},
		{"a/x.jsonl", `{"type":"user","message":{}}`, false},
		{"a/x.traj", `{}`, false},
	} {
		if got := IsCodex(c.path, []byte(c.data)); got != c.want {
			t.Errorf("IsCodex(%q) = %v", c.path, got)
		}
	}
}

func FuzzParseCodex(f *testing.F) {
	for _, name := range []string{"testdata/codex/capture-codex-first.rollout.jsonl"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"type":"session_meta","payload":{"id":"x"}}` + "\n" + `{"type":"compacted","payload":{"replacement_history":[{"type":"message","role":"user","content":"s"}]}}` + "\n" + `{"type":"response_item","payload":{"type":"reasoning"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := ParseCodex(data, "fuzz.jsonl")
		if s.Requests() > 40 {
			return
		}
		checkCodexRequests(t, s)
	})
}

// Codex rollouts written as Gemini requests: valid (every call answered
// by id in the next content, the first call of each model content
// signed), each request extending the one before, and a call's
// arguments, a custom tool's input and the outputs carried over.
func TestCodexAsGemini(t *testing.T) {
	files, _ := filepath.Glob("testdata/codex/*.jsonl")
	for _, f := range files {
		ss, err := LoadFile(f, Options{})
		if err != nil {
			t.Fatal(err)
		}
		checkRendered(t, ss[0], ProtoGemini)
	}
	s := ParseCodex(jsonl(
		`{"type":"session_meta","payload":{"id":"T","base_instructions":{"text":"BASE"}}}`,
		`{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"fix it"}]}}`,
		`{"type":"response_item","payload":{"type":"reasoning","summary":[],"encrypted_content":"gAAA"}}`,
		`{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\"]}","call_id":"c1"}}`,
		`{"type":"response_item","payload":{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch","call_id":"c2"}}`,
		`{"type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"a.go"}}`,
		`{"type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"c2","output":[{"type":"input_text","text":"ok"}]}}`,
		`{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}}`,
	), "rollout-x.jsonl")
	p := DefaultProfile()
	p.ResponsesTools = json.RawMessage(`[{"type":"function","name":"shell","description":"run","parameters":{"type":"object"}},{"type":"custom","name":"apply_patch","description":"patch"},{"type":"web_search"}]`)
	b, err := NewBuilder(s, BuildOptions{Profile: &p, Protocol: ProtoGemini})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := b.Request(b.Len() - 1)
	want := `{"contents":[{"parts":[{"text":"fix it"}],"role":"user"},` +
		`{"parts":[{"functionCall":{"id":"c1","args":{"command":["ls"]},"name":"shell"},"thoughtSignature":"skip_thought_signature_validator"},{"functionCall":{"id":"c2","args":{"input":"*** Begin Patch"},"name":"apply_patch"}}],"role":"model"},` +
		`{"parts":[{"functionResponse":{"name":"shell","response":{"output":"a.go"},"id":"c1"}},{"functionResponse":{"name":"apply_patch","response":{"output":"ok"},"id":"c2"}}],"role":"user"}],` +
		`"systemInstruction":{"parts":[{"text":"BASE"}],"role":"user"},` +
		`"tools":[{"functionDeclarations":[{"name":"shell","description":"run","parametersJsonSchema":{"type":"object"}},{"name":"apply_patch","description":"patch","parametersJsonSchema":{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}}]}],` +
		`"generationConfig":{"temperature":1,"topP":0.95,"topK":64,"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"HIGH"}}}`
	if d := cmp.Diff(want, string(r.Body)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if r.Model != p.GeminiModel || r.Path != "/v1beta/models/"+p.GeminiModel+":streamGenerateContent" {
		t.Errorf("model %q, path %q", r.Model, r.Path)
	}
}
