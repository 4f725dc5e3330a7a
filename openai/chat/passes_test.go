package chat

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/pass/compress"
	"github.com/ctxguard/ctxguard/pass/persist"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/store"
)

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

// session returns an opencode-shaped request of n tool rounds (the last
// of sessionRequests(n)).
func session(n int) []byte {
	reqs := sessionRequests(n)
	return reqs[len(reqs)-1]
}

// sessionRequests returns the requests opencode sends in a session of n
// tool rounds: each repeats the one before and appends the assistant
// message and the tool messages answering it (WIRE.md §2.4), and a last
// one the final answer and a user message. Each assistant message has ""
// content, reasoning_content and two calls (bash with small arguments,
// write with a whole file as an argument), answered by a run of two tool
// messages, the first a build log in colour.
func sessionRequests(n int) [][]byte {
	msgs := []string{`{"role":"system","content":"You are opencode."}`, `{"role":"user","content":"\"fix the build\""}`}
	body := func() []byte {
		return []byte(`{"model":"fake-model","max_tokens":32000,"messages":[` + strings.Join(msgs, ",") +
			`],"tools":[{"type":"function","function":{"name":"bash","parameters":{}}}],"tool_choice":"auto","stream":true,"stream_options":{"include_usage":true}}`)
	}
	var out [][]byte
	for i := range n {
		log := strings.Repeat(fmt.Sprintf("\x1b[32mok\x1b[0m  pkg/%d\tcompiled line with some detail %d\n", i, i), 60)
		file := strings.Repeat(fmt.Sprintf("package main // file %d, a line of code\n", i), 40)
		args1, _ := json.Marshal(map[string]string{"command": "go build ./...", "description": "build"})
		args2, _ := json.Marshal(map[string]string{"filePath": fmt.Sprintf("/src/f%d.go", i), "content": file})
		msgs = append(msgs,
			`{"role":"assistant","content":"","reasoning_content":`+q(fmt.Sprintf("step %d: build and write", i))+`,"tool_calls":[`+
				`{"id":"call_b`+fmt.Sprint(i)+`","type":"function","function":{"name":"bash","arguments":`+q(string(args1))+`}},`+
				`{"id":"call_w`+fmt.Sprint(i)+`","type":"function","function":{"name":"write","arguments":`+q(string(args2))+`}}]}`,
			`{"role":"tool","tool_call_id":"call_b`+fmt.Sprint(i)+`","content":`+q(log)+`}`,
			`{"role":"tool","tool_call_id":"call_w`+fmt.Sprint(i)+`","content":"Wrote file successfully."}`)
		out = append(out, body())
	}
	msgs = append(msgs, `{"role":"assistant","content":"Done."}`, `{"role":"user","content":"thanks"}`)
	return append(out, body())
}

// run parses body and runs the passes over it through package pipeline.
func run(t *testing.T, body []byte, passes ...pipeline.Pass) pipeline.Result {
	t.Helper()
	c, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	res := pipeline.New(nil, passes...).Run(&pipeline.Request{Conv: c})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if Validate(body) != nil {
		return res // a body of every shape, not a valid request
	}
	if err := Validate(res.Body); err != nil {
		t.Fatalf("rewrite invalid: %v\n%s", err, res.Body)
	}
	if err := ValidateRewrite(body, res.Body); err != nil {
		t.Fatalf("rewrite not allowed: %v\n%s", err, res.Body)
	}
	return res
}

func blobs() *store.Blobs {
	return &store.Blobs{Store: store.NewMemory(), BaseURL: "http://127.0.0.1:8787"}
}

// With no pass, and with every pass off, the body goes out byte for byte.
func TestByteFidelity(t *testing.T) {
	off, err := clearing.New(clearing.Config{}, blobs())
	if err != nil {
		t.Fatal(err)
	}
	cc := compress.Defaults()
	cc.Enabled = false
	cp, err := compress.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	pp, err := persist.New(persist.Config{}, blobs())
	if err != nil {
		t.Fatal(err)
	}
	bodies := [][]byte{session(3), []byte(shapes["tool-rounds"]), []byte(shapes["every-role"])}
	for _, name := range captures {
		bodies = append(bodies, readBody(t, name))
	}
	for i, body := range bodies {
		for _, passes := range [][]pipeline.Pass{nil, {off, cp, pp}} {
			res := run(t, body, passes...)
			if res.Changed || sha256.Sum256(res.Body) != sha256.Sum256(body) {
				t.Errorf("body %d with %d passes off: changed", i, len(passes))
			}
		}
	}
}

