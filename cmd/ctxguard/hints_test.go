package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/config"
)

// TestClientHints: what serve prints at start-up names, for each client,
// the line that points it at the address serve really listens on (or
// public_url), and the dashboard.
func TestClientHints(t *testing.T) {
	cfg := config.Defaults()
	cfg.Listen = "127.0.0.1:40571" // port 0, once bound
	want := `ctxguard serves on http://127.0.0.1:40571. Point a client at it:
  Claude Code      ANTHROPIC_BASE_URL=http://127.0.0.1:40571 claude
  Codex CLI        codex -c 'openai_base_url="http://127.0.0.1:40571/v1"'
  opencode         ANTHROPIC_BASE_URL=http://127.0.0.1:40571/v1 OPENAI_BASE_URL=http://127.0.0.1:40571/v1 opencode
  Gemini CLI       GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:40571 gemini
  the SDKs         export ANTHROPIC_BASE_URL=http://127.0.0.1:40571 OPENAI_BASE_URL=http://127.0.0.1:40571/v1
  or, any of them  ctxguard run --listen 127.0.0.1:40571 claude (or codex, opencode, gemini, -- any command)
Dashboard: http://127.0.0.1:40571/ctxguard/
`
	if d := cmp.Diff(want, clientHints(cfg)); d != "" {
		t.Errorf("hints (-want +got):\n%s", d)
	}

	for _, tc := range []struct {
		name      string
		mutate    func(*config.Config)
		want, not []string
	}{
		{"the default address", func(c *config.Config) { c.Listen = config.Defaults().Listen },
			[]string{"  or, any of them  ctxguard run claude (or codex, opencode, gemini, -- any command)\n"}, []string{"--listen"}},
		{"every interface", func(c *config.Config) { c.Listen = "0.0.0.0:8787"; c.AuthToken = "0123456789abcdef-secret" },
			[]string{"ANTHROPIC_BASE_URL=http://127.0.0.1:8787 claude", "X-Ctxguard-Token: <token>"}, []string{"secret"}},
		{"public URL", func(c *config.Config) { c.PublicURL = "https://ctxguard.team.example" },
			[]string{`codex -c 'openai_base_url="https://ctxguard.team.example/v1"'`, "Dashboard: https://ctxguard.team.example/ctxguard/"}, []string{"127.0.0.1", "ctxguard run"}},
		{"routes", func(c *config.Config) {
			c.Routes = map[string]string{"zeta": "https://z.example/api", "openrouter": "https://u:pw@openrouter.ai/api"}
		}, []string{"  route openrouter  base URL http://127.0.0.1:40571/x/openrouter/v1 (to https://u:xxxxx@openrouter.ai/api)\n  route zeta  "}, []string{":pw@"}},
		{"dashboard off", func(c *config.Config) { c.Dashboard.Enabled = false }, []string{"Dashboard: off (dashboard.enabled: false)"}, []string{"/ctxguard/"}},
		{"local endpoints off", func(c *config.Config) { c.Local.Access = "off" }, []string{"Dashboard: off (local.access: off)"}, nil},
	} {
		c := cfg
		tc.mutate(&c)
		got := clientHints(c)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: hints lack %q:\n%s", tc.name, w, got)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: hints hold %q:\n%s", tc.name, n, got)
			}
		}
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestProbeUpstreams: at start-up each upstream host is resolved and
// connected to; one that cannot be (a closed port, a name that does not
// resolve, a proxy that is down) gets a warning naming it and the
// settings that use it, and one that can gets none.
func TestProbeUpstreams(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	closed, proxyDown := closedPort(t), closedPort(t)
	cfg := config.Defaults()
	cfg.Upstreams = config.Upstreams{Anthropic: "http://" + up.Addr().String(), OpenAI: "http://" + closed + "/api", Gemini: "http://" + closed + "/api"}
	cfg.Routes = map[string]string{
		"nowhere": "https://ctxguard-probe.invalid/api", // .invalid never resolves (RFC 6761)
		"same":    "http://" + up.Addr().String() + "/other",
		"proxied": "https://proxied.example",
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := prober{
		dial: (&net.Dialer{}).DialContext,
		proxy: func(r *http.Request) (*url.URL, error) {
			if r.URL.Host == "proxied.example" {
				return &url.URL{Scheme: "http", Host: proxyDown}, nil
			}
			return nil, nil
		},
		timeout: 10 * time.Second,
	}
	p.probeUpstreams(context.Background(), cfg, log)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	warn := map[string]string{}
	reachable := 0
	for _, l := range lines {
		m := regexp.MustCompile(`level=(\w+) msg="([^"]*)" addr=(\S+) for="?([^"]*?)"?(?: err="([^"]*)")?$`).FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("unexpected log line: %s", l)
		}
		switch m[1] {
		case "WARN":
			warn[m[3]] = m[4] + " / " + m[5]
		case "DEBUG":
			reachable++
			if m[3] != up.Addr().String() || m[4] != "upstreams.anthropic, routes.same" {
				t.Errorf("reachable: %s", l)
			}
		}
	}
	if reachable != 1 || len(warn) != 3 {
		t.Fatalf("%d reachable, %d warnings; log:\n%s", reachable, len(warn), buf.String())
	}
	for addr, want := range map[string]string{
		closed:                       "upstreams.openai, upstreams.gemini / dial tcp " + closed + ": connect: connection refused",
		"ctxguard-probe.invalid:443": "routes.nowhere / dial tcp: lookup ctxguard-probe.invalid",
		proxyDown:                    "routes.proxied (through the proxy http://" + proxyDown + ") / dial tcp " + proxyDown + ": connect: connection refused",
	} {
		if !strings.HasPrefix(warn[addr], want) {
			t.Errorf("warning for %s: %q, want it to start with %q", addr, warn[addr], want)
		}
	}
	if !strings.Contains(buf.String(), "serving anyway (the network may come later)") {
		t.Errorf("the warning does not say serve goes on:\n%s", buf.String())
	}
}

