package clearing

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tools/validate"
)

// round is one tool round of a hand-made session.
type round struct {
	tool   string
	input  string // JSON object
	result string // text
	think  string // thinking text ("" for none)
}

// build returns a Claude Code-shaped request holding the rounds, the last
// user message carrying the moving cache marker.
func build(thinking string, rounds []round) []byte {
	var msgs []string
	msgs = append(msgs, `{"role":"user","content":"start the task"}`)
	for i, r := range rounds {
		id := fmt.Sprintf("toolu_%03d", i)
		var blocks []string
		if r.think != "" {
			blocks = append(blocks, `{"type":"thinking","thinking":`+q(r.think)+`,"signature":"c2lnbmF0dXJl`+fmt.Sprint(i)+`"}`)
		}
		blocks = append(blocks, `{"type":"tool_use","id":"`+id+`","name":"`+r.tool+`","input":`+r.input+`}`)
		msgs = append(msgs, `{"role":"assistant","content":[`+strings.Join(blocks, ",")+`]}`)
		marker := ""
		if i == len(rounds)-1 {
			marker = `,"cache_control":{"type":"ephemeral"}`
		}
		msgs = append(msgs, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+id+`","content":`+q(r.result)+marker+`}]}`)
	}
	return []byte(`{"model":"claude-opus-4-5","messages":[` + strings.Join(msgs, ",") + `],` +
		`"system":[{"type":"text","text":"x"},{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}},{"type":"text","text":"more","cache_control":{"type":"ephemeral"}}],` +
		`"thinking":` + thinking + `,"future_field":[1,{"a":"\u00e9"}],"stream":true}`)
}

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

func testConfig() Config {
	c := Defaults()
	c.Trigger = model.Tokens(2000)
	c.KeepTokens = model.Tokens(1000)
	c.KeepUses = 2
	c.ClearAtLeast = model.Tokens(1000)
	c.Payback = 0 // sessions this short would see no event (TestPaysBack)
	return c
}

var validateOpts = validate.Options{AllowInputEdits: true, AllowThinkingRemoval: true, AllowCacheMarkers: true, AllowTopLevel: []string{"thinking"}}

