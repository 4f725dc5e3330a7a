package responses_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/pass/compress"
	"github.com/ctxguard/ctxguard/pass/persist"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/store"
)

type Round = responses.Round

func blobs() *store.Blobs {
	return &store.Blobs{Store: store.NewMemory(), BaseURL: "http://127.0.0.1:8787"}
}

// run parses body, runs the passes over it through a pipeline, and checks
// the result with Validate and ValidateRewrite.
func run(t *testing.T, body []byte, passes ...pipeline.Pass) pipeline.Result {
	t.Helper()
	c, err := responses.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	res := pipeline.New(nil, passes...).Run(&pipeline.Request{Conv: c, Env: &pipeline.Env{Window: 400_000, MaxOutput: 128_000}})
	if res.Err != nil {
		t.Fatalf("pipeline: %v", res.Err)
	}
	if err := responses.Validate(res.Body); err != nil {
		t.Fatalf("rewrite invalid: %v\n%s", err, res.Body)
	}
	if err := responses.ValidateRewrite(body, res.Body); err != nil {
		t.Fatalf("ValidateRewrite: %v\n%s", err, res.Body)
	}
	res.Body = bytes.Clone(res.Body)
	return res
}

// items decodes the input items of a body.
func items(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var req struct {
		Input []map[string]any `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	return req.Input
}

// longSession is a Codex session with many rounds of large outputs,
// reasoning before the first call of each turn, custom tool calls and a
// compaction item: enough for clearing and trimming to fire.
func longSession(n int) []byte {
	var rounds []Round
	for i := range n {
		r := Round{Reasoning: i%2 == 0, Output: fmt.Sprintf("run %d\n", i) + strings.Repeat("ok  \tgithub.com/x/y\t0.01s\n", 200)}
		switch i % 4 {
		case 1:
			r.Kind, r.Args = "custom", "*** Begin Patch\n*** Update File: a.go\n"+strings.Repeat("+line\n", 300)+"*** End Patch"
		case 2:
			r.Args = `{"cmd": "cat <<'EOF' > big.txt\n` + strings.Repeat("data ", 400) + `\nEOF", "yield_time_ms": 2000}`
		case 3:
			r.Text = "Built it."
		}
		rounds = append(rounds, r)
	}
	return responses.Session(rounds)
}

// newClear returns a clear pass that fires on small sessions: from
// trigger tokens, keeping the newest keep tokens and one use.
func newClear(t *testing.T, trigger, keep int, trim clearing.Trim, opts ...func(*clearing.Config)) *clearing.Pass {
	t.Helper()
	cfg := clearing.Defaults()
	cfg.Trigger, cfg.KeepTokens, cfg.ClearAtLeast = model.Tokens(trigger), model.Tokens(keep), model.Tokens(keep)
	cfg.Payback, cfg.Trim = 0, trim
	for _, o := range opts {
		o(&cfg)
	}
	p, err := clearing.New(cfg, blobs())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNoPassesIsIdentity: with no rules, and with every rule off, the
// body goes out byte for byte.
func TestNoPassesIsIdentity(t *testing.T) {
	cc := clearing.Defaults()
	cc.Enabled = false
	cp, _ := clearing.New(cc, blobs())
	mc := compress.Defaults()
	mc.Enabled = false
	mp, _ := compress.New(mc)
	pc := persist.Defaults()
	pc.Enabled = false
	pp, _ := persist.New(pc, blobs())
	bodies := [][]byte{longSession(12), responses.Session(nil)}
	for _, f := range []string{"codex-http-multiturn-0006", "codex-openai-compact-0010", "codex-custom-known-model-0006"} {
		bodies = append(bodies, capture(t, f))
	}
	for i, body := range bodies {
		for _, passes := range [][]pipeline.Pass{nil, {mp, pp, cp}} {
			res := run(t, body, passes...)
			if res.Changed || !bytes.Equal(res.Body, body) {
				t.Errorf("body %d with %d passes off: changed", i, len(passes))
			}
		}
	}
}

// TestClear: old tool outputs become stubs, large arguments are cleared
// inside their string, a custom tool's large free-form input (a patch)
// whole, everything else stays, and the result is valid.
func TestClear(t *testing.T) {
	p := newClear(t, 4000, 2000, clearing.Trim{})
	body := longSession(16)
	res := run(t, body, p)
	if !res.Changed || len(res.Body) >= len(body)/2 {
		t.Fatalf("cleared %d of %d bytes", len(body)-len(res.Body), len(body))
	}
	in := items(t, res.Body)
	var stubs, args, patches int
	for _, it := range in {
		switch it["type"] {
		case "custom_tool_call":
			if s, _ := it["input"].(string); strings.HasPrefix(s, "[ctxguard") {
				patches++
			}
		case "function_call_output", "custom_tool_call_output":
			if s, _ := it["output"].(string); strings.HasPrefix(s, "[ctxguard") {
				stubs++
			}
		case "function_call":
			var a map[string]any
			if err := json.Unmarshal([]byte(it["arguments"].(string)), &a); err != nil {
				t.Errorf("arguments no longer JSON: %v", err)
			}
			if s, _ := a["cmd"].(string); strings.HasPrefix(s, "[ctxguard") {
				args++
			}
		}
	}
	if stubs == 0 || args == 0 || patches == 0 {
		t.Errorf("%d outputs, %d arguments and %d custom inputs cleared", stubs, args, patches)
	}
	// The newest round is untouched.
	if last := in[len(in)-1]; strings.HasPrefix(fmt.Sprint(last["output"]), "[ctxguard") {
		t.Errorf("the newest output was cleared")
	}
}

// TestTrim: old rounds are dropped whole, with their reasoning; messages
// and the compaction item stay; the result is valid.
func TestTrim(t *testing.T) {
	p := newClear(t, 4000, 2000, clearing.Trim{Enabled: true, KeepRounds: 2})
	body := longSession(16)
	compaction := `{"type":"compaction","id":"cmp_1","encrypted_content":"gAAAAcompacted"}`
	body = bytes.Replace(body, []byte(`{"type":"message","id":"msg_user"`), []byte(compaction+`,{"type":"message","id":"msg_user"`), 1)
	res := run(t, body, p)
	before, after := items(t, body), items(t, res.Body)
	if len(after) >= len(before) {
		t.Fatalf("%d items before, %d after: nothing dropped", len(before), len(after))
	}
	if !bytes.Contains(res.Body, []byte(compaction)) {
		t.Error("the compaction item is gone")
	}
	count := func(in []map[string]any, typ string) int {
		n := 0
		for _, it := range in {
			if it["type"] == typ {
				n++
			}
		}
		return n
	}
	if count(after, "reasoning") >= count(before, "reasoning") {
		t.Errorf("reasoning items %d → %d", count(before, "reasoning"), count(after, "reasoning"))
	}
	if !bytes.Contains(res.Body, []byte("dropped")) {
		t.Error("no note of the dropped rounds")
	}
	if !bytes.Contains(res.Body, []byte(`"Built it."`)) {
		t.Error("assistant text of a dropped round is gone")
	}
}

// TestClearContinued: a continued conversation's new items are not
// history: clearing leaves them.
func TestClearContinued(t *testing.T) {
	p := newClear(t, 100, 10, clearing.Trim{Enabled: true, KeepRounds: 1})
	body := longSession(8)
	body = bytes.Replace(body, []byte(`"store":false`), []byte(`"store":true,"previous_response_id":"resp_1"`), 1)
	if res := run(t, body, p); res.Changed {
		t.Error("a continued conversation was cleared")
	}
}

// TestCompress: colour codes in a build log are removed from a tool
// output, string or array.
func TestCompress(t *testing.T) {
	p, err := compress.New(compress.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	log := strings.Repeat("\x1b[32mok\x1b[0m  \tgithub.com/x/y\t0.01s\n", 50)
	body := responses.Session([]Round{
		{Reasoning: true, Output: log},
		{Kind: "custom", Args: "*** Begin Patch", Output: []any{map[string]any{"type": "input_text", "text": log}}},
		{Kind: "shell", Output: log},
	})
	res := run(t, body, p)
	if !res.Changed || bytes.Contains(res.Body, []byte(`\u001b[32m`)) {
		t.Fatalf("colour codes left:\n%s", res.Body)
	}
	if !bytes.Contains(res.Body, []byte(`ok  \tgithub.com/x/y`)) {
		t.Error("the log's text is gone")
	}
}

// TestPersist: an output over the threshold is stored and previewed.
func TestPersist(t *testing.T) {
	cfg := persist.Defaults()
	cfg.Threshold, cfg.Preview = 5000, 500
	p, err := persist.New(cfg, blobs())
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("line of a long test log\n", 1000)
	body := responses.Session([]Round{
		{Reasoning: true, Output: big},
		{Kind: "custom", Args: "x", Output: []any{map[string]any{"type": "input_text", "text": big}}},
	})
	res := run(t, body, p)
	if !res.Changed || len(res.Body) > len(body)/4 || len(res.Blobs) == 0 {
		t.Fatalf("persisted: %d → %d bytes, blobs %v", len(body), len(res.Body), res.Blobs)
	}
}

// TestAllPassesOnCaptures: every pass together, on the real captures,
// leaves valid requests.
func TestAllPassesOnCaptures(t *testing.T) {
	cp := newClear(t, 10, 10, clearing.Trim{Enabled: true, KeepRounds: 1}, func(c *clearing.Config) { c.MinTokens, c.KeepUses = 1, 1 })
	mp, _ := compress.New(compress.Defaults())
	pc := persist.Defaults()
	pc.Threshold, pc.Preview = 100, 50
	pp, _ := persist.New(pc, blobs())
	for _, f := range []string{"codex-http-multiturn-0006", "codex-openai-compact-0010", "codex-custom-known-model-0006"} {
		t.Run(f, func(t *testing.T) {
			body := capture(t, f)
			res := run(t, body, mp, pp, cp)
			if !res.Changed {
				t.Error("nothing changed")
			}
		})
	}
}

// capture reads the captured body testdata/codex/name.body.raw.
func capture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/codex/" + name + ".body.raw")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
