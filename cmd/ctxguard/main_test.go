package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/config"
)

// TestMain lets tests run the test binary as the ctxguard command
// (CTXGUARD_TEST_MAIN=1), so that process-level behaviour is tested on the
// real main without a separate build; under a fake client's name it is
// that client (fakeClient).
func TestMain(m *testing.M) {
	if slices.Contains(fakeClients, filepath.Base(os.Args[0])) {
		os.Exit(fakeClient())
	}
	if os.Getenv("CTXGUARD_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	// The developer's own configuration file must not reach the tests:
	// the default file is looked for in an empty folder.
	dir, err := os.MkdirTemp("", "ctxguard-cmd-test-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func runCmd(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestCommandLine(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_DATA_HOME", "")
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		stdout     string // a part of it
		stderr     string // a part of it ("" means empty)
		stderrOnce string // must appear exactly once
		env        []string
	}{
		{name: "no command", args: nil, code: 2, stderr: "usage: ctxguard"},
		{name: "help", args: []string{"help"}, code: 0, stdout: "commands:"},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2, stderr: `unknown command "frobnicate"`},
		{name: "mistyped command", args: []string{"serv"}, code: 2, stderrOnce: `unknown command "serv" (did you mean "serve"?)`},
		{name: "mistyped serve flag", args: []string{"serve", "--upstreem", "http://x"}, code: 2, stderrOnce: "ctxguard serve: flag provided but not defined: -upstreem (did you mean --upstream?)"},
		{name: "mistyped config flag", args: []string{"config", "--int"}, code: 2, stderrOnce: "flag provided but not defined: -int (did you mean --init?)"},
		{name: "mistyped replay flag", args: []string{"replay", "--jsno"}, code: 2, stderrOnce: "flag provided but not defined: -jsno (did you mean --json?)"},
		{name: "mistyped run flag", args: []string{"run", "--lisen", "127.0.0.1:1", "--", "true"}, code: 2, stderrOnce: "ctxguard run: flag provided but not defined: -lisen (did you mean --listen?)"},
		{name: "mistyped command run", args: []string{"rnu"}, code: 2, stderrOnce: `unknown command "rnu" (did you mean "run"?)`},
		{name: "mistyped bench flag", args: []string{"bench", "--duraton", "1s"}, code: 2, stderrOnce: "flag provided but not defined: -duraton (did you mean --duration?)"},
		{name: "mistyped flag, one dash", args: []string{"serve", "-dryrun"}, code: 2, stderrOnce: "(did you mean --dry-run?)"},
		{name: "upstream ending in /v1", args: []string{"config", "--upstream", "http://gw.example:8080/v1"}, code: 1,
			stderrOnce: `upstreams.anthropic, upstreams.openai and upstreams.gemini: "http://gw.example:8080/v1" ends in /v1, which clients add themselves (a request for /v1/messages would reach http://gw.example:8080/v1/v1/messages); write http://gw.example:8080`},
		{name: "upstream ending in /v1, from the environment", args: []string{"config"}, env: []string{"CTXGUARD_UPSTREAM=https://api.openai.com/v1/"}, code: 1, stderrOnce: "write https://api.openai.com"},
		{name: "serve -h", args: []string{"serve", "-h"}, code: 0, stdout: "-listen string"},
		{name: "serve --help", args: []string{"serve", "--help"}, code: 0, stdout: "-exit-with-parent"},
		{name: "config -h", args: []string{"config", "-h"}, code: 0, stdout: "Prints the effective configuration"},
		{name: "replay -h", args: []string{"replay", "-h"}, code: 0, stdout: "usage: ctxguard replay"},
		{name: "bench -h", args: []string{"bench", "-h"}, code: 0, stdout: "usage: ctxguard bench"},
		{name: "bench -h lists instances", args: []string{"bench", "-h"}, code: 0, stdout: "-ctxguard-instances int"},
		{name: "bench without instances", args: []string{"bench", "--ctxguard-instances", "0"}, code: 2, stderrOnce: "--ctxguard-instances 0: want at least 1"},
		{name: "bad flag", args: []string{"serve", "--bogus"}, code: 2, stderrOnce: "flag provided but not defined: -bogus"},
		{name: "bad replay flag", args: []string{"replay", "--bogus"}, code: 2, stderrOnce: "flag provided but not defined: -bogus"},
		{name: "stray argument", args: []string{"config", "extra"}, code: 2, stderrOnce: `unexpected argument "extra"`},
		{name: "version", args: []string{"version"}, code: 0, stdout: "ctxguard "},
		{name: "--version", args: []string{"--version"}, code: 0, stdout: "ctxguard "},
		{name: "config", args: []string{"config"}, code: 0, stdout: "idle: 5m0s"},
		{name: "open to the network without a token", args: []string{"config", "--listen", "0.0.0.0:8787"}, code: 1, stderrOnce: "set auth_token"},
		{name: "bad exit-with-parent", args: []string{"serve", "--exit-with-parent", "maybe"}, code: 2, stderrOnce: "must be true, false or auto"},
		{name: "run -h", args: []string{"run", "-h"}, code: 0, stdout: "usage: ctxguard run [flags] [--] CLIENT [ARGS...]"},
		{name: "run without a client", args: []string{"run", "--dry-run", "--"}, code: 2, stderrOnce: "name the client to start"},
		{name: "run with a bad flag", args: []string{"run", "--bogus", "claude"}, code: 2, stderrOnce: "flag provided but not defined: -bogus"},
		{name: "run with a bad config", args: []string{"run", "--listen", "0.0.0.0:8787", "claude"}, code: 1, stderrOnce: "set auth_token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, kv := range tc.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			code, stdout, stderr := runCmd(tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout, stderr)
			}
			if !strings.Contains(stdout, tc.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdout, stdout)
			}
			switch {
			case tc.stderrOnce != "":
				if n := strings.Count(stderr, tc.stderrOnce); n != 1 {
					t.Errorf("stderr holds %q %d times, want once:\n%s", tc.stderrOnce, n, stderr)
				}
			case tc.stderr == "":
				if stderr != "" {
					t.Errorf("stderr not empty: %s", stderr)
				}
			case !strings.Contains(stderr, tc.stderr):
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, stderr)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	v := version()
	if !regexp.MustCompile(`^ctxguard \S+( [0-9a-f]{1,12}(\+dirty)?)? go\S+ \w+/\w+$`).MatchString(v) {
		t.Errorf("version() = %q", v)
	}
}

