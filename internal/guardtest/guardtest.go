// Package guardtest holds the fixtures the tests of the root package,
// engine and serve share: configurations, request bodies and the corpus
// of real clients' requests. It is for tests only; nothing at run time
// imports it.
package guardtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass"
	_ "github.com/ctxguard/ctxguard/pass/all" // the passes ctxguard ships
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/tools/transcript"
)

// AllOff returns the defaults with every rule switched off.
func AllOff() config.Config {
	c := config.Defaults()
	for _, m := range pass.Modules() {
		c.Passes.Switch(m.Name, false)
	}
	return c
}

// BigResult is a request whose tool result compression shortens.
func BigResult() []byte {
	out := strings.Repeat("\x1b[32mok\x1b[0m line of test output\n", 2000)
	q, _ := json.Marshal(out)
	return []byte(`{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"run it"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"make"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":` + string(q) + `}]}],"stream":true}`)
}

// SessionHeader is the header of Claude Code's session i.
func SessionHeader(i int) http.Header {
	return http.Header{"X-Claude-Code-Session-Id": {fmt.Sprint("session-", i)}}
}

// Stream is a session's requests, oldest first, in one protocol.
type Stream struct {
	Proto  protocol.Protocol
	Bodies [][]byte
}

// Corpus returns, by name, the fidelity bodies, the real clients' captured
// requests of every protocol (Claude Code, Codex CLI, opencode), and the
// request streams rebuilt from the real sessions in
// tools/transcript/testdata. root is the module's root, relative to the
// test's working directory ("." or "..").
func Corpus(t testing.TB, root string) map[string]Stream {
	t.Helper()
	out := map[string]Stream{}
	files, _ := filepath.Glob(filepath.Join(root, "testdata/fidelity/*.json"))
	files = append(files, filepath.Join(root, "anthropic/testdata/claude-code-2.1.197-first.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = Stream{anthropic.Protocol, [][]byte{b}}
	}
	for _, c := range []struct {
		proto protocol.Protocol
		glob  string
	}{
		{responses.Protocol, "openai/responses/testdata/codex/*.body.raw"},
		{chat.Protocol, "openai/chat/testdata/opencode-*.body.json"},
	} {
		files, _ := filepath.Glob(filepath.Join(root, c.glob))
		if len(files) == 0 {
			t.Fatalf("no captures at %s", c.glob)
		}
		// NAME-NNNN.body.*: request NNNN of capture NAME, one stream.
		slices.Sort(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			name, _, _ := strings.Cut(f, ".body.")
			if i := strings.LastIndexByte(name, '-'); i > 0 {
				name = name[:i]
			}
			st := out[name]
			st.Proto, st.Bodies = c.proto, append(st.Bodies, b)
			out[name] = st
		}
	}
	dirs := []string{filepath.Join(root, "tools/transcript/testdata/claude-code"), filepath.Join(root, "tools/transcript/testdata/swe-agent")}
	sessions, err := transcript.Load(dirs, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		b, err := transcript.NewBuilder(s, transcript.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := Stream{Proto: anthropic.Protocol}
		for k := 0; k < b.Len(); k++ {
			r, err := b.Request(k)
			if err != nil {
				t.Fatal(err)
			}
			st.Bodies = append(st.Bodies, r.Body)
		}
		out[s.ID] = st
	}
	if len(out) < 8 {
		t.Fatalf("corpus has only %d entries", len(out))
	}
	return out
}

// Recorder is a record.Observer that keeps every record it sees.
type Recorder struct {
	mu   sync.Mutex
	recs []*record.Exchange
}

// Observe implements record.Observer.
func (r *Recorder) Observe(x *record.Exchange) {
	r.mu.Lock()
	r.recs = append(r.recs, x)
	r.mu.Unlock()
}

// All returns the records seen so far, oldest first.
func (r *Recorder) All() []*record.Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*record.Exchange(nil), r.recs...)
}
