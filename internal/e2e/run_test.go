//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/gemini/geminitest"
	"github.com/ctxguard/ctxguard/internal/launch"
	"github.com/ctxguard/ctxguard/internal/module"
	"github.com/ctxguard/ctxguard/internal/procs"
	"github.com/ctxguard/ctxguard/internal/testtool"
	"github.com/ctxguard/ctxguard/openai/openaitest"
)

// The TestRun* tests start each real CLI the way a user does, with
// `ctxguard run [flags] -- CLIENT ARGS...`: no base URL set by the test,
// no config file of the client's. ctxguard run starts ctxguard on a free
// address in front of the fake upstream, the CLI's requests reach the
// upstream through it (the build log arrives with its colours removed),
// and ctxguard is stopped when the CLI exits.

// runSetup is one TestRun* test's world: a project with a build log, a
// home, ctxguard's binary, and the fake upstream (every API) behind a
// recorder.
type runSetup struct {
	bin, tmp, work, home string
	listen               string
	upURL                string
	upRec                *recorder
}

func newRunSetup(t *testing.T) *runSetup {
	s := &runSetup{tmp: t.TempDir()}
	s.work, s.home = filepath.Join(s.tmp, "work"), filepath.Join(s.tmp, "home")
	for _, d := range []string{s.work, s.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.work, "build.log"), []byte(buildLog()), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := module.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	bins, err := procs.Build(context.Background(), root, s.tmp, "./cmd/ctxguard")
	if err != nil {
		t.Fatal(err)
	}
	s.bin = bins[0]
	anth := anthropictest.New(anthropictest.Options{Script: runAnthropicScript})
	oai := openaitest.New(openaitest.Options{Script: runResponsesScript})
	gem := geminitest.New(geminitest.Options{Script: runGeminiScript})
	s.upRec = &recorder{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/v1/messages"):
			anth.ServeHTTP(w, r)
		case strings.HasPrefix(r.URL.Path, "/v1beta/"):
			gem.ServeHTTP(w, r)
		default:
			oai.ServeHTTP(w, r)
		}
	})}
	up := httptest.NewServer(s.upRec)
	t.Cleanup(up.Close)
	s.upURL = up.URL
	s.listen = testtool.FreeAddr(t)
	return s
}

// run runs `ctxguard run --listen ADDR --upstream FAKE -- client args...`
// in the project with env, and returns the client's standard output. It
// fails the test unless the client exits 0, ctxguard run said it started
// ctxguard on ADDR, and that ctxguard is gone when run has exited.
func (s *runSetup) run(t *testing.T, env []string, client string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, append([]string{"run", "--listen", s.listen, "--upstream", s.upURL, "--", client}, args...)...)
	cmd.Dir = s.work
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.home, "TMPDIR=" + s.tmp, "LANG=C.UTF-8", "TERM=dumb",
		"XDG_STATE_HOME=" + filepath.Join(s.home, ".local/state"), "XDG_DATA_HOME=" + filepath.Join(s.home, ".local/share"),
		"XDG_CONFIG_HOME=" + filepath.Join(s.home, ".config"), "XDG_CACHE_HOME=" + filepath.Join(s.home, ".cache")}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err := cmd.Run()
	t.Logf("ctxguard run -- %s %s: %v in %v", filepath.Base(client), args[0], err, time.Since(start).Round(time.Millisecond))
	logPath := filepath.Join(s.home, ".local/state/ctxguard/run", strings.ReplaceAll(s.listen, ":", "-"), "serve.log")
	serveLog, _ := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("ctxguard run -- %s: %v\nstdout:\n%s\nstderr:\n%s\nctxguard's log:\n%s", filepath.Base(client), err, stdout.String(), stderr.String(), serveLog)
	}
	if want := "ctxguard run: started ctxguard on http://" + s.listen + " (log: " + logPath + ")"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
	}
	if !bytes.Contains(serveLog, []byte("drained: every request in flight ended")) {
		t.Errorf("ctxguard's log does not say it drained and stopped:\n%s", serveLog)
	}
	if found, pid := launch.Probe(context.Background(), s.listen); found != launch.Nothing {
		t.Errorf("after ctxguard run exited, %v (pid %d) answers on %s", found, pid, s.listen)
	}
	return stdout.String()
}

