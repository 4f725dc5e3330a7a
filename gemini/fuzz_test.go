package gemini

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/convbuild/convbuildtest"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/pass/compress"
	"github.com/ctxguard/ctxguard/pass/persist"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/store"
)

// shapes are small bodies of every part kind, for the fuzzer to start
// from.
var shapes = []string{
	`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
	`{"contents":[{"parts":[{"text":"a"},{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}}],"role":"user"},{"parts":[{"text":"t","thought":true,"thoughtSignature":"c2ln"},{"functionCall":{"name":"ls","args":{"p":"."},"id":"c1"},"thoughtSignature":"c2ln"}],"role":"model"},{"parts":[{"functionResponse":{"name":"ls","response":{"output":"x\ny"},"id":"c1"}}],"role":"user"}],"systemInstruction":{"parts":[{"text":"s"}]},"tools":[{"functionDeclarations":[]}]}`,
	`{"contents":[{"role":"model","parts":[{"executableCode":{"code":"1"}},{"codeExecutionResult":{"output":"1"}},{"fileData":{"mimeType":"image/jpeg","fileUri":"gs://b/x"}}]}],"cachedContent":"cachedContents/x"}`,
	`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f"}}]},{"role":"user","parts":[{"functionResponse":{"name":"f","response":{"a":1,"b":2}}}]}]}`,
}

// FuzzParse checks, for any body: Parse never panics and accepts exactly
// the JSON encoding/json accepts (or refuses it as ErrShape); ParseAfter
// on a body sharing a prefix with it equals Parse; the Dialect, Validate
// and ValidateRewrite never panic on what Parse accepts; and the passes
// rewrite it into JSON. Run it with
//
//	go test ./gemini/ -run '^$' -fuzz FuzzParse -fuzztime 5m
//
// Inputs worth keeping are in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, body := range shapes {
		f.Add([]byte(body), 40, []byte(`{"role":"user","parts":[{"text":"x"}]}]}`))
	}
	if b, err := os.ReadFile("testdata/cli/04-stream.body.json"); err == nil {
		f.Add(b, 2000, []byte(`{"role":"user","parts":[{"text":"x"}]}]}`))
	}
	passes := fuzzPasses(f)
	f.Fuzz(func(t *testing.T, body []byte, cut int, tail []byte) {
		c, err := Parse(body)
		valid := json.Valid(body)
		var se *jsonscan.SyntaxError
		switch {
		case err == nil && !valid:
			t.Fatalf("Parse accepted invalid JSON")
		case err != nil && valid && !errors.Is(err, ErrShape):
			t.Fatalf("valid JSON refused with %v", err)
		case err != nil && !valid && !errors.As(err, &se):
			t.Fatalf("invalid JSON refused with %v, not a syntax error", err)
		}
		if err != nil {
			return
		}
		if cut >= 0 && len(body) > 0 {
			next := append(append([]byte(nil), body[:cut%len(body)]...), tail...)
			convbuildtest.SameParse(t, Protocol, c, next)
		}
		exercise(c)
		_ = Validate(body)
		res := pipeline.New(nil, passes...).Run(&pipeline.Request{Conv: c})
		if res.Err != nil {
			t.Fatalf("passes failed: %v", res.Err)
		}
		if !json.Valid(res.Body) {
			t.Fatalf("passes wrote invalid JSON:\n%s", res.Body)
		}
		_ = ValidateRewrite(body, res.Body)
	})
}

// exercise calls every Dialect method on every message and block, and
// checks that ReplaceMessage writes JSON.
func exercise(c *conversation.Conversation) {
	d := c.Dialect
	d.SessionID(c)
	d.CacheMarker(c)
	d.Settings(c, conversation.DropInvalidThinking)
	for mi := range c.Messages {
		m := &c.Messages[mi]
		var kept [][]byte
		for bi := range m.Blocks {
			b := &m.Blocks[bi]
			if k := d.KeptBlock(c, m, b); k != nil {
				kept = append(kept, k)
			}
			d.Image(c, b.Span)
		}
		kept = append(kept, d.AppendText(nil, m.Role, []byte(`"x"`), nil))
		sp, repl := d.ReplaceMessage(c, mi, kept)
		out := append(append(append([]byte(nil), c.Body[:sp.Start]...), repl...), c.Body[sp.End:]...)
		if !json.Valid(out) {
			panic("ReplaceMessage wrote invalid JSON: " + string(out))
		}
	}
}

func fuzzPasses(f *testing.F) []pipeline.Pass {
	bl := &store.Blobs{Store: store.NewMemory(), BaseURL: "http://127.0.0.1:8787"}
	cc := clearing.Defaults()
	cc.Trigger, cc.KeepTokens, cc.ClearAtLeast, cc.KeepUses, cc.Payback = model.Tokens(200), model.Tokens(100), model.Tokens(50), 1, 0
	cc.Trim = clearing.Trim{Enabled: true, KeepRounds: 1}
	cl, err := clearing.New(cc, bl)
	if err != nil {
		f.Fatal(err)
	}
	ccfg := compress.Defaults()
	ccfg.Images.Replace = true
	cp, err := compress.New(ccfg)
	if err != nil {
		f.Fatal(err)
	}
	pcfg := persist.Defaults()
	pcfg.Threshold, pcfg.Preview = 200, 50
	pp, err := persist.New(pcfg, bl)
	if err != nil {
		f.Fatal(err)
	}
	return []pipeline.Pass{cp, pp, cl}
}
