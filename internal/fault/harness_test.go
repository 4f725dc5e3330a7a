package fault

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/internal/module"
	"github.com/ctxguard/ctxguard/internal/procs"
)

// bin is the ctxguard binary TestMain builds.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ctxguard-fault-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	root, err := module.Root(".")
	if err == nil {
		var bins []string
		bins, err = procs.Build(context.Background(), root, dir, "./cmd/ctxguard")
		if err == nil {
			bin = bins[0]
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// baseConfig is the YAML every test process starts from: short timeouts
// so misbehaviour shows quickly.
const baseConfig = `
log: {level: debug}
timeouts:
  request_header: 5s
  body_read: 2s
  upstream_write: 2s
  response_header: 20s
  idle: 2s
  client_write: 20s
  drain: 5s
`

// instance is one running ctxguard serve.
type instance struct {
	*procs.Proc
	home    string // its HOME
	dataDir string
}

// waitLog waits (at most 10 s) for the instance's log to contain s; log
// lines travel through a pipe, so they may trail what a client sees.
func (in *instance) waitLog(s string) bool {
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(in.Log(), s) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// serveOpts configure start.
type serveOpts struct {
	config  string // YAML appended to baseConfig
	dataDir string // default: a fresh folder
	// dataDirFromConfig leaves --data-dir out: the config (or default)
	// decides.
	dataDirFromConfig bool
	listen            string   // default 127.0.0.1:0
	upstream          string   // default: none given (the config's)
	env               []string // added to the environment
	wrap              []string // a command (and args) that runs ctxguard: wrap... bin serve ...
}

// start runs ctxguard serve and stops it when the test ends.
func start(t *testing.T, o serveOpts) *instance {
	t.Helper()
	in, err := tryStart(t, o)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func tryStart(t *testing.T, o serveOpts) (*instance, error) {
	t.Helper()
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if o.dataDir == "" {
		o.dataDir = filepath.Join(tmp, "data")
	}
	if o.listen == "" {
		o.listen = "127.0.0.1:0"
	}
	cfg := filepath.Join(tmp, "ctxguard.yaml")
	if err := os.WriteFile(cfg, []byte(baseConfig+o.config), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"serve", "--config", cfg, "--listen", o.listen}
	if !o.dataDirFromConfig {
		args = append(args, "--data-dir", o.dataDir)
	}
	if o.upstream != "" {
		args = append(args, "--upstream", o.upstream)
	}
	env := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + tmp}, o.env...)
	name, argv := bin, args
	if len(o.wrap) > 0 {
		name, argv = o.wrap[0], append(append(o.wrap[1:], bin), args...)
	}
	p, err := procs.Start("ctxguard", name, env, argv...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { p.Stop() })
	return &instance{Proc: p, home: home, dataDir: o.dataDir}, nil
}

// runCtxguard runs ctxguard with args to its end (at most 30 s) and
// returns its exit code and combined output.
func runCtxguard(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := execCommand(ctx, bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if err != nil {
		code = exitCode(err)
	}
	return code, string(out)
}

// upstream is the fake model API: anthropictest's scripted server behind
// a handler that misbehaves when a request carries the X-Fault cue.
type upstream struct {
	*httptest.Server
	api *anthropictest.Server

	mu        sync.Mutex
	cancelled int            // requests whose context ended before the handler did
	bodies    map[int][]byte // by request number, what arrived
	seen      []http.Header  // headers of every request
	cues      map[string]func(w http.ResponseWriter, r *http.Request)
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{api: anthropictest.New(anthropictest.Options{}), cues: map[string]func(http.ResponseWriter, *http.Request){}}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

// on makes requests carrying "X-Fault: cue" answer with h.
func (u *upstream) on(cue string, h func(w http.ResponseWriter, r *http.Request)) {
	u.mu.Lock()
	u.cues[cue] = h
	u.mu.Unlock()
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.seen = append(u.seen, r.Header.Clone())
	h := u.cues[r.Header.Get("X-Fault")]
	u.mu.Unlock()
	if h == nil {
		u.api.ServeHTTP(w, r)
		return
	}
	h(w, r)
}

// headers returns the headers of every request the upstream saw.
func (u *upstream) headers() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.seen...)
}

// messages returns the bodies of the Messages requests that reached the
// scripted API, in order.
func (u *upstream) messages() [][]byte {
	var out [][]byte
	for _, r := range u.api.MessagesRequests() {
		out = append(out, r.Decoded)
	}
	return out
}

// client is an HTTP client that neither decompresses nor retries.
func client() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableCompression: true, DisableKeepAlives: false,
		ResponseHeaderTimeout: 60 * time.Second}, Timeout: 2 * time.Minute}
}

// post sends a Messages request to the instance.
func post(t *testing.T, c *http.Client, url string, h http.Header, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-api-key", "sk-ant-fault-test")
	req.Header.Set("anthropic-version", "2023-06-01")
	for k, vs := range h {
		req.Header[k] = vs
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return res, b
}

// get fetches url with an optional Host header.
func get(t *testing.T, url, host string, h http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	res, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

// smallBody is a valid Messages request.
func smallBody(text string) []byte {
	return fmt.Appendf(nil, `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":%q}]}`, text)
}

// hostPort returns the host:port of a URL like http://127.0.0.1:1234.
func hostPort(u string) string { return strings.TrimPrefix(u, "http://") }

// dial opens a raw TCP connection to an instance.
func dial(t *testing.T, u string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", hostPort(u), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