// check fails the test unless at least two requests to path reached the
// upstream, one of them with the build log, its colours removed by
// ctxguard.
func (s *runSetup) check(t *testing.T, path string) {
	t.Helper()
	posts, compressed := 0, false
	for _, e := range s.upRec.exchanges() {
		if e.Method != "POST" || e.Path != path {
			continue
		}
		posts++
		if bytes.Contains(e.Body, []byte(buildMarker)) && !bytes.Contains(e.Body, []byte(`\u001b[`)) {
			compressed = true
		}
	}
	if posts < 2 || !compressed {
		t.Errorf("%d POST %s reached the upstream (want at least 2); build log compressed: %v", posts, path, compressed)
	}
}

// runAnthropicScript answers Claude Code and opencode's anthropic
// provider: the agent runs `cat build.log` with its Bash (bash) tool,
// then answers. A request without that tool (a title) gets a title.
func runAnthropicScript(r *anthropictest.Request) anthropictest.Turn {
	var body struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	tool := ""
	if json.Unmarshal(r.Decoded, &body) == nil {
		for _, tl := range body.Tools {
			if tl.Name == "Bash" || tl.Name == "bash" {
				tool = tl.Name
			}
		}
	}
	if tool == "" {
		return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("Build check")}}
	}
	for _, m := range body.Messages {
		if m.Role == "assistant" {
			return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text(finalText)}}
		}
	}
	in, _ := json.Marshal(map[string]string{"command": "cat build.log", "description": "Show the build log"})
	return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("I'll look at the build log."), anthropictest.ToolUse("", tool, string(in))}}
}

// runResponsesScript answers Codex and opencode's openai provider over
// the Responses API the same way: the shell tool is opencode's bash,
// Codex's exec_command, else Codex's shell (as in codexScript).
func runResponsesScript(r *openaitest.Request) openaitest.Turn {
	var body struct {
		Input []map[string]any `json:"input"`
		Tools []map[string]any `json:"tools"`
	}
	if r.JSON(&body) != nil || len(body.Tools) == 0 {
		return openaitest.Turn{Items: []openaitest.Item{openaitest.Text("Build check")}}
	}
	if count(body.Input, "type", "function_call") > 0 {
		return openaitest.Turn{Items: []openaitest.Item{openaitest.Text(finalText)}}
	}
	tool, args := "shell", map[string]any{"command": []string{"bash", "-lc", "cat build.log"}}
	for _, tl := range body.Tools {
		switch tl["name"] {
		case "exec_command":
			tool, args = "exec_command", map[string]any{"cmd": "cat build.log", "yield_time_ms": 2000}
		case "bash":
			tool, args = "bash", map[string]any{"command": "cat build.log", "description": "Show the build log"}
		}
	}
	b, _ := json.Marshal(args)
	return openaitest.Turn{Items: []openaitest.Item{openaitest.Call(tool, string(b))}}
}

func TestRunClaudeCode(t *testing.T) {
	claude := claudeBinary(t)
	s := newRunSetup(t)
	out := s.run(t, []string{"ANTHROPIC_API_KEY=sk-ant-e2e-fake-key-0000",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1"},
		claude, "-p", "Check the build: show build.log.", "--output-format", "json", "--allowedTools", "Bash")
	// Standard output is the CLI's alone: its JSON result.
	var res cliResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("standard output is not the CLI's JSON result: %v\n%s", err, out)
	}
	if res.IsError || res.NumTurns != 2 || res.Result != finalText {
		t.Errorf("CLI result: is_error %v, num_turns %d (want 2), result %q", res.IsError, res.NumTurns, res.Result)
	}
	s.check(t, "/v1/messages")
}

