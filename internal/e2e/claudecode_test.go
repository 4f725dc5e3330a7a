//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/internal/module"
	"github.com/ctxguard/ctxguard/internal/procs"
	"github.com/ctxguard/ctxguard/proxy"
	"github.com/ctxguard/ctxguard/tools/validate"
)

// claudeVersion is the Claude Code release the test pins, so the wire
// facts it checks stay those of a known client.
const claudeVersion = "2.1.197"

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// claudeBinary returns a runnable Claude Code CLI (CTXGUARD_CLAUDE_BIN, or
// the pinned version installed with npm into the cache folder).
func claudeBinary(t *testing.T) string {
	if p := os.Getenv("CTXGUARD_CLAUDE_BIN"); p != "" {
		if v, err := claudeVersionOf(p); err != nil {
			t.Fatalf("CTXGUARD_CLAUDE_BIN=%s: %v", p, err)
		} else {
			t.Logf("using %s (%s)", p, v)
		}
		return p
	}
	return npmBinary(t, "@anthropic-ai/claude-code", envOr("CTXGUARD_CLAUDE_VERSION", claudeVersion), findClaude)
}

// npmBinary installs pkg@version with npm into the e2e cache folder
// (CTXGUARD_E2E_CACHE, default $TMPDIR/ctxguard-e2e), unless a runnable
// binary is there already, and returns what find finds under the npm
// prefix. The test fails when npm or the package is not available.
func npmBinary(t *testing.T, pkg, version string, find func(dir string) string) string {
	t.Helper()
	cache := envOr("CTXGUARD_E2E_CACHE", filepath.Join(os.TempDir(), "ctxguard-e2e"))
	dir, err := filepath.Abs(filepath.Join(cache, strings.ReplaceAll(strings.TrimPrefix(pkg, "@"), "/", "-")+"-"+version))
	if err != nil {
		t.Fatal(err)
	}
	if bin := find(dir); bin != "" {
		return bin
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("npm is not installed, so %s cannot be installed (%v)", pkg, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--loglevel=error", "--prefix", dir, pkg+"@"+version)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cannot install %s@%s with npm: %v\n%s", pkg, version, err, out)
	}
	t.Logf("installed %s %s into %s in %v", pkg, version, dir, time.Since(start).Round(time.Second))
	bin := find(dir)
	if bin == "" {
		t.Fatalf("%s@%s installed into %s, but no runnable binary was found", pkg, version, dir)
	}
	return bin
}

// findClaude returns the runnable CLI under an npm prefix, or "". The
// package ships a native binary per platform as an optional dependency.
func findClaude(dir string) string {
	cands, _ := filepath.Glob(filepath.Join(dir, "node_modules", "@anthropic-ai", "claude-code-"+runtime.GOOS+"-*", "claude"))
	cands = append(cands, filepath.Join(dir, "node_modules", ".bin", "claude"))
	for _, c := range cands {
		if _, err := claudeVersionOf(c); err == nil {
			return c
		}
	}
	return ""
}

func claudeVersionOf(bin string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return "", err
	}
	if !strings.Contains(string(out), "Claude Code") {
		return "", fmt.Errorf("unexpected --version output %q", out)
	}
	return strings.TrimSpace(string(out)), nil
}

// startCtxguard builds cmd/ctxguard and runs "ctxguard serve" in front of
// upstream, with more flags if given; it returns the running process.
func startCtxguard(t *testing.T, tmp, upstream string, flags ...string) *procs.Proc {
	root, err := module.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	bins, err := procs.Build(context.Background(), root, tmp, "./cmd/ctxguard")
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(tmp, "ctxguard-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + tmp,
		"XDG_DATA_HOME=" + filepath.Join(home, "data"), "CTXGUARD_DATA_DIR=" + filepath.Join(home, "store")}
	p, err := procs.Start("ctxguard", bins[0], env, append([]string{"serve", "--listen", "127.0.0.1:0", "--upstream", upstream}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop() })
	return p
}

