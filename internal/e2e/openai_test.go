//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/openai/openaitest"
	"github.com/ctxguard/ctxguard/proxy"
)

// The client versions the tests pin (the captured requests in
// openai/*/testdata were taken with them).
const (
	codexVersion    = "0.169.0"
	opencodeVersion = "1.18.33"
)

// hopSetup is what the OpenAI- and Gemini-client tests share: the scratch
// project, the fake upstream behind a recorder, ctxguard, and a recording
// hop in front of ctxguard that the client talks to.
type hopSetup struct {
	tmp, work, home string
	build, huge     string
	fake            *openaitest.Server // the OpenAI tests' fake, nil otherwise
	upRec, hopRec   *recorder
	hopURL          string
	ctxguardURL     string
	ctxguardLog     func() string
}

func newOpenAISetup(t *testing.T, script func(r *openaitest.Request) openaitest.Turn) *hopSetup {
	fake := openaitest.New(openaitest.Options{Script: script})
	s := newHopSetup(t, fake)
	s.fake = fake
	return s
}

// newHopSetup starts ctxguard in front of the fake upstream and the hop
// in front of ctxguard, in a scratch project holding build.log and
// huge.log.
func newHopSetup(t *testing.T, fake http.Handler) *hopSetup {
	s := &hopSetup{tmp: t.TempDir()}
	s.work, s.home = filepath.Join(s.tmp, "work"), filepath.Join(s.tmp, "home")
	for _, d := range []string{s.work, s.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.build, s.huge = buildLog(), hugeLog()
	for name, content := range map[string]string{"build.log": s.build, "huge.log": s.huge} {
		if err := os.WriteFile(filepath.Join(s.work, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s.upRec = &recorder{next: fake}
	up := httptest.NewServer(s.upRec)
	t.Cleanup(up.Close)
	cg := startCtxguard(t, s.tmp, up.URL)
	s.ctxguardLog, s.ctxguardURL = cg.Log, cg.URL
	cgU, _ := url.Parse(cg.URL)
	hop, err := proxy.New(proxy.Options{Upstream: cgU, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s.hopRec = &recorder{next: hop}
	hopSrv := httptest.NewServer(s.hopRec)
	t.Cleanup(hopSrv.Close)
	s.hopURL = hopSrv.URL
	return s
}

// run runs a client command in the project with env, failing the test
// (with its output and ctxguard's log) when it does not exit 0.
func (s *hopSetup) run(t *testing.T, env []string, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = s.work
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.home, "TMPDIR=" + s.tmp, "LANG=C.UTF-8", "TERM=dumb"}, env...)
	cmd.Stdin = nil
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s %s: %v in %v", filepath.Base(bin), args[0], err, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s\nctxguard log:\n%s", filepath.Base(bin), err, stdout.String(), stderr.String(), s.ctxguardLog())
	}
	return stdout.String()
}

// check compares what the client sent with what the upstream got: the
// same requests, headers and answers, and bodies equal except where a
// rule rewrote a tool result (or cleared tool arguments), which diff
// decides; at least one request was rewritten, and the build log's ANSI
// colours were compressed away.
func (s *hopSetup) check(t *testing.T, path string, diff func(t *testing.T, sent, got []byte) int) {
	s.checkCalls(t, func(e *exchange) bool { return e.Method == "POST" && e.Path == path }, diff)
}

// checkCalls is check for the requests model says are the model calls
// a rule may rewrite; every other request must pass unchanged.
func (s *hopSetup) checkCalls(t *testing.T, model func(e *exchange) bool, diff func(t *testing.T, sent, got []byte) int) {
	sent, got := s.hopRec.exchanges(), s.upRec.exchanges()
	if dir := os.Getenv("CTXGUARD_E2E_DUMP"); dir != "" {
		dump(t, dir, sent, got)
	}
	rewritten, compressed := 0, false
	for _, p := range pairUp(t, sent, got) {
		checkHeaders(t, p)
		checkResponse(t, p)
		path := p.sent.Path
		if !model(p.sent) {
			if !bytes.Equal(p.sent.Body, p.got.Body) {
				t.Errorf("%s %s: body changed on a passthrough path", p.sent.Method, p.sent.Path)
			}
			continue
		}
		if !bytes.Equal(p.sent.Body, p.got.Body) {
			rewritten++
			rewrites := diff(t, p.sent.Body, p.got.Body)
			if rewrites == 0 {
				t.Errorf("%s: the body changed, but not in a tool result", path)
			}
		}
		if bytes.Contains(p.sent.Body, []byte(buildMarker)) && bytes.Contains(p.sent.Body, []byte(`\u001b[`)) &&
			!bytes.Contains(p.got.Body, []byte(`\u001b[`)) {
			compressed = true
		}
	}
	if rewritten == 0 || !compressed {
		t.Errorf("%d requests rewritten; build log compressed: %v", rewritten, compressed)
	}
}

// decode unmarshals a body for comparison (tests only: ctxguard itself
// never decodes a whole body).
func decode(t *testing.T, b []byte) map[string]any {
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	return v
}

// sameExcept reports the keys of two objects whose values differ.
func sameExcept(a, b map[string]any) []string {
	var diff []string
	for k, v := range a {
		if !reflect.DeepEqual(v, b[k]) {
			diff = append(diff, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			diff = append(diff, k)
		}
	}
	return diff
}

// --- Codex CLI (Responses API) ---

func findCodex(dir string) string {
	arch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	cands, _ := filepath.Glob(filepath.Join(dir, "node_modules", "@openai", "codex-*", "vendor", arch+"-unknown-linux-*", "*", "codex"))
	cands = append(cands, filepath.Join(dir, "node_modules", ".bin", "codex"))
	return firstRunning(cands, "codex")
}

// firstRunning returns the first of cands whose --version output holds
// want, or "".
func firstRunning(cands []string, want string) string {
	for _, c := range cands {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, c, "--version").Output()
		cancel()
		if err == nil && strings.Contains(string(out), want) {
			return c
		}
	}
	return ""
}

// count returns how many of list have member k equal to v.
func count(list []map[string]any, k, v string) int {
	n := 0
	for _, m := range list {
		if m[k] == v {
			n++
		}
	}
	return n
}

// codexScript drives Codex's agent loop: by the number of function calls
// the history holds, run three shell commands, then answer.
func codexScript(r *openaitest.Request) openaitest.Turn {
	var body struct {
		Input []map[string]any `json:"input"`
		Tools []map[string]any `json:"tools"`
	}
	if r.JSON(&body) != nil || len(body.Tools) == 0 {
		return openaitest.Turn{Items: []openaitest.Item{openaitest.Text("ok")}}
	}
	calls := count(body.Input, "type", "function_call")
	tool := "shell"
	for _, tl := range body.Tools {
		if tl["name"] == "exec_command" {
			tool = "exec_command"
		}
	}
	run := func(cmd string) openaitest.Item {
		var args []byte
		if tool == "exec_command" {
			args, _ = json.Marshal(map[string]any{"cmd": cmd, "yield_time_ms": 2000})
		} else {
			args, _ = json.Marshal(map[string]any{"command": []string{"bash", "-lc", cmd}})
		}
		return openaitest.Call(tool, string(args))
	}
	switch calls {
	case 0:
		return openaitest.Turn{Items: []openaitest.Item{openaitest.Reasoning("I will read the build log first."), run("cat build.log")}}
	case 1:
		return openaitest.Turn{Items: []openaitest.Item{run("cat huge.log")}}
	case 2:
		return openaitest.Turn{Items: []openaitest.Item{openaitest.Reasoning("Now the missing directory."), run("ls " + missingDir)}}
	}
	return openaitest.Turn{Items: []openaitest.Item{openaitest.Text(finalText)}}
}

// listDiff checks that two bodies differ only inside the top-level array
// key, element by element, in members rewritable says a rule may rewrite,
// and returns how many such members differ.
func listDiff(t *testing.T, sent, got []byte, key string, rewritable func(x, y map[string]any, k string) bool) int {
	a, b := decode(t, sent), decode(t, got)
	if d := sameExcept(a, b); len(d) != 1 || d[0] != key {
		t.Errorf("top-level keys changed: %v", d)
	}
	as, _ := a[key].([]any)
	bs, _ := b[key].([]any)
	if len(as) != len(bs) {
		t.Errorf("%s: %d elements became %d", key, len(as), len(bs))
		return 0
	}
	n := 0
	for i := range as {
		x, _ := as[i].(map[string]any)
		y, _ := bs[i].(map[string]any)
		for _, k := range sameExcept(x, y) {
			if rewritable(x, y, k) {
				n++
			} else {
				t.Errorf("%s[%d] (type %v, role %v): %q changed", key, i, x["type"], x["role"], k)
			}
		}
	}
	return n
}

// responsesDiff checks that two Responses bodies differ only in tool
// outputs and call arguments/inputs, and returns how many of those differ.
func responsesDiff(t *testing.T, sent, got []byte) int {
	return listDiff(t, sent, got, "input", func(x, _ map[string]any, k string) bool {
		typ := fmt.Sprint(x["type"])
		return k == "output" && strings.HasSuffix(typ, "_output") ||
			(k == "arguments" || k == "input") && strings.HasSuffix(typ, "call")
	})
}

func TestCodex(t *testing.T) {
	codex := os.Getenv("CTXGUARD_CODEX_BIN")
	if codex == "" {
		codex = npmBinary(t, "@openai/codex", envOr("CTXGUARD_CODEX_VERSION", codexVersion), findCodex)
	}
	s := newOpenAISetup(t, codexScript)
	codexHome := filepath.Join(s.home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`model = "gpt-5.1-codex"
model_provider = "ctxguard"

[model_providers.ctxguard]
name = "ctxguard"
base_url = "%s/v1"
wire_api = "responses"
env_key = "CTXGUARD_E2E_OPENAI_KEY"
`, s.hopURL)
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"CODEX_HOME=" + codexHome, "CTXGUARD_E2E_OPENAI_KEY=sk-e2e-fake-openai-key-0000"}
	flags := []string{"exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"}
	out := s.run(t, env, codex, append(flags, "Check the build: show build.log and huge.log, then list "+missingDir+".")...)
	if !strings.Contains(out, finalText) {
		t.Errorf("first turn did not end with the final answer:\n%s", out)
	}
	out = s.run(t, env, codex, append(flags, "resume", "--last", "Now say goodbye.")...)
	if !strings.Contains(out, finalText) {
		t.Errorf("second turn did not end with an answer:\n%s", out)
	}
	reqs := s.fake.Requests()
	if len(reqs) < 5 {
		t.Errorf("%d requests reached the upstream, want at least 5 (4 in the first turn, 1 in the second)", len(reqs))
	}
	s.check(t, "/v1/responses", responsesDiff)
}

// TestCodexWebSocket: Codex's built-in openai provider opens a WebSocket
// first (GET /v1/responses with Upgrade); ctxguard refuses it with 426
// and Codex goes on over HTTP at once, every turn rewritten. Codex talks
// to ctxguard directly here: the recording hop would refuse the upgrade
// itself.
func TestCodexWebSocket(t *testing.T) {
	codex := os.Getenv("CTXGUARD_CODEX_BIN")
	if codex == "" {
		codex = npmBinary(t, "@openai/codex", envOr("CTXGUARD_CODEX_VERSION", codexVersion), findCodex)
	}
	s := newOpenAISetup(t, codexScript)
	codexHome := filepath.Join(s.home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf("model = %q\nopenai_base_url = \"%s/v1\"\n", "gpt-5.1-codex", s.ctxguardURL)
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"CODEX_HOME=" + codexHome, "CODEX_API_KEY=sk-e2e-fake-openai-key-0000"}
	start := time.Now()
	out := s.run(t, env, codex, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
		"Check the build: show build.log and huge.log, then list "+missingDir+".")
	if !strings.Contains(out, finalText) {
		t.Errorf("the turn did not end with the final answer:\n%s", out)
	}
	if d := time.Since(start); d > 2*time.Minute {
		t.Errorf("the turn took %v: the fallback to HTTP waited", d)
	}
	posts, compressed := 0, false
	for _, e := range s.upRec.exchanges() {
		if e.Method != "POST" || e.Path != "/v1/responses" {
			t.Errorf("%s %s reached the upstream", e.Method, e.Path)
			continue
		}
		posts++
		if bytes.Contains(e.Body, []byte(buildMarker)) && !bytes.Contains(e.Body, []byte(`\u001b[`)) {
			compressed = true
		}
	}
	if posts < 4 || !compressed {
		t.Errorf("%d POST /v1/responses reached the upstream (want at least 4); build log compressed: %v", posts, compressed)
	}
}

// --- opencode (Chat Completions) ---

func findOpencode(dir string) string {
	cands, _ := filepath.Glob(filepath.Join(dir, "node_modules", "opencode-"+runtime.GOOS+"-*", "bin", "opencode"))
	cands = append(cands, filepath.Join(dir, "node_modules", ".bin", "opencode"))
	return firstRunning(cands, ".") // opencode prints its bare version
}

// opencodeScript drives opencode's loop: a title request (no tools) gets
// a title; the agent runs three bash commands, then answers.
func opencodeScript(r *openaitest.Request) openaitest.Turn {
	var body struct {
		Messages []map[string]any `json:"messages"`
		Tools    []map[string]any `json:"tools"`
	}
	if r.JSON(&body) != nil || len(body.Tools) == 0 {
		return openaitest.Turn{Items: []openaitest.Item{openaitest.Text("Build check")}}
	}
	results := count(body.Messages, "role", "tool")
	bash := func(cmd, desc string) openaitest.Item {
		args, _ := json.Marshal(map[string]string{"command": cmd, "description": desc})
		return openaitest.Call("bash", string(args))
	}
	switch results {
	case 0:
		return openaitest.Turn{Items: []openaitest.Item{openaitest.Text("I'll look at the build log."), bash("cat build.log", "Show the build log")}}
	case 1:
		return openaitest.Turn{Items: []openaitest.Item{bash("cat huge.log", "Show the download log")}}
	case 2:
		return openaitest.Turn{Items: []openaitest.Item{bash("ls "+missingDir, "List a missing directory")}}
	}
	return openaitest.Turn{Items: []openaitest.Item{openaitest.Text(finalText)}}
}

// chatDiff checks that two Chat Completions bodies differ only in tool
// messages' content and tool call arguments, and returns how many differ.
func chatDiff(t *testing.T, sent, got []byte) int {
	return listDiff(t, sent, got, "messages", func(x, y map[string]any, k string) bool {
		switch {
		case k == "content" && x["role"] == "tool":
			return true
		case k == "tool_calls" && x["role"] == "assistant":
			xc, _ := x["tool_calls"].([]any)
			yc, _ := y["tool_calls"].([]any)
			return len(xc) == len(yc)
		}
		return false
	})
}

func TestOpencode(t *testing.T) {
	opencode := os.Getenv("CTXGUARD_OPENCODE_BIN")
	if opencode == "" {
		opencode = npmBinary(t, "opencode-ai", envOr("CTXGUARD_OPENCODE_VERSION", opencodeVersion), findOpencode)
	}
	s := newOpenAISetup(t, opencodeScript)
	config := fmt.Sprintf(`{
  "$schema": "https://opencode.ai/config.json",
  "provider": {
    "ctxguard": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "ctxguard",
      "options": {"baseURL": "%s/v1", "apiKey": "sk-e2e-fake-opencode-key-0000"},
      "models": {"e2e-model": {"name": "E2E model"}}
    }
  },
  "model": "ctxguard/e2e-model"
}`, s.hopURL)
	if err := os.WriteFile(filepath.Join(s.work, "opencode.json"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{
		"XDG_CONFIG_HOME=" + filepath.Join(s.home, ".config"), "XDG_DATA_HOME=" + filepath.Join(s.home, ".local/share"),
		"XDG_CACHE_HOME=" + filepath.Join(s.home, ".cache"), "XDG_STATE_HOME=" + filepath.Join(s.home, ".local/state"),
		"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
	}
	out := s.run(t, env, opencode, "run", "Check the build: show build.log and huge.log, then list "+missingDir+".")
	if !strings.Contains(out, finalText) {
		t.Errorf("first turn did not end with the final answer:\n%s", out)
	}
	out = s.run(t, env, opencode, "run", "--continue", "Now say goodbye.")
	if !strings.Contains(out, finalText) {
		t.Errorf("second turn did not end with an answer:\n%s", out)
	}
	s.check(t, "/v1/chat/completions", chatDiff)
}