func clearConfig() clearing.Config {
	c := clearing.Defaults()
	c.Trigger = model.Tokens(2000)
	c.KeepTokens = model.Tokens(1000)
	c.KeepUses = 2
	c.ClearAtLeast = model.Tokens(1000)
	c.Payback = 0
	return c
}

func TestClear(t *testing.T) {
	body := session(8)
	p, err := clearing.New(clearConfig(), blobs())
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, body, p)
	if !res.Changed || len(res.Body) >= len(body)/2 {
		t.Fatalf("clear: changed %v, %d → %d bytes", res.Changed, len(body), len(res.Body))
	}
	c, err := Parse(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	first := c.Messages[3].Blocks[0] // the first round's bash result
	if got := c.String(first.Content); !strings.Contains(got, "ctxguard") || !strings.Contains(got, "bash result") {
		t.Errorf("first result not cleared: %q", got)
	}
	call := c.Messages[2].Blocks[3] // text, reasoning, bash, write
	var args map[string]string
	if err := json.Unmarshal([]byte(c.String(call.Input)), &args); err != nil || args["filePath"] != "/src/f0.go" || !strings.HasPrefix(args["content"], "[ctxguard") {
		t.Errorf("write arguments: %v %q", err, c.String(call.Input))
	}
	if !bytes.Contains(res.Body, []byte(`"reasoning_content":"step 0: build and write"`)) {
		t.Error("reasoning_content changed")
	}
	last := c.Messages[len(c.Messages)-3].Blocks[0]
	if got := c.String(last.Content); strings.Contains(got, "ctxguard") {
		t.Errorf("newest result cleared: %q", got)
	}
}

func TestClearTrim(t *testing.T) {
	body := session(10)
	cfg := clearConfig()
	cfg.Trigger, cfg.ClearAtLeast = model.Tokens(8000), model.Tokens(6000) // events of several rounds
	cfg.Trim = clearing.Trim{Enabled: true, KeepRounds: 2}
	p, err := clearing.New(cfg, blobs())
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, body, p)
	c, err := Parse(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	o, _ := Parse(body)
	if len(c.Messages) >= len(o.Messages) {
		t.Fatalf("no round dropped: %d messages, %d before\n%s", len(c.Messages), len(o.Messages), res.Body)
	}
	if !bytes.Contains(res.Body, []byte(`{"role":"user","content":"[ctxguard dropped `)) {
		t.Errorf("no note of the dropped rounds:\n%s", res.Body)
	}
}

func TestCompress(t *testing.T) {
	body := session(2)
	p, err := compress.New(compress.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, body, p)
	if !res.Changed || bytes.Contains(res.Body, []byte(`\u001b[32m`)) {
		t.Fatalf("colour codes kept (changed %v)", res.Changed)
	}
	if !bytes.Contains(res.Body, []byte(`"content":"ok  pkg/0\tcompiled line`)) {
		t.Errorf("log text lost:\n%.2000s", res.Body)
	}
}

func TestCompressImage(t *testing.T) {
	img := strings.Repeat("iVBORw0KGgoAAAANSUhEUg", 100)
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"shot"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"screenshot","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"here"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + img + `"}}]}]}`)
	cfg := compress.Defaults()
	cfg.Images.Replace = true
	p, err := compress.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, body, p)
	if !bytes.Contains(res.Body, []byte(`{"type":"text","text":"[ctxguard removed an image: image/png, 1,650 bytes]"}`)) {
		t.Errorf("image not replaced:\n%s", res.Body)
	}
}

func TestPersist(t *testing.T) {
	body := session(2)
	cfg := persist.Defaults()
	cfg.Threshold, cfg.Preview = 2000, 200
	p, err := persist.New(cfg, blobs())
	if err != nil {
		t.Fatal(err)
	}
	res := run(t, body, p)
	if !res.Changed || len(res.Blobs) != 2 {
		t.Fatalf("persist: changed %v, blobs %v", res.Changed, res.Blobs)
	}
}

// All passes together, as ctxguard runs them.
func TestAllPasses(t *testing.T) {
	cp, err := compress.New(compress.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	b := blobs()
	pcfg := persist.Defaults()
	pcfg.Threshold, pcfg.Preview = 2000, 200
	pp, err := persist.New(pcfg, b)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := clearing.New(clearConfig(), b)
	if err != nil {
		t.Fatal(err)
	}
	for n := range 12 {
		run(t, session(n), cp, pp, cl)
	}
}