func rewrite(t *testing.T, cfg Config, st store.Store, env *pipeline.Env, body []byte) pipeline.Result {
	t.Helper()
	p, err := New(cfg, &store.Blobs{Store: st, BaseURL: "http://127.0.0.1:8787"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := anthropic.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	res := pipeline.New(nil, p).Run(&pipeline.Request{Conv: c, Env: env})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if err := validate.Rewrite(body, res.Body, validateOpts); err != nil {
		t.Fatalf("invalid rewrite: %v", err)
	}
	return res
}

type decoded struct {
	Messages []struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	} `json:"messages"`
	Thinking json.RawMessage `json:"thinking"`
}

func decode(t *testing.T, b []byte) decoded {
	t.Helper()
	var d decoded
	// content may be a string for the first message; decode it loosely.
	var raw struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Thinking json.RawMessage `json:"thinking"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	d.Thinking = raw.Thinking
	for _, m := range raw.Messages {
		var blocks []json.RawMessage
		if json.Unmarshal(m.Content, &blocks) != nil {
			blocks = []json.RawMessage{m.Content}
		}
		d.Messages = append(d.Messages, struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		}{m.Role, blocks})
	}
	return d
}

func TestClearRewrite(t *testing.T) {
	big := strings.Repeat("output line with some words in it\n", 120) // ~1000 tokens
	file := strings.Repeat("package main // source\n", 100)
	rounds := []round{
		{"Bash", `{"command":"make test"}`, big, "first thoughts"},
		{"Write", `{"file_path":"/src/main.go","content":` + q(file) + `}`, "File created successfully", "second"},
		{"Bash", `{"command":"go vet"}`, big, "third"},
		{"Bash", `{"command":"ls"}`, big, "fourth"},
		{"Bash", `{"command":"ls -la"}`, big, "fifth"},
	}
	orig := build(`{"type":"adaptive"}`, rounds)
	st := store.NewMemory()
	res := rewrite(t, testConfig(), st, &pipeline.Env{Window: 200_000}, orig)
	d := decode(t, res.Body)

	result := func(mi int) string {
		var b struct{ Content string }
		json.Unmarshal(d.Messages[mi].Content[0], &b)
		return b.Content
	}
	// Messages: 0 prompt, 1/2 round 0, 3/4 round 1, 5/6, 7/8, 9/10.
	first := result(2)
	if !strings.HasPrefix(first, "[ctxguard clears old tool output") || !strings.Contains(first, "GET http://127.0.0.1:8787/ctxguard/v1/blobs/<blob>") ||
		!strings.Contains(first, "This one: Bash result, 4K chars, blob "+store.ID([]byte(big))) {
		t.Errorf("first stub: %q", first)
	}
	pl := planOf(t, testConfig(), orig)
	if pl.clearTo < 7 {
		t.Fatalf("clearTo %d: the test needs rounds 0-2 cleared", pl.clearTo)
	}
	if got, want := result(6), "[ctxguard cleared Bash result, 4K chars, blob "+store.ID([]byte(big))+"]"; got != want {
		t.Errorf("later stub = %q, want %q", got, want)
	}
	if result(10) != big || (pl.clearTo <= 8) != (result(8) == big) {
		t.Errorf("clearTo %d: the results after it must stay, the newest always", pl.clearTo)
	}
	// The Write input: content stubbed, file_path kept verbatim.
	var w struct {
		Input map[string]string `json:"input"`
	}
	for _, blk := range d.Messages[3].Content {
		json.Unmarshal(blk, &w)
	}
	if w.Input["file_path"] != "/src/main.go" || !strings.HasPrefix(w.Input["content"], "[ctxguard cleared 2.3K chars, blob "+store.ID([]byte(file))) {
		t.Errorf("write input = %v", w.Input)
	}
	// Every cleared item is in the store, as it was.
	for _, s := range []string{big, file} {
		rc, err := st.OpenBlob(context.Background(), store.ID([]byte(s)))
		if err != nil {
			t.Fatalf("blob missing: %v", err)
		}
		b, _ := io.ReadAll(rc)
		if string(b) != s {
			t.Error("blob differs from the cleared content")
		}
	}
	// Thinking: removed before the boundary of the last event, kept after
	// it and always in the latest assistant message.
	if pl.thinkTo < 3 {
		t.Fatalf("thinkTo %d: the test needs an event that removes thinking", pl.thinkTo)
	}
	for mi := 1; mi < 9; mi += 2 {
		has := strings.Contains(string(d.Messages[mi].Content[0]), `"thinking"`)
		if has != (mi >= pl.thinkTo) {
			t.Errorf("message %d has thinking %v; thinkTo %d", mi, has, pl.thinkTo)
		}
	}
	if !strings.Contains(string(d.Messages[9].Content[0]), `"thinking":"fifth"`) {
		t.Error("latest thinking removed")
	}
	if n := strings.Count(string(res.Body), `"cache_control"`); n > 4 {
		t.Errorf("%d cache markers", n)
	}
	// Bytes nobody rewrote are untouched.
	if !strings.Contains(string(res.Body), `"future_field":[1,{"a":"\u00e9"}]`) {
		t.Error("unknown field changed")
	}
}

// TestOverBlobLimit: an item the store refuses as too large (a Redis
// store's blob limit, a capped memory store) stays whole; the other items
// are still cleared and the request is not failed.
func TestOverBlobLimit(t *testing.T) {
	big := strings.Repeat("output line with some words in it\n", 120) // ~4 KB
	huge := strings.Repeat("a much longer output line, over the cap\n", 300)
	rounds := []round{
		{"Bash", `{"command":"make test"}`, big, ""},
		{"Bash", `{"command":"cat log"}`, huge, ""},
		{"Bash", `{"command":"go vet"}`, big + "2", ""},
		{"Bash", `{"command":"ls"}`, big + "3", ""},
		{"Bash", `{"command":"ls -la"}`, big + "4", ""},
	}
	orig := build(`{"type":"adaptive"}`, rounds)
	st := store.NewMemoryWith(store.MemoryOptions{MaxBytes: 10_000})
	res := rewrite(t, testConfig(), st, &pipeline.Env{Window: 200_000}, orig)
	if pl := planOf(t, testConfig(), orig); pl.clearTo < 5 {
		t.Fatalf("clearTo %d: the test needs rounds 0 and 1 cleared", pl.clearTo)
	}
	out := string(res.Body)
	if !strings.Contains(out, q(huge)) {
		t.Error("the result over the blob limit was removed")
	}
	if !strings.Contains(out, "[ctxguard cleared Bash result, 4K chars, blob "+store.ID([]byte(big))) &&
		!strings.Contains(out, "This one: Bash result, 4K chars, blob "+store.ID([]byte(big))) {
		t.Error("the result under the limit was not cleared")
	}
}

// TestMarkerAfterEvent: once an event has happened, later requests carry
// one more marker at the cleared boundary, copied from the client's own.
func TestMarkerAfterEvent(t *testing.T) {
	big := strings.Repeat("x", 4000)
	var rounds []round
	for i := 0; i < 7; i++ {
		rounds = append(rounds, round{"Bash", `{"command":"c"}`, big, ""})
	}
	cfg := testConfig()
	cfg.Trigger = model.Tokens(2500)
	orig := build(`{"type":"disabled"}`, rounds)
	res := rewrite(t, cfg, store.NewMemory(), nil, orig)
	body := string(res.Body)
	if n := strings.Count(body, `"cache_control":{"type":"ephemeral"}`); n != 4 {
		t.Fatalf("%d markers, want 4:\n%s", n, body)
	}
	// It sits on the last block before the boundary of the last event
	// that is not this request's own.
	pl := planOf(t, cfg, orig)
	c, _ := anthropic.Parse(orig)
	to := markerBoundary(pl, len(c.Messages))
	if to == 0 {
		t.Fatalf("no boundary for the marker; events %+v", pl.events)
	}
	d := decode(t, res.Body)
	for mi, m := range d.Messages[:len(d.Messages)-1] {
		has := strings.Contains(string(m.Content[len(m.Content)-1]), "cache_control")
		if has != (mi == to-1) {
			t.Errorf("message %d has marker %v; boundary %d", mi, has, to)
		}
	}
	if strings.Contains(body, "block_binding") {
		t.Error("binding setting added for a non-binding model")
	}
}

func TestBinding(t *testing.T) {
	rounds := []round{{"Bash", `{"command":"c"}`, "ok", "t"}}
	env := &pipeline.Env{Window: 200_000, Binding: true}
	for _, tc := range []struct {
		thinking string
		want     string
	}{
		{`{"type":"adaptive"}`, `{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"drop_block"}}`},
		{`{"type":"enabled","budget_tokens":1024}`, `{"type":"enabled","budget_tokens":1024,"block_binding":{"prefix_mismatch_behavior":"drop_block"}}`},
		{`{"type":"disabled"}`, `{"type":"disabled"}`},
		{`{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"error"}}`, `{"type":"adaptive","block_binding":{"prefix_mismatch_behavior":"error"}}`},
	} {
		res := rewrite(t, testConfig(), store.NewMemory(), env, build(tc.thinking, rounds))
		d := decode(t, res.Body)
		if string(d.Thinking) != tc.want {
			t.Errorf("thinking %s became %s, want %s", tc.thinking, d.Thinking, tc.want)
		}
		wantBeta := tc.want != tc.thinking
		if got := len(res.Headers) == 1 && res.Headers[0] == [2]string{"Anthropic-Beta", anthropic.BindingBeta}; got != wantBeta {
			t.Errorf("thinking %s: headers %v", tc.thinking, res.Headers)
		}
	}
}

// TestOnlyThinking: an old assistant message that held nothing but
// thinking keeps a short text block, so no message is left empty.
func TestOnlyThinking(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"` + strings.Repeat("deep ", 4000) + `","signature":"s"}]},` +
		`{"role":"user","content":"go on"},{"role":"assistant","content":[{"type":"text","text":"ok"}]},{"role":"user","content":"more"}]}`)
	cfg := testConfig()
	cfg.Trigger = model.Tokens(1000)
	res := rewrite(t, cfg, store.NewMemory(), nil, body)
	if !strings.Contains(string(res.Body), `{"role":"assistant","content":[{"type":"text","text":"[ctxguard removed earlier reasoning]"}]}`) {
		t.Errorf("got %s", res.Body)
	}
}

func TestDisabledIsIdentity(t *testing.T) {
	big := strings.Repeat("y", 8000)
	body := build(`{"type":"adaptive"}`, []round{{"Bash", `{}`, big, "a"}, {"Bash", `{}`, big, "b"}, {"Bash", `{}`, big, "c"}})
	cfg := testConfig()
	cfg.Enabled = false
	res := rewrite(t, cfg, store.NewMemory(), &pipeline.Env{Binding: true}, body)
	if res.Changed || string(res.Body) != string(body) {
		t.Error("disabled pass changed the body")
	}
}

// planOf returns the pass's plan for a request.
func planOf(t *testing.T, cfg Config, body []byte) plan {
	t.Helper()
	p, err := New(cfg, &store.Blobs{Store: store.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	c, err := anthropic.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	_, pl := analyzed(t, p, c, nil)
	return pl
}