// exchange is one request and its response as a recorder saw them.
type exchange struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
	Status                 int
	RespHeader             http.Header
	RespBody               []byte
}

// recorder records every exchange passing to next, byte for byte.
type recorder struct {
	mu   sync.Mutex
	list []*exchange
	next http.Handler
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	e := &exchange{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	rc.mu.Lock()
	rc.list = append(rc.list, e)
	rc.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	tw := &teeWriter{ResponseWriter: w}
	rc.next.ServeHTTP(tw, r)
	rc.mu.Lock()
	e.Status, e.RespHeader, e.RespBody = tw.status, w.Header().Clone(), tw.buf.Bytes()
	rc.mu.Unlock()
}

func (rc *recorder) exchanges() []*exchange {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.list)
}

// teeWriter copies a response as it is written.
type teeWriter struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (t *teeWriter) WriteHeader(code int) {
	if t.status == 0 {
		t.status = code
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *teeWriter) Write(p []byte) (int, error) {
	if t.status == 0 {
		t.status = http.StatusOK
	}
	t.buf.Write(p)
	return t.ResponseWriter.Write(p)
}

func (t *teeWriter) Flush() { http.NewResponseController(t.ResponseWriter).Flush() }

func (t *teeWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// Markers in the scratch files, to tell the tool results apart.
const (
	buildMarker = "BUILD-LOG-E2E"
	hugeMarker  = "HUGE-LOG-E2E"
	noteSecret  = "the answer is 42"
	missingDir  = "/nonexistent-ctxguard-e2e-dir"
	finalText   = "All checks done."
)

// buildLog is a compressible terminal log under Claude Code's own 30K
// character persistence threshold: colours, progress bars redrawn with
// carriage returns, a very long line and an inline base64 image.
func buildLog() string {
	r := rand.New(rand.NewPCG(7, 7))
	var b strings.Builder
	b.WriteString(buildMarker + " \x1b[1mnpm run build\x1b[0m\n")
	for i := range 60 {
		fmt.Fprintf(&b, "\x1b[1;32m✓\x1b[0m \x1b[2mtest_case_%03d\x1b[0m passed in \x1b[33m%dms\x1b[0m\n", i, i*7)
	}
	for p := 0; p <= 100; p += 2 {
		fmt.Fprintf(&b, "\rDownloading [%-50s] %3d%%", strings.Repeat("#", p/2), p)
	}
	b.WriteString("\n")
	b.WriteString("LONGLINE:")
	for k := range 800 {
		fmt.Fprintf(&b, "item%05d,", k)
	}
	b.WriteString("\n")
	img := make([]byte, 4500)
	copy(img, "\x89PNG\r\n\x1a\n")
	for i := 8; i < len(img); i++ {
		img[i] = byte(r.IntN(256))
	}
	b.WriteString(`<img src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(img) + "\">\n")
	for i := range 60 {
		fmt.Fprintf(&b, "\x1b[31mWARN\x1b[0m deprecated api call at module_%d.js:%d\n", i, i*3)
	}
	b.WriteString("\x1b[1;32mBUILD OK\x1b[0m\n")
	return b.String()
}

// hugeLog is over 200K characters: Claude Code itself replaces it with a
// <persisted-output> preview before it reaches ctxguard.
func hugeLog() string {
	var b strings.Builder
	b.WriteString(hugeMarker + "\n")
	for i := 0; b.Len() < 250_000; i++ {
		fmt.Fprintf(&b, "\x1b[36m[%05d]\x1b[0m fetching https://registry.example/pkg-%05d ... \x1b[32mok\x1b[0m\n", i, i)
	}
	return b.String()
}

// script answers the main agent loop by how many assistant turns the
// request already holds; any other request (none expected with
// nonessential traffic off) gets a short text.
func script(dir string) func(r *anthropictest.Request) anthropictest.Turn {
	return func(r *anthropictest.Request) anthropictest.Turn {
		c, err := r.Conversation()
		if err != nil || !bytes.Contains(c.Bytes(c.Tools), []byte(`"name":"Bash"`)) {
			return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("ok")}}
		}
		n := 0
		for _, m := range c.Messages {
			if m.Role == conversation.RoleAssistant {
				n++
			}
		}
		bash := func(cmd, desc string) anthropictest.Block {
			in, _ := json.Marshal(map[string]string{"command": cmd, "description": desc})
			return anthropictest.ToolUse("", "Bash", string(in))
		}
		switch n {
		case 0:
			return anthropictest.Turn{Blocks: []anthropictest.Block{
				anthropictest.Thinking("The user wants the build checked. I will print the build log first.", "RXJzdGVTaWduYXR1cmU="),
				anthropictest.Text("I'll look at the build log."),
				bash("cat build.log", "Show the build log"),
			}}
		case 1:
			return anthropictest.Turn{Blocks: []anthropictest.Block{bash("cat huge.log", "Show the download log")}}
		case 2:
			in, _ := json.Marshal(map[string]string{"file_path": filepath.Join(dir, "notes.txt")})
			return anthropictest.Turn{Blocks: []anthropictest.Block{
				anthropictest.Thinking("Now the notes.", "WndlaXRlU2lnbmF0dXJl"),
				anthropictest.ToolUse("", "Read", string(in)),
			}}
		case 3:
			return anthropictest.Turn{Blocks: []anthropictest.Block{bash("ls "+missingDir, "List a missing directory")}}
		}
		return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text(finalText)}}
	}
}

type cliResult struct {
	Type     string `json:"type"`
	Subtype  string `json:"subtype"`
	IsError  bool   `json:"is_error"`
	NumTurns int    `json:"num_turns"`
	Result   string `json:"result"`
}

// runClaude runs the Claude Code CLI with args in work, against baseURL
// with a fake key and no other traffic, and returns its JSON result. On
// failure the test's log gets the CLI's output and ctxguard's log.
func runClaude(t *testing.T, ctx context.Context, claude, work, home, tmp, baseURL string, ctxguardLog func() string, args ...string) cliResult {
	t.Helper()
	cmd := exec.CommandContext(ctx, claude, args...)
	cmd.Dir = work
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + tmp, "LANG=C.UTF-8", "TERM=dumb",
		"ANTHROPIC_BASE_URL=" + baseURL, "ANTHROPIC_API_KEY=sk-ant-e2e-fake-key-0000",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	runErr := cmd.Run()
	t.Logf("the CLI ran in %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("CLI stdout:\n%s\nCLI stderr:\n%s\nctxguard log:\n%s", stdout.String(), stderr.String(), ctxguardLog())
		}
	})
	if runErr != nil {
		t.Fatalf("claude: %v\nCLI stderr:\n%s", runErr, stderr.String())
	}
	var res cliResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("CLI output is not JSON: %v", err)
	}
	return res
}

func TestClaudeCode(t *testing.T) {
	claude := claudeBinary(t)
	version, _ := claudeVersionOf(claude)
	tmp := t.TempDir()

	// The scratch project the CLI works in.
	work := filepath.Join(tmp, "work")
	home := filepath.Join(tmp, "home")
	for _, d := range []string{work, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	build, huge := buildLog(), hugeLog()
	files := map[string]string{"build.log": build, "huge.log": huge, "notes.txt": "line one\nline two\n" + noteSecret + "\n"}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// fake upstream <- ctxguard process <- recording hop <- CLI
	fake := anthropictest.New(anthropictest.Options{Script: script(work)})
	upRec := &recorder{next: fake}
	upSrv := httptest.NewServer(upRec)
	defer upSrv.Close()
	cg := startCtxguard(t, tmp, upSrv.URL)
	cgURL := cg.URL
	cgU, _ := url.Parse(cgURL)
	hopProxy, err := proxy.New(proxy.Options{Upstream: cgU, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	hopRec := &recorder{next: hopProxy}
	hop := httptest.NewServer(hopRec)
	defer hop.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res := runClaude(t, ctx, claude, work, home, tmp, hop.URL, cg.Log,
		"-p", "Check the build: show build.log and huge.log, read notes.txt, and list "+missingDir+".",
		"--output-format", "json", "--allowedTools", "Bash,Read")
	if res.IsError || res.NumTurns != 5 || res.Result != finalText {
		t.Errorf("CLI result: is_error %v, num_turns %d (want 5), result %q", res.IsError, res.NumTurns, res.Result)
	}

	sent, got := hopRec.exchanges(), upRec.exchanges()
	if dir := os.Getenv("CTXGUARD_E2E_DUMP"); dir != "" {
		dump(t, dir, sent, got)
	}
	pairs := pairUp(t, sent, got)
	var msgs []pair
	for _, p := range pairs {
		checkHeaders(t, p)
		checkResponse(t, p)
		if p.sent.Method == "POST" && p.sent.Path == "/v1/messages" {
			msgs = append(msgs, p)
			continue
		}
		if !bytes.Equal(p.sent.Body, p.got.Body) {
			t.Errorf("%s %s: body changed on a passthrough path", p.sent.Method, p.sent.Path)
		}
	}
	if len(msgs) != 5 {
		t.Fatalf("%d Messages requests reached the upstream, want 5", len(msgs))
	}
	checkMessages(t, msgs, build)
	logWireFacts(t, version, sent, msgs)
}

// dump writes every exchange as the CLI sent it and as the upstream got
// it (CTXGUARD_E2E_DUMP=dir), for studying the wire format.
func dump(t *testing.T, dir string, sent, got []*exchange) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for side, list := range map[string][]*exchange{"sent": sent, "upstream": got} {
		for i, e := range list {
			base := filepath.Join(dir, fmt.Sprintf("%02d-%s", i, side))
			var h strings.Builder
			fmt.Fprintf(&h, "%s %s?%s\n", e.Method, e.Path, e.RawQuery)
			for _, k := range slices.Sorted(maps.Keys(e.Header)) {
				v := strings.Join(e.Header[k], ", ")
				if k == "X-Api-Key" || k == "Authorization" {
					v = "(redacted)"
				}
				fmt.Fprintf(&h, "%s: %s\n", k, v)
			}
			fmt.Fprintf(&h, "\n%d\n", e.Status)
			for _, k := range slices.Sorted(maps.Keys(e.RespHeader)) {
				fmt.Fprintf(&h, "%s: %s\n", k, strings.Join(e.RespHeader[k], ", "))
			}
			_ = os.WriteFile(base+".head", []byte(h.String()), 0o644)
			_ = os.WriteFile(base+".body", e.Body, 0o644)
			_ = os.WriteFile(base+".resp", e.RespBody, 0o644)
		}
	}
	t.Logf("exchanges written to %s", dir)
}

type pair struct{ sent, got *exchange }

// pairUp matches what the CLI sent with what the upstream received, in
// order within each method and path.
func pairUp(t *testing.T, sent, got []*exchange) []pair {
	t.Helper()
	if len(sent) != len(got) {
		t.Errorf("the CLI sent %d requests, the upstream received %d", len(sent), len(got))
	}
	byKey := map[string][]*exchange{}
	for _, g := range got {
		k := g.Method + " " + g.Path
		byKey[k] = append(byKey[k], g)
	}
	var out []pair
	for _, s := range sent {
		k := s.Method + " " + s.Path
		if len(byKey[k]) == 0 {
			t.Errorf("%s never reached the upstream", k)
			continue
		}
		out = append(out, pair{s, byKey[k][0]})
		byKey[k] = byKey[k][1:]
	}
	return out
}

// hopByHop are headers a proxy must not forward.
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Te", "Trailer", "Upgrade", "Content-Length"}

func checkHeaders(t *testing.T, p pair) {
	t.Helper()
	want, have := p.sent.Header.Clone(), p.got.Header.Clone()
	for _, h := range hopByHop {
		delete(want, h)
		delete(have, h)
	}
	// ctxguard may append betas to anthropic-beta; the client's own values
	// come first, unchanged.
	if wb, hb := want.Get("Anthropic-Beta"), have.Get("Anthropic-Beta"); wb != hb {
		if wb == "" || !strings.HasPrefix(hb, wb+",") {
			t.Errorf("%s %s: anthropic-beta %q became %q", p.sent.Method, p.sent.Path, wb, hb)
		}
		delete(want, "Anthropic-Beta")
		delete(have, "Anthropic-Beta")
	}
	for k, v := range want {
		if !slices.Equal(v, have[k]) {
			t.Errorf("%s %s: header %s %q arrived as %q", p.sent.Method, p.sent.Path, k, v, have[k])
		}
	}
	for k, v := range have {
		if _, ok := want[k]; !ok {
			t.Errorf("%s %s: header %s %q was added", p.sent.Method, p.sent.Path, k, v)
		}
	}
	if p.sent.RawQuery != p.got.RawQuery {
		t.Errorf("%s %s: query %q became %q", p.sent.Method, p.sent.Path, p.sent.RawQuery, p.got.RawQuery)
	}
}

// checkResponse checks that the CLI got exactly what the upstream sent,
// plus ctxguard's own X-Ctxguard-* headers.
func checkResponse(t *testing.T, p pair) {
	t.Helper()
	gotBody := p.got.RespBody
	if p.got.Method == http.MethodHead {
		gotBody = nil // the server drops what a handler writes to a HEAD response
	}
	if p.sent.Status != p.got.Status || !bytes.Equal(p.sent.RespBody, gotBody) {
		t.Errorf("%s %s: the client got %d (%d bytes), the upstream sent %d (%d bytes)",
			p.sent.Method, p.sent.Path, p.sent.Status, len(p.sent.RespBody), p.got.Status, len(gotBody))
	}
	for k, v := range p.got.RespHeader {
		if !slices.Equal(v, p.sent.RespHeader[k]) {
			t.Errorf("%s %s: response header %s %q arrived as %q", p.sent.Method, p.sent.Path, k, v, p.sent.RespHeader[k])
		}
	}
	for k := range p.sent.RespHeader {
		if _, ok := p.got.RespHeader[k]; !ok && !strings.HasPrefix(k, "X-Ctxguard-") && k != "Date" && k != "Content-Length" {
			t.Errorf("%s %s: response header %s was added", p.sent.Method, p.sent.Path, k)
		}
	}
}

// results cuts a Messages body into its tool_result contents (decoded)
// and the bytes between them.
func results(t *testing.T, body []byte) (contents []string, rest [][]byte) {
	t.Helper()
	c, err := anthropic.Parse(body)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	at := 0
	for _, m := range c.Messages {
		for _, b := range m.Blocks {
			if b.Kind != conversation.ToolResult {
				continue
			}
			rest = append(rest, body[at:b.Content.Start])
			at = b.Content.End
			s, err := jsonscan.Unquote(c.Bytes(b.Content))
			if err != nil {
				s = string(c.Bytes(b.Content)) // array content, kept raw
			}
			contents = append(contents, s)
		}
	}
	return contents, append(rest, body[at:])
}

func checkMessages(t *testing.T, msgs []pair, build string) {
	t.Helper()
	var compressed string // the rewritten build log, which must never change
	for i, p := range msgs {
		orig, out := p.sent.Body, p.got.Body
		if err := validate.Rewrite(orig, out, validate.Options{}); err != nil {
			t.Errorf("request %d: validate.Rewrite: %v", i, err)
		}
		oc, orest := results(t, orig)
		gc, grest := results(t, out)
		if len(oc) != i || len(gc) != i {
			t.Fatalf("request %d: %d tool results sent, %d forwarded, want %d", i, len(oc), len(gc), i)
		}
		for k := range orest {
			if !bytes.Equal(orest[k], grest[k]) {
				t.Errorf("request %d: bytes outside the tool results changed (segment %d: %d -> %d bytes)", i, k, len(orest[k]), len(grest[k]))
			}
		}
		if i == 0 && !bytes.Equal(orig, out) {
			t.Errorf("request 0 has no tool results but was changed")
		}
		for k := range oc {
			o, g := oc[k], gc[k]
			switch {
			case strings.HasPrefix(o, buildMarker):
				// Claude Code trims the trailing newline; the rest must be
				// the command's output, as Claude Code saw it.
				if o != strings.TrimRight(build, "\n") {
					t.Errorf("request %d: Claude Code sent a different build log (%d chars, file %d)", i, len(o), len(build))
				}
				if len(g) >= len(o) || strings.Contains(g, "\x1b[") || strings.Contains(g, "\r") ||
					!strings.Contains(g, "ctxguard") || strings.Contains(g, "base64,iVBOR") || !strings.Contains(g, "BUILD OK") {
					t.Errorf("request %d: build log not compressed as expected (%d -> %d chars):\n%.600q", i, len(o), len(g), g)
				}
				if compressed == "" {
					compressed = g
					t.Logf("request %d: build log %d -> %d chars; head of what the upstream got:\n%.400s", i, len(o), len(g), g)
				} else if g != compressed {
					t.Errorf("request %d: the build log was rewritten differently than before (not cache-stable)", i)
				}
			case strings.Contains(o, "<persisted-output>"):
				if g != o || !strings.Contains(o, hugeMarker) {
					t.Errorf("request %d: the persisted-output notice changed or lacks the log (%d -> %d chars)", i, len(o), len(g))
				}
			case strings.Contains(o, noteSecret), strings.Contains(o, missingDir):
				if g != o {
					t.Errorf("request %d: small result changed: %q -> %q", i, o, g)
				}
			default:
				t.Errorf("request %d: unexpected tool result %.200q", i, o)
			}
		}
	}
	if compressed == "" {
		t.Error("the build log never reached the upstream")
	}
}

// logWireFacts logs what this Claude Code version sent, for
// testdata/claude-code-wire.md.
func logWireFacts(t *testing.T, version string, sent []*exchange, msgs []pair) {
	var paths []string
	for _, e := range sent {
		paths = append(paths, e.Method+" "+e.Path+"?"+e.RawQuery)
	}
	first := msgs[0].sent
	var keys []string
	for k := range first.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	c, err := anthropic.Parse(first.Body)
	if err != nil {
		t.Fatal(err)
	}
	var top []string
	root := c.Root
	it := jsonscan.Members(first.Body, root)
	for k, _, ok := it.NextMember(); ok; k, _, ok = it.NextMember() {
		name, _ := jsonscan.Unquote(k.Bytes(first.Body))
		top = append(top, name)
	}
	var roles []string
	for _, m := range c.Messages {
		roles = append(roles, m.Role.String())
	}
	last, _ := anthropic.Parse(msgs[len(msgs)-1].sent.Body)
	var resultShapes []string
	for _, m := range last.Messages {
		for _, b := range m.Blocks {
			if b.Kind == conversation.ToolResult {
				shape := "string"
				if jsonscan.KindOf(last.Body, b.Content) == jsonscan.Array {
					shape = "array"
				}
				resultShapes = append(resultShapes, fmt.Sprintf("%s:%s(err=%v)", last.ToolName(&b), shape, b.IsError))
			}
		}
	}
	t.Logf("wire facts of %s:\n  requests: %s\n  headers: %s\n  anthropic-beta: %s\n  body keys: %s\n  first request: %d bytes, %d messages (%s), %d cache markers, stream=%v, model %s\n  last request: %d bytes, %d cache markers, tool results %s",
		version, strings.Join(paths, ", "), strings.Join(keys, ", "), first.Header.Get("Anthropic-Beta"), strings.Join(top, ", "),
		len(first.Body), len(c.Messages), strings.Join(roles, ","), c.CacheMarkers, c.Stream, c.Model,
		len(last.Body), last.CacheMarkers, strings.Join(resultShapes, " "))
}
