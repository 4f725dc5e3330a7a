package digest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/openaitest"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/pass/digest"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/store/storetest"
	"github.com/ctxguard/ctxguard/summarize"
	"github.com/ctxguard/ctxguard/tools/validate"
)

// The page a web fetch brings: about 60 KB (15K tokens, over the default
// 10K), with quotes, an accent and line breaks its JSON string escapes.
var page = strings.Repeat("The \"quick\" brown fox jumps over the lazy dog, café.\n", 1150)

const (
	question = "what does it say about foxes?"
	answer   = "Foxes: the page says a quick brown fox jumps over a lazy dog, 1150 times."
)

// wire is one protocol: its adapter, its validator, and a session whose
// first request brings the page as the result of a web fetch (in the last
// message) and whose later requests go on after it.
type wire struct {
	proto    protocol.Protocol
	tool     string // the fetch tool's name in the client that speaks it
	valid    func(orig, sent []byte) error
	session  func(n int, msgs ...string) [][]byte
	messages func(result string) []string // user, call, result
}

var wires = []wire{
	{
		proto: anthropic.Protocol, tool: "WebFetch",
		valid: func(orig, sent []byte) error { return validate.Rewrite(orig, sent, validate.Options{}) },
		messages: func(result string) []string {
			return []string{`{"role":"user","content":"what does the page say?"}`,
				`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"WebFetch","input":{"url":"https://example.com","prompt":` + q(question) + `}}]}`,
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":` + result + `}]}`}
		},
		session: func(n int, msgs ...string) [][]byte {
			return grow(n, msgs, `{"model":"claude-sonnet-4-5","max_tokens":1000,"stream":true,"messages":[`, `]}`,
				`{"role":"assistant","content":"answer %d"}`, `{"role":"user","content":"next %d"}`)
		},
	},
	{
		proto: chat.Protocol, tool: "webfetch",
		valid: chat.ValidateRewrite,
		messages: func(result string) []string {
			args := `{"url":"https://example.com","prompt":` + q(question) + `}`
			return []string{`{"role":"user","content":"what does the page say?"}`,
				`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"webfetch","arguments":` + q(args) + `}}]}`,
				`{"role":"tool","tool_call_id":"call_1","content":` + result + `}`}
		},
		session: func(n int, msgs ...string) [][]byte {
			return grow(n, msgs, `{"model":"gpt-5","stream":true,"stream_options":{"include_usage":true},"messages":[`, `]}`,
				`{"role":"assistant","content":"answer %d"}`, `{"role":"user","content":"next %d"}`)
		},
	},
	{
		proto: responses.Protocol, tool: "web_fetch",
		valid: responses.ValidateRewrite,
		messages: func(result string) []string {
			args := `{"url":"https://example.com","prompt":` + q(question) + `}`
			return []string{`{"type":"message","role":"user","content":[{"type":"input_text","text":"what does the page say?"}]}`,
				`{"type":"function_call","call_id":"call_1","name":"web_fetch","arguments":` + q(args) + `}`,
				`{"type":"function_call_output","call_id":"call_1","output":` + result + `}`}
		},
		session: func(n int, msgs ...string) [][]byte {
			return grow(n, msgs, `{"model":"gpt-5-codex","stream":true,"store":false,"input":[`, `]}`,
				`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer %d"}]}`,
				`{"type":"message","role":"user","content":[{"type":"input_text","text":"next %d"}]}`)
		},
	},
}

func q(s string) string { return string(jsonscan.AppendQuote(nil, s)) }

// grow returns n requests: msgs, then each time an assistant answer and
// a user message more.
func grow(n int, msgs []string, head, tail, assistant, user string) [][]byte {
	var out [][]byte
	for i := range n {
		out = append(out, []byte(head+strings.Join(msgs, ",")+tail))
		msgs = append(msgs, fmt.Sprintf(assistant, i), fmt.Sprintf(user, i))
	}
	return out
}

// fetchSession is w's session of n requests around the page.
func fetchSession(w wire, n int) [][]byte { return w.session(n, w.messages(q(page))...) }

// model is a fake of the model APIs, served over HTTP in their wire
// formats (anthropictest, openaitest), answering as the test sets.
type model struct {
	anthropic *anthropictest.Server
	openai    *openaitest.Server

	mu      sync.Mutex
	mode    string        // "answer", "fail" (500), "empty" or "block"
	arrived chan struct{} // block: closed when a call arrives
	release chan struct{} // block: the answer goes when it is closed

	arrive, unblockOnce sync.Once
}

func newModel(t *testing.T) *model {
	m := &model{mode: "answer", arrived: make(chan struct{}), release: make(chan struct{})}
	m.anthropic = anthropictest.NewServer(anthropictest.Options{Script: func(*anthropictest.Request) anthropictest.Turn {
		text, status := m.answer()
		if status != 0 {
			return anthropictest.Turn{Status: status}
		}
		return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text(text)}}
	}})
	m.openai = openaitest.New(openaitest.Options{Script: func(*openaitest.Request) openaitest.Turn {
		text, status := m.answer()
		if status != 0 {
			return openaitest.Turn{Status: status}
		}
		return openaitest.Turn{Items: []openaitest.Item{openaitest.Text(text)}}
	}})
	m.openai.Start()
	t.Cleanup(m.anthropic.Close)
	t.Cleanup(m.openai.Close)
	t.Cleanup(m.unblock) // before the servers close: a blocked handler ends
	return m
}