func TestBuiltByGoRun(t *testing.T) {
	for exe, want := range map[string]bool{
		"/tmp/go-build1234567/b001/exe/ctxguard":        true,
		"/var/folders/x/T/go-build99/b001/exe/ctxguard": true,
		"/usr/local/bin/ctxguard":                       false,
		"/home/u/go/bin/ctxguard":                       false,
		"/home/u/exe/ctxguard":                          false,
	} {
		if got := builtByGoRun(exe); got != want {
			t.Errorf("builtByGoRun(%q) = %v, want %v", exe, got, want)
		}
	}
}

// TestServeExitsWithParent: `go run ./cmd/ctxguard serve &` then `kill %1`
// kills only the go command; ctxguard, re-parented, must notice, shut
// down and free its port.
func TestServeExitsWithParent(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "serve.log")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The shell starts serve in the background, prints its pid, and exits
	// when the test closes its stdin: then serve's parent is gone.
	sh := exec.Command("sh", "-c", `"$0" serve --listen 127.0.0.1:0 --data-dir "$1" --exit-with-parent=true >"$2" 2>&1 </dev/null & echo $!; read x || true`,
		self, filepath.Join(dir, "data"), logPath)
	sh.Env = append(os.Environ(), "CTXGUARD_TEST_MAIN=1")
	stdin, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("pid %q: %v", line, err)
	}
	t.Cleanup(func() { _ = killIfAlive(pid) })

	deadline := time.Now().Add(60 * time.Second)
	var addr string
	for addr == "" && time.Now().Before(deadline) && alive(pid) {
		b, _ := os.ReadFile(logPath)
		if m := regexp.MustCompile(`listening on http://(\S+?)"`).FindSubmatch(b); m != nil {
			addr = string(m[1])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if addr == "" {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("serve never listened; log:\n%s", b)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err != nil {
		t.Fatalf("serve does not accept connections: %v", err)
	} else {
		c.Close()
	}
	stdin.Close() // the parent exits
	if err := sh.Wait(); err != nil {
		t.Fatal(err)
	}
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(logPath)
	if alive(pid) {
		t.Fatalf("serve (pid %d) still runs after its parent exited; log:\n%s", pid, b)
	}
	if !strings.Contains(string(b), "parent process exited") {
		t.Errorf("log does not say why it stopped:\n%s", b)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("port %s still accepts connections", addr)
	}
}

// alive reports whether pid runs (a zombie, exited but not reaped, does
// not count).
func alive(pid int) bool {
	f, err := os.Open(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	if i := strings.LastIndexByte(line, ')'); i >= 0 && i+2 < len(line) {
		return line[i+2] != 'Z' && line[i+2] != 'X'
	}
	return true
}

func killIfAlive(pid int) error {
	if !alive(pid) {
		return nil
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// TestDocsConfig: the configuration block in docs/configuration.md shows what
// `ctxguard config` prints: loaded as a config file, it is the effective
// configuration with no file at all.
// TestDocsRestartOnly: docs/operations.md's paragraph on SIGHUP names exactly
// the settings a reload cannot change (config.RestartOnly).
func TestDocsRestartOnly(t *testing.T) {
	readme, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)A few settings need a\\s+restart: (.*?); a file that changes them").FindSubmatch(readme)
	if m == nil {
		t.Fatal("docs/operations.md: no list of the settings that need a restart")
	}
	var got []string
	for _, k := range regexp.MustCompile("`([a-z_.]+)`").FindAllSubmatch(m[1], -1) {
		got = append(got, string(k[1]))
	}
	if d := cmp.Diff(config.RestartOnly(), got); d != "" {
		t.Errorf("the documented restart-only settings differ from config.RestartOnly (-code +docs):\n%s", d)
	}
}

// docsConfigBlock returns the configuration block of docs/configuration.md: the
// defaults, as YAML with a comment on each setting.
func docsConfigBlock(t *testing.T) []byte {
	t.Helper()
	readme, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Configuration.*?```yaml\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("docs/configuration.md: no ```yaml block under ## Configuration")
	}
	return m[1]
}

func TestDocsConfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_DATA_HOME", "")
	for _, k := range []string{"CTXGUARD_LISTEN", "CTXGUARD_UPSTREAM", "CTXGUARD_DATA_DIR", "CTXGUARD_AUTH_TOKEN"} {
		t.Setenv(k, "")
	}
	block := docsConfigBlock(t)
	file := filepath.Join(t.TempDir(), "readme.yaml")
	if err := os.WriteFile(file, block, 0o600); err != nil {
		t.Fatal(err)
	}
	code, fromDocs, stderr := runCmd("config", "--config", file)
	if code != 0 {
		t.Fatalf("ctxguard config --config <docs block>: exit %d: %s", code, stderr)
	}
	code, defaults, stderr := runCmd("config")
	if code != 0 {
		t.Fatalf("ctxguard config: exit %d: %s", code, stderr)
	}
	if d := cmp.Diff(defaults, fromDocs); d != "" {
		t.Errorf("the documented config block differs from the defaults `ctxguard config` prints (-config +docs):\n%s", d)
	}
	// Every top-level section is shown.
	cfg := config.Defaults()
	b, _ := cfg.YAML()
	for _, line := range strings.Split(string(b), "\n") {
		if k, _, ok := strings.Cut(line, ":"); ok && k != "" && !strings.HasPrefix(k, " ") {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(k) + `:`).Match(block) {
				t.Errorf("the documented config block lacks the top-level key %q", k)
			}
		}
	}
}

func TestMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv("GOMEMLIMIT", "")
	l := config.Defaults().Limits
	limit, set := memoryLimit(l)
	if !set || limit != l.MaxBuffered+l.SessionMemory+runtimeOverhead || debug.SetMemoryLimit(-1) != limit {
		t.Errorf("memoryLimit = %d, %v; runtime limit %d", limit, set, debug.SetMemoryLimit(-1))
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	if _, set := memoryLimit(l); set {
		t.Error("GOMEMLIMIT in the environment was overridden")
	}
}

// TestLogFlags: --log-level and --log-format override the configuration,
// and a wrong format is refused.
func TestLogFlags(t *testing.T) {
	code, out, stderr := runCmd("config", "--log-level", "debug", "--log-format", "json")
	if code != 0 || !strings.Contains(out, "level: debug") || !strings.Contains(out, "format: json") {
		t.Errorf("exit %d, config:\n%s\n%s", code, out, stderr)
	}
	if code, _, stderr := runCmd("config", "--log-format", "xml"); code == 0 || !strings.Contains(stderr, "log.format") {
		t.Errorf("--log-format xml: exit %d, %s", code, stderr)
	}
}