func TestRunCodex(t *testing.T) {
	codex := os.Getenv("CTXGUARD_CODEX_BIN")
	if codex == "" {
		codex = npmBinary(t, "@openai/codex", envOr("CTXGUARD_CODEX_VERSION", codexVersion), findCodex)
	}
	s := newRunSetup(t)
	codexHome := filepath.Join(s.home, ".codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{"CODEX_HOME=" + codexHome, "CODEX_API_KEY=sk-e2e-fake-openai-key-0000"}
	// The model the other Codex tests pin: Codex's default (gpt-6.1-sol)
	// sends its tools in another shape, which codexScript does not read.
	flags := []string{"exec", "-m", "gpt-5.1-codex", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"}
	if out := s.run(t, env, codex, append(flags, "Check the build: show build.log.")...); !strings.Contains(out, finalText) {
		t.Errorf("the turn did not end with the final answer:\n%s", out)
	}
	// The session is the built-in provider's: a later run resumes it.
	if out := s.run(t, env, codex, append(flags, "resume", "--last", "Now say goodbye.")...); !strings.Contains(out, finalText) {
		t.Errorf("the resumed turn did not end with an answer:\n%s", out)
	}
	s.check(t, "/v1/responses")
	last := s.upRec.exchanges()
	for i := len(last) - 1; i >= 0; i-- {
		if e := last[i]; e.Method == "POST" && e.Path == "/v1/responses" {
			if !bytes.Contains(e.Body, []byte("Check the build")) {
				t.Error("the resumed session's request does not hold the first turn: codex resume --last did not find it")
			}
			break
		}
	}
}

func TestRunOpencode(t *testing.T) {
	opencode := os.Getenv("CTXGUARD_OPENCODE_BIN")
	if opencode == "" {
		opencode = npmBinary(t, "opencode-ai", envOr("CTXGUARD_OPENCODE_VERSION", opencodeVersion), findOpencode)
	}
	s := newRunSetup(t)
	env := []string{"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"ANTHROPIC_API_KEY=sk-ant-e2e-fake-key-0000", "OPENAI_API_KEY=sk-e2e-fake-openai-key-0000"}
	// Its built-in providers, both pointed at ctxguard by ctxguard run.
	for _, tc := range []struct{ model, path string }{
		{"anthropic/claude-sonnet-4-5", "/v1/messages"},
		{"openai/gpt-5.1", "/v1/responses"},
	} {
		t.Run(tc.model, func(t *testing.T) {
			if out := s.run(t, env, opencode, "run", "-m", tc.model, "Check the build: show build.log."); !strings.Contains(out, finalText) {
				t.Errorf("the turn did not end with the final answer:\n%s", out)
			}
			s.check(t, tc.path)
		})
	}
}

// runGeminiScript answers Gemini CLI: the agent reads build.log with
// read_file, then answers.
func runGeminiScript(r *geminitest.Request) geminitest.Turn {
	if _, step, ok := geminiStep(r); ok && step == 0 {
		return geminitest.Turn{Parts: []geminitest.Part{geminitest.Call("read_file", `{"file_path":"build.log"}`, geminiSignature(0))}}
	}
	return geminitest.Turn{Parts: []geminitest.Part{geminitest.Text(finalText)}}
}

func TestRunGemini(t *testing.T) {
	bin := geminiBinary(t)
	s := newRunSetup(t)
	env := geminiHome(t, s.home)
	// The model named: the CLI then sends no model-routing call.
	out := s.run(t, env, bin, append([]string{"-m", "gemini-3.1-pro-preview", "-p", "Check the build: show build.log."}, geminiArgs...)...)
	var res struct {
		Response string `json:"response"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Response != finalText {
		t.Errorf("standard output is not the CLI's JSON result with the final answer: %v\n%s", err, out)
	}
	s.check(t, "/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent")
}