func (m *model) set(mode string) {
	m.mu.Lock()
	m.mode = mode
	m.mu.Unlock()
}

// answer is what the fake says to a call: a text, or an error status.
func (m *model) answer() (string, int) {
	m.mu.Lock()
	mode := m.mode
	m.mu.Unlock()
	switch mode {
	case "fail":
		return "", http.StatusInternalServerError
	case "empty":
		return "", 0
	case "block":
		m.arrive.Do(func() { close(m.arrived) })
		<-m.release
	}
	return answer, 0
}

func (m *model) unblock() { m.unblockOnce.Do(func() { close(m.release) }) }

// calls returns the summary calls the fake received, of both APIs.
func (m *model) calls() []call {
	var out []call
	for _, r := range m.anthropic.MessagesRequests() {
		out = append(out, call{r.Path, r.Header, r.Decoded})
	}
	for _, r := range m.openai.Requests() {
		out = append(out, call{r.Path, r.Header, r.Body})
	}
	return out
}

type call struct {
	path   string
	header http.Header
	body   []byte
}

// summarizer is ctxguard's own model client in session mode, calling the
// fake as the session's upstream.
func (m *model) summarizer(t *testing.T) pass.Summarizer {
	cfg := compact.DefaultSummarizer()
	cfg.Retries = 0
	c, err := summarize.New(cfg, []protocol.Protocol{anthropic.Protocol, responses.Protocol, chat.Protocol},
		map[string]string{"anthropic": m.anthropic.URL, "openai": m.openai.URL}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// enabled is the shipped configuration, switched on.
func enabled() digest.Config {
	cfg := digest.Defaults()
	cfg.Enabled = true
	return cfg
}

// guard is one process's digest pass with its session memory.
type guard struct {
	pass  *digest.Pass
	proto protocol.Protocol
	memo  map[string]any
	prev  *conversation.Conversation
}

func newGuard(t *testing.T, cfg digest.Config, st store.Store, sum pass.Summarizer, proto protocol.Protocol) *guard {
	t.Helper()
	p, err := digest.New(cfg, &store.Blobs{Store: st, BaseURL: "http://127.0.0.1:8787"}, sum, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &guard{pass: p, proto: proto, memo: map[string]any{}}
}

// header is the session's request header: the credentials the summary
// call is made with.
var header = http.Header{"X-Api-Key": {"sk-ant-session-key"}, "Authorization": {"Bearer sk-session-key"}}

// run sends body through the pass as the session's next request.
func (g *guard) run(t *testing.T, ctx context.Context, body []byte) pipeline.Result {
	t.Helper()
	c, err := g.proto.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	stable := 0
	if g.prev != nil {
		stable = g.proto.Stable(g.prev, body)
	}
	res := pipeline.New(nil, g.pass).Run(&pipeline.Request{Ctx: ctx, Conv: c, Memo: g.memo, Stable: stable,
		Env: &pipeline.Env{Protocol: g.proto.Name(), Header: header.Clone()}})
	g.prev = c
	return res
}

var noteRE = regexp.MustCompile(`^\[ctxguard had a small model read this (\S+) result \(([^)]+) chars\) and answer the call's request; the full result is in blob ([a-z]{13}): [^\]]+\]\n\n`)

// TestDigest: the request that brings a large result of a listed tool
// waits for the small model's answer over HTTP and carries it in the
// result's place, with a note naming the blob that holds the result; the
// rest of the body is the client's, byte for byte, and valid. Later
// requests, and another process on the same store, send the same bytes
// without calling the model again.
func TestDigest(t *testing.T) {
	for _, w := range wires {
		t.Run(w.proto.Name(), func(t *testing.T) {
			m := newModel(t)
			st := storetest.TempDir(t, 0, nil)
			g := newGuard(t, enabled(), st, m.summarizer(t), w.proto)
			bodies := fetchSession(w, 4)
			var sent [][]byte
			for i, b := range bodies {
				orig := bytes.Clone(b)
				res := g.run(t, context.Background(), b)
				if res.Err != nil {
					t.Fatalf("request %d: %v", i, res.Err)
				}
				if !bytes.Equal(b, orig) {
					t.Fatalf("request %d: the pass changed the client's body", i)
				}
				if err := w.valid(orig, res.Body); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				text, blob := checkDigested(t, w, orig, res.Body)
				if d := cmp.Diff([]string{blob}, res.Blobs); d != "" {
					t.Errorf("request %d: Result.Blobs (-want +got):\n%s", i, d)
				}
				rc, err := st.OpenBlob(context.Background(), blob)
				if err != nil {
					t.Fatal(err)
				}
				kept, _ := io.ReadAll(rc)
				rc.Close()
				if string(kept) != page {
					t.Errorf("blob %s holds %d bytes, not the page's %d", blob, len(kept), len(page))
				}
				if i > 0 && !strings.Contains(string(sent[0]), q(text)) {
					t.Errorf("request %d carries another digest than request 0", i)
				}
				sent = append(sent, res.Body)
			}
			calls := m.calls()
			if len(calls) != 1 {
				t.Fatalf("%d model calls for one result", len(calls))
			}
			c := calls[0]
			for _, want := range []string{question, "https://example.com", `\"quick\" brown fox`, "café"} {
				if !strings.Contains(string(c.body), want) {
					t.Errorf("the model was not shown %q", want)
				}
			}
			if w.proto == anthropic.Protocol && c.header.Get("X-Api-Key") != header.Get("X-Api-Key") ||
				w.proto != anthropic.Protocol && c.header.Get("Authorization") != header.Get("Authorization") {
				t.Errorf("the model was called without the session's credentials: %v", c.header)
			}
			// Another process on the store: the same bytes, no call (its
			// model would fail).
			m.set("fail")
			g2 := newGuard(t, enabled(), st, m.summarizer(t), w.proto)
			for i, b := range bodies {
				if res := g2.run(t, context.Background(), b); !bytes.Equal(res.Body, sent[i]) || res.Err != nil {
					t.Fatalf("request %d: another process sent other bytes (%v)", i, res.Err)
				}
			}
			if n := len(m.calls()); n != 1 {
				t.Errorf("%d model calls after another process's requests, want 1", n)
			}
			// A process on a store without the record: the result is no
			// longer new, so it is left alone, unasked.
			m.set("answer")
			g3 := newGuard(t, enabled(), store.NewMemory(), m.summarizer(t), w.proto)
			for i, b := range bodies[1:] {
				if res := g3.run(t, context.Background(), b); !bytes.Equal(res.Body, b) || res.Err != nil {
					t.Fatalf("request %d: a result whose record is gone was changed (%v)", i+1, res.Err)
				}
			}
			if n := len(m.calls()); n != 1 {
				t.Errorf("%d model calls for results that are not new, want 1", n)
			}
		})
	}
}

// checkDigested checks that sent is orig with the fetch result's content
// replaced by a digest, and nothing else changed, and returns the digest
// and the blob it names.
func checkDigested(t *testing.T, w wire, orig, sent []byte) (text, blob string) {
	t.Helper()
	oc, err := w.proto.Parse(orig)
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Release()
	sc, err := w.proto.Parse(sent)
	if err != nil {
		t.Fatalf("the rewrite does not parse: %v", err)
	}
	defer sc.Release()
	o, s := resultBlock(t, oc), resultBlock(t, sc)
	text = sc.String(s.Content)
	m := noteRE.FindStringSubmatch(text)
	if m == nil || m[1] != w.tool || m[2] != "60K" || !strings.HasSuffix(text, "\n\n"+answer) {
		t.Fatalf("the result reads %.300q; want a note on the %s result and the model's answer", text, w.tool)
	}
	// Byte fidelity: the body is the client's with that one value
	// replaced.
	want := bytes.Join([][]byte{orig[:o.Content.Start], []byte(q(text)), orig[o.Content.End:]}, nil)
	if !bytes.Equal(sent, want) {
		t.Fatalf("the body changed beyond the result's content")
	}
	return text, m[3]
}

// resultBlock returns the conversation's only tool result.
func resultBlock(t *testing.T, c *conversation.Conversation) *conversation.Block {
	t.Helper()
	var out *conversation.Block
	for mi := range c.Messages {
		for bi := range c.Messages[mi].Blocks {
			if b := &c.Messages[mi].Blocks[bi]; b.Kind == conversation.ToolResult {
				if out != nil {
					t.Fatal("more than one tool result")
				}
				out = b
			}
		}
	}
	if out == nil {
		t.Fatal("no tool result")
	}
	return out
}

// TestDigestWaits: the request that brings the result waits while the
// model writes (here until the test lets the answer go, once the call
// arrived) and carries the answer.
func TestDigestWaits(t *testing.T) {
	w := wires[0]
	m := newModel(t)
	m.set("block")
	go func() {
		<-m.arrived
		m.unblock()
	}()
	g := newGuard(t, enabled(), store.NewMemory(), m.summarizer(t), w.proto)
	b := fetchSession(w, 1)[0]
	res := g.run(t, context.Background(), b)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	checkDigested(t, w, b, res.Body)
}

// TestDigestFallback: when the model fails, answers nothing, or is still
// writing when Wait ends, the result goes whole, for good: the later
// requests and another process send it whole too and never ask again,
// even once the model works (the decision is stored).
func TestDigestFallback(t *testing.T) {
	for _, mode := range []string{"fail", "empty", "block"} {
		for _, w := range wires {
			t.Run(mode+"/"+w.proto.Name(), func(t *testing.T) {
				m := newModel(t)
				m.set(mode)
				cfg := enabled()
				if mode == "block" {
					cfg.Wait = 20 * time.Millisecond // the model answers only when released
				}
				st := store.NewMemory()
				g := newGuard(t, cfg, st, m.summarizer(t), w.proto)
				bodies := fetchSession(w, 3)
				for i, b := range bodies {
					if i == 1 {
						m.unblock()
						m.set("answer")
					}
					res := g.run(t, context.Background(), b)
					if res.Err != nil || !bytes.Equal(res.Body, b) {
						t.Fatalf("request %d: the result did not go whole (%v)", i, res.Err)
					}
				}
				g2 := newGuard(t, cfg, st, m.summarizer(t), w.proto)
				for i, b := range bodies {
					if res := g2.run(t, context.Background(), b); res.Err != nil || !bytes.Equal(res.Body, b) {
						t.Fatalf("another process, request %d: the result did not go whole (%v)", i, res.Err)
					}
				}
				// A call cut short by Wait may not have reached the model.
				if n := len(m.calls()); n > 1 || n == 0 && mode != "block" {
					t.Errorf("%d model calls, want 1", n)
				}
			})
		}
	}
}

// TestDigestClientGone: a request whose client went away while the model
// wrote decides nothing: the client's retry of it is digested.
func TestDigestClientGone(t *testing.T) {
	w := wires[0]
	m := newModel(t)
	g := newGuard(t, enabled(), store.NewMemory(), m.summarizer(t), w.proto)
	b := fetchSession(w, 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res := g.run(t, ctx, b); res.Err != nil || !bytes.Equal(res.Body, b) {
		t.Fatalf("a request whose client is gone was changed (%v)", res.Err)
	}
	res := g.run(t, context.Background(), b)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	checkDigested(t, w, b, res.Body)
}

// TestDigestLeavesAlone: what the pass must not summarize goes as the
// client sent it, and the model is not asked.
func TestDigestLeavesAlone(t *testing.T) {
	w := wires[0]
	msgs := w.messages(q(page))
	small := w.messages(q(page[:30_000])) // about 7,500 tokens
	isError := slicesClone(msgs)
	isError[2] = strings.Replace(isError[2], `"tool_use_id":"toolu_1",`, `"tool_use_id":"toolu_1","is_error":true,`, 1)
	otherTool := slicesClone(msgs)
	otherTool[1] = strings.Replace(otherTool[1], `"name":"WebFetch"`, `"name":"Bash"`, 1)
	noCall := slicesClone(msgs)
	noCall[2] = strings.Replace(noCall[2], `"tool_use_id":"toolu_1"`, `"tool_use_id":"toolu_9"`, 1)
	off := enabled()
	off.Enabled = false
	for _, tc := range []struct {
		name  string
		cfg   digest.Config
		noSum bool
		msgs  []string
	}{
		{"disabled", off, false, msgs},
		{"no summarizer", enabled(), true, msgs},
		{"under min_tokens", enabled(), false, small},
		{"an error result", enabled(), false, isError},
		{"a tool not listed", enabled(), false, otherTool},
		{"a result without its call", enabled(), false, noCall},
		{"min_tokens raised", digest.Config{Enabled: true, Tools: []string{"Web*"}, MinTokens: 20_000, MaxTokens: 100, Wait: time.Minute}, false, msgs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newModel(t)
			var sum pass.Summarizer
			if !tc.noSum {
				sum = m.summarizer(t)
			}
			g := newGuard(t, tc.cfg, store.NewMemory(), sum, w.proto)
			b := w.session(1, tc.msgs...)[0]
			if res := g.run(t, context.Background(), b); res.Err != nil || !bytes.Equal(res.Body, b) || res.Changed {
				t.Errorf("the body was changed (%v)", res.Err)
			}
			if n := len(m.calls()); n != 0 {
				t.Errorf("%d model calls", n)
			}
		})
	}
	// A glob of the configuration's own.
	m := newModel(t)
	cfg := enabled()
	cfg.Tools = []string{"mcp__*__fetch"}
	mcp := slicesClone(msgs)
	mcp[1] = strings.Replace(mcp[1], `"name":"WebFetch"`, `"name":"mcp__web__fetch"`, 1)
	b := w.session(1, mcp...)[0]
	if res := newGuard(t, cfg, store.NewMemory(), m.summarizer(t), w.proto).run(t, context.Background(), b); bytes.Equal(res.Body, b) {
		t.Errorf("a result of a tool matching %v was not digested (%v)", cfg.Tools, res.Err)
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// failing is a store whose operations on the digest's records, or its
// blobs, fail as set.
type failing struct {
	store.Store
	get     string // "error" or "garbage" for digest records
	put     bool   // PutIfAbsent fails
	putBlob bool   // PutBlob fails
}

var errDown = errors.New("store down")

func (f *failing) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.HasPrefix(key, "digest/") {
		switch f.get {
		case "error":
			return nil, errDown
		case "garbage":
			return []byte(`{"text":`), nil
		}
	}
	return f.Store.Get(ctx, key)
}

func (f *failing) PutIfAbsent(ctx context.Context, key string, val []byte) ([]byte, bool, error) {
	if f.put {
		return nil, false, errDown
	}
	return f.Store.PutIfAbsent(ctx, key, val)
}

func (f *failing) PutBlob(ctx context.Context, id string, data []byte) error {
	if f.putBlob {
		return errDown
	}
	return f.Store.PutBlob(ctx, id, data)
}

// TestDigestFailOpen: a store that cannot say what was decided makes the
// pass fail, and the pipeline send the client's body untouched; one that
// cannot keep the decision or the original leaves the result whole.
func TestDigestFailOpen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		st     *failing
		failed bool // the pass fails (else it leaves the result whole)
	}{
		{"records unreadable", &failing{get: "error"}, true},
		{"a record that does not decode", &failing{get: "garbage"}, true},
		{"decisions not stored", &failing{put: true}, false},
		{"originals not kept", &failing{putBlob: true}, false},
	} {
		for _, w := range wires {
			t.Run(tc.name+"/"+w.proto.Name(), func(t *testing.T) {
				m := newModel(t)
				st := *tc.st
				st.Store = store.NewMemory()
				g := newGuard(t, enabled(), &st, m.summarizer(t), w.proto)
				for i, b := range fetchSession(w, 2) {
					res := g.run(t, context.Background(), b)
					if !bytes.Equal(res.Body, b) {
						t.Fatalf("request %d: the body was changed", i)
					}
					if failed := res.Err != nil; failed != tc.failed || (failed && res.FailedIn != "digest") {
						t.Fatalf("request %d: error %v in %q, want a failure: %v", i, res.Err, res.FailedIn, tc.failed)
					}
				}
			})
		}
	}
}

func TestConfig(t *testing.T) {
	if err := digest.Defaults().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if digest.Defaults().Enabled {
		t.Error("the pass is on by default; it is opt-in")
	}
	for _, tc := range []struct {
		name string
		mod  func(*digest.Config)
		want string
	}{
		{"bad glob", func(c *digest.Config) { c.Tools = []string{"Web["} }, "bad tool glob"},
		{"negative min_tokens", func(c *digest.Config) { c.MinTokens = -1 }, "min_tokens"},
		{"no max_tokens", func(c *digest.Config) { c.MaxTokens = 0 }, "max_tokens"},
		{"negative wait", func(c *digest.Config) { c.Wait = -time.Second }, "wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := enabled()
			tc.mod(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error about %q", err, tc.want)
			}
			if _, err := digest.New(c, &store.Blobs{Store: store.NewMemory()}, nil, nil); err == nil {
				t.Error("New accepted it")
			}
		})
	}
	if _, err := digest.New(enabled(), nil, nil, nil); err == nil {
		t.Error("New accepted no blob store")
	}
}
