//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/tokens"
)

// The compaction proof: the real Claude Code CLI works through `ctxguard
// serve` against a fake upstream that enforces a 100K-token window the way
// the API does (400 "prompt is too long"), on a scripted session whose
// history grows past three times that window. Clearing is off, so only
// compaction keeps it inside. The CLI must finish without an error, every
// request the upstream got must fit, a summary must be swapped in, and
// the summarizer's own calls (a small model, not streamed) must be seen
// at the upstream.
const (
	e2eWindow    = 100_000
	e2eMaxOutput = 8_000
	e2eTurns     = 200
	e2eFileChars = 4_000 // about 1.5K tokens; under Claude Code's own 30K persistence threshold
)

// windowGuard answers a request over the window with the API's error and
// passes the rest to next, recording what it saw.
type windowGuard struct {
	next http.Handler

	mu        sync.Mutex
	sizes     []int // estimate of every /v1/messages request from the CLI's session
	refused   int
	summaries []string // bodies of the summarizer's calls
}

func (g *windowGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if r.URL.Path == "/v1/messages" {
		n := tokens.Estimate(body)
		g.mu.Lock()
		summarizer := bytes.Contains(body, []byte(`"model":"claude-haiku-4-5"`)) && bytes.Contains(body, []byte("You summarize the earlier part"))
		if summarizer {
			g.summaries = append(g.summaries, string(body))
		} else {
			g.sizes = append(g.sizes, n)
		}
		over := n > e2eWindow
		if over {
			g.refused++
		}
		g.mu.Unlock()
		if over {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: %d tokens > %d maximum"}}`, n, e2eWindow)
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// growScript reads the data files in turn, then answers. It tells where
// the session is from the newest tool result (which names its file), not
// by counting turns: the history it sees is compacted.
func growScript(dir string) func(r *anthropictest.Request) anthropictest.Turn {
	next := regexp.MustCompile(`file (\d+) record`)
	return func(r *anthropictest.Request) anthropictest.Turn {
		c, err := r.Conversation()
		if err != nil || !bytes.Contains(c.Bytes(c.Tools), []byte(`"name":"Bash"`)) {
			return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("Summary: the agent read data files one by one.")}}
		}
		n := 0
		if last := c.Messages[len(c.Messages)-1]; last.Role == conversation.RoleUser {
			for _, b := range last.Blocks {
				if b.Kind != conversation.ToolResult {
					continue
				}
				text, _ := c.ResultText(&b)
				if m := next.FindSubmatch(text); m != nil {
					k, _ := strconv.Atoi(string(m[1]))
					n = k + 1
				}
			}
		}
		if n < e2eTurns {
			in, _ := json.Marshal(map[string]string{"command": fmt.Sprintf("cat data-%03d.txt", n), "description": "Show a data file"})
			return anthropictest.Turn{Blocks: []anthropictest.Block{
				anthropictest.Text(fmt.Sprintf("Reading file %d.", n)),
				anthropictest.ToolUse("", "Bash", string(in)),
			}}
		}
		return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text(finalText)}}
	}
}

func TestClaudeCodeCompaction(t *testing.T) {
	claude := claudeBinary(t)
	tmp := t.TempDir()
	work, home := filepath.Join(tmp, "work"), filepath.Join(tmp, "home")
	for _, d := range []string{work, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	raw := 0
	for k := range e2eTurns {
		var b strings.Builder
		for i := 0; b.Len() < e2eFileChars; i++ {
			fmt.Fprintf(&b, "file %03d record %05d: value=%d checksum=%08x status=ok\n", k, i, i*k+7, i*2654435761%1<<32)
		}
		raw += tokens.EstimateText(b.String())
		if err := os.WriteFile(filepath.Join(work, fmt.Sprintf("data-%03d.txt", k)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	fake := anthropictest.New(anthropictest.Options{Script: growScript(work)})
	guard := &windowGuard{next: fake}
	up := httptest.NewServer(guard)
	defer up.Close()

	cfgFile := filepath.Join(tmp, "ctxguard.yaml")
	cfg := fmt.Sprintf(`models:
  overrides:
    claude-sonnet-4-5: {window: %d, max_output: %d}
clear: {enabled: false}
compact: {wait: 10s}
`, e2eWindow, e2eMaxOutput)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cg := startCtxguard(t, tmp, up.URL, "--config", cfgFile)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	res := runClaude(t, ctx, claude, work, home, tmp, cg.URL, cg.Log,
		"-p", "Show every data file, one by one, then say you are done.",
		"--output-format", "json", "--allowedTools", "Bash", "--model", "claude-sonnet-4-5")
	if res.IsError || res.NumTurns != e2eTurns+1 || res.Result != finalText {
		t.Errorf("CLI result: is_error %v, num_turns %d (want %d), result %q", res.IsError, res.NumTurns, e2eTurns+1, res.Result)
	}

	guard.mu.Lock()
	sizes, refused, sums := guard.sizes, guard.refused, guard.summaries
	guard.mu.Unlock()
	largest, compacted := 0, 0
	for _, n := range sizes {
		largest = max(largest, n)
	}
	for _, r := range fake.MessagesRequests() {
		if bytes.Contains(r.Decoded, []byte(conversation.CompactionNote)) {
			compacted++
		}
	}
	t.Logf("%d requests from the session, largest %d tokens (window %d, history %d tokens); %d refused; %d carried a summary; %d summarizer calls",
		len(sizes), largest, e2eWindow, raw, refused, compacted, len(sums))
	if refused != 0 || largest > e2eWindow {
		t.Errorf("%d requests refused, the largest was %d tokens: over the window", refused, largest)
	}
	if compacted == 0 {
		t.Error("no request carried a compaction summary")
	}
	if len(sums) == 0 {
		t.Error("the summarizer's calls never reached the upstream")
	}
	// Clearing is off and every turn adds 1.5% of the window: still, a
	// compaction (and its summary) is needed only every few turns.
	if len(sums)*5 > len(sizes) {
		t.Errorf("%d summarizer calls for %d requests: compactions follow each other too closely", len(sums), len(sizes))
	}
	// The raw history grew past three windows: the files alone do.
	if raw < 3*e2eWindow {
		t.Fatalf("the script grows the history by %d tokens only", raw)
	}
}