// TestProbeBounded: a connection attempt that never ends is given up
// after the timeout, so the check ends; a stopping serve ends it at once
// without a warning.
func TestProbeBounded(t *testing.T) {
	cfg := config.Defaults()
	var mu sync.Mutex
	var deadlines []bool
	hang := func(ctx context.Context, _, _ string) (net.Conn, error) {
		_, ok := ctx.Deadline()
		mu.Lock()
		deadlines = append(deadlines, ok)
		mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	p := prober{dial: hang, proxy: func(*http.Request) (*url.URL, error) { return nil, nil }, timeout: 50 * time.Millisecond}
	p.probeUpstreams(context.Background(), cfg, log)
	// The defaults' three hosts: Anthropic's, OpenAI's and Google's.
	if len(deadlines) != 3 || !deadlines[0] || !deadlines[1] || !deadlines[2] {
		t.Errorf("dials with a deadline: %v, want three", deadlines)
	}
	if n := strings.Count(buf.String(), "context deadline exceeded"); n != 3 {
		t.Errorf("%d warnings of a timeout, want 3:\n%s", n, buf.String())
	}
	buf.Reset()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.timeout = time.Hour
	p.probeUpstreams(ctx, cfg, log)
	if buf.Len() != 0 {
		t.Errorf("a stopped serve warned: %s", buf.String())
	}
}

// TestServeSaysWhatToDo: serve, started without --config, reads the
// default file, says so in its start line, prints the client lines with
// the address it really listens on, and warns about an upstream it cannot
// reach (a closed port, a name that does not resolve) while it serves.
func TestServeSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	xdg := filepath.Join(dir, "xdg")
	file := filepath.Join(xdg, "ctxguard", "config.yaml")
	closed := closedPort(t)
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("upstreams: {anthropic: http://"+closed+", openai: http://"+closed+", gemini: http://"+closed+"}\nroutes: {nowhere: http://ctxguard-probe.invalid}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--exit-with-parent=false")
	cmd.Env = append(os.Environ(), "CTXGUARD_TEST_MAIN=1", "HOME="+dir, "XDG_CONFIG_HOME="+xdg, "XDG_DATA_HOME=",
		"CTXGUARD_LISTEN=", "CTXGUARD_UPSTREAM=", "CTXGUARD_DATA_DIR=", "CTXGUARD_AUTH_TOKEN=", "HTTP_PROXY=", "http_proxy=")
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	read := func(f *os.File) string {
		b, _ := os.ReadFile(f.Name())
		return string(b)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	var addr string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		log := read(stderr)
		if m := regexp.MustCompile(`listening on http://(\S+?)"`).FindStringSubmatch(log); m != nil && addr == "" {
			addr = m[1]
		}
		if addr != "" && strings.Count(log, "upstream unreachable") == 2 && strings.Contains(read(stdout), "Dashboard:") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for serve's start-up lines\nstdout:\n%s\nstderr:\n%s", read(stdout), log)
		}
	}
	log, out := read(stderr), read(stdout)
	if !strings.Contains(log, `config=`+file) {
		t.Errorf("the start line does not name the file read:\n%s", log)
	}
	for _, want := range []string{"ANTHROPIC_BASE_URL=http://" + addr + " claude", "Dashboard: http://" + addr + "/ctxguard/"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"addr=" + closed + ` for="upstreams.anthropic, upstreams.openai, upstreams.gemini"`, "addr=ctxguard-probe.invalid:80 for=routes.nowhere"} {
		if !strings.Contains(log, want) {
			t.Errorf("no warning with %q:\n%s", want, log)
		}
	}
	// It serves all the same.
	res, err := http.Get("http://" + addr + "/ctxguard/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("dashboard: %d", res.StatusCode)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := cmd.Wait(); err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"-c":                              "-c",
		`openai_base_url="http://h:1/v1"`: `'openai_base_url="http://h:1/v1"'`,
		"http://127.0.0.1:8787/v1":        "http://127.0.0.1:8787/v1",
		"it's":                            `'it'\''s'`,
		"":                                "''",
		"a b":                             "'a b'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
