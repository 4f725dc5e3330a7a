package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/internal/procs"
)

// upstream is a fake model API for the process tests: it records the
// bodies it receives and answers every request with an SSE stream whose
// first event goes at once and the rest only when the test releases it
// (or the request is cancelled).
type upstream struct {
	*httptest.Server
	events  []string
	started chan struct{} // a stream's first event was sent
	release chan struct{} // closed: the streams go on
	once    sync.Once

	mu     sync.Mutex
	bodies []string
}

// sseEvents is the answer the fake upstream streams.
var sseEvents = []string{
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n",
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"all of it\"}}\n\n",
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n",
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
}

// startUpstream starts the fake upstream; gated makes its streams wait
// for release after the first event.
func startUpstream(t *testing.T, gated bool) *upstream {
	u := &upstream{events: sseEvents, started: make(chan struct{}), release: make(chan struct{})}
	if !gated {
		close(u.release)
	}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, string(b))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		io.WriteString(w, u.events[0])
		rc.Flush()
		u.once.Do(func() { close(u.started) })
		select {
		case <-u.release:
		case <-r.Context().Done():
			return
		}
		for _, e := range u.events[1:] {
			io.WriteString(w, e)
			rc.Flush()
		}
	}))
	t.Cleanup(func() {
		u.Release()
		u.Close()
	})
	return u
}

// Release lets the streams go on.
func (u *upstream) Release() {
	select {
	case <-u.release:
	default:
		close(u.release)
	}
}

// Bodies returns the request bodies received so far.
func (u *upstream) Bodies() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.bodies...)
}

// startServe runs `ctxguard serve` (this test binary as the command) on
// a free port with the config file cfgFile, every upstream at up (""
// leaves the upstreams to the file).
func startServe(t *testing.T, cfgFile, up string) *procs.Proc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := append(os.Environ(), "CTXGUARD_TEST_MAIN=1", "HOME="+dir, "XDG_DATA_HOME=",
		"CTXGUARD_LISTEN=", "CTXGUARD_UPSTREAM=", "CTXGUARD_DATA_DIR=", "CTXGUARD_AUTH_TOKEN=")
	args := []string{"serve", "--config", cfgFile, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--exit-with-parent=false"}
	if up != "" {
		args = append(args, "--upstream", up)
	}
	p, err := procs.Start("serve", self, env, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	return p
}

// writeFile writes a config file.
func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond every 10 ms until it holds, or fails the test after
// 30 s, naming what it waited for and the process's log.
func waitFor(t *testing.T, p *procs.Proc, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s; log:\n%s", what, p.Log())
		}
	}
}

// messagesBody is a streamed Messages request whose one tool result is
// test output in colour (the compress pass removes the ANSI escapes).
var messagesBody = `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[` +
	`{"role":"user","content":"run the tests"},` +
	`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"make test"}}]},` +
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"` +
	strings.Repeat(`\u001b[32mok\u001b[0m line of test output\n`, 500) + `"}]}]}`

// post sends messagesBody to the proxy at base and returns the response.
func post(base string) (*http.Response, error) {
	req, err := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(messagesBody))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-api-key", "sk-test")
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 60 * time.Second}
	return c.Do(req)
}

// readEvent reads one SSE event (up to its blank line).
func readEvent(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String(), err
		}
		if line == "\n" {
			return b.String(), nil
		}
	}
}

// openStream sends messagesBody to serve and returns the answer's stream
// once its first event has arrived.
func openStream(t *testing.T, p *procs.Proc) *bufio.Reader {
	t.Helper()
	res, err := post(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("status %d: %s", res.StatusCode, b)
	}
	r := bufio.NewReader(res.Body)
	if first, err := readEvent(r); err != nil || first != sseEvents[0] {
		t.Fatalf("first event %q, %v", first, err)
	}
	return r
}

// TestServeDrainsOnSIGTERM: a streamed answer in flight when serve gets
// SIGTERM reaches the client whole; meanwhile serve accepts no new
// connection; it then exits with status 0 and says it drained.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	up := startUpstream(t, true)
	cfgFile := filepath.Join(t.TempDir(), "ctxguard.yaml")
	writeFile(t, cfgFile, "timeouts:\n  drain: 2m\n")
	p := startServe(t, cfgFile, up.URL)

	r := openStream(t, p)
	first := sseEvents[0]
	// The stream is in flight (the upstream holds the rest): stop serve.
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(p.URL, "http://")
	waitFor(t, p, "serve to refuse new connections", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	if _, err := post(p.URL); err == nil {
		t.Error("a new request after SIGTERM was served")
	}
	if exited, _ := p.Exited(); exited {
		t.Fatalf("serve exited with a stream in flight; log:\n%s", p.Log())
	}

	up.Release()
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("reading the rest of the stream: %v", err)
	}
	if got, want := first+string(rest), strings.Join(sseEvents, ""); got != want {
		t.Errorf("the client got\n%s\nwant\n%s", got, want)
	}
	if err := p.Wait(60 * time.Second); err != nil {
		t.Fatalf("serve: %v; log:\n%s", err, p.Log())
	}
	if log := p.Log(); !strings.Contains(log, "draining") || !strings.Contains(log, "drained") {
		t.Errorf("the log does not tell the drain:\n%s", log)
	}
}

// TestServeDrainTimeout: a stream still in flight when drain_timeout is
// up is cut, and serve exits with status 1 and a log line saying so.
func TestServeDrainTimeout(t *testing.T) {
	up := startUpstream(t, true) // never released while serve runs
	cfgFile := filepath.Join(t.TempDir(), "ctxguard.yaml")
	writeFile(t, cfgFile, "timeouts:\n  drain: 500ms\n")
	p := startServe(t, cfgFile, up.URL)

	r := openStream(t, p)
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := p.Wait(60 * time.Second)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("serve ended with %v, want exit status 1; log:\n%s", err, p.Log())
	}
	if log := p.Log(); !strings.Contains(log, "drain timeout") {
		t.Errorf("the log does not say the drain timed out:\n%s", log)
	}
	rest, _ := io.ReadAll(r)
	if strings.Contains(string(rest), "message_stop") {
		t.Error("the stream the drain cut reached its end")
	}
}

// TestServeReloadsOnSIGHUP: serve re-reads its config file on SIGHUP.
// A valid file takes effect for the next request (compress off: the body
// goes upstream as it came); an invalid one is rejected with a log line
// and the running configuration stays; a restart-only setting is
// reported and kept.
func TestServeReloadsOnSIGHUP(t *testing.T) {
	up := startUpstream(t, false)
	cfgFile := filepath.Join(t.TempDir(), "ctxguard.yaml")
	writeFile(t, cfgFile, "compress:\n  enabled: true\n")
	p := startServe(t, cfgFile, up.URL)

	// send makes one request and returns the body the upstream received.
	send := func() string {
		t.Helper()
		n := len(up.Bodies())
		res, err := post(p.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || string(b) != strings.Join(sseEvents, "") {
			t.Fatalf("status %d, answer %q", res.StatusCode, b)
		}
		bodies := up.Bodies()
		if len(bodies) != n+1 {
			t.Fatalf("the upstream received %d requests, want %d", len(bodies), n+1)
		}
		return bodies[n]
	}
	// hup sends SIGHUP and waits for the reload's log line, which it
	// returns.
	hup := func() string {
		t.Helper()
		n := strings.Count(p.Log(), "config reload")
		if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, p, "the reload's log line", func() bool { return strings.Count(p.Log(), "config reload") > n })
		lines := strings.Split(p.Log(), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if strings.Contains(lines[i], "config reload") {
				return lines[i]
			}
		}
		return ""
	}

	if got := send(); got == messagesBody || strings.Contains(got, `\u001b[32m`) {
		t.Fatalf("compress on: the coloured result went upstream as it came:\n%.300s", got)
	}

	writeFile(t, cfgFile, "compress:\n  enabled: false\n")
	if line := hup(); !strings.Contains(line, "config reloaded") || !strings.Contains(line, "compress") || !strings.Contains(line, "config="+cfgFile) {
		t.Errorf("reload line: %s", line)
	}
	if got := send(); got != messagesBody {
		t.Errorf("after the reload turned compress off, the upstream got other bytes:\n%.300s", got)
	}

	// Invalid files, which would turn compress on again: an unknown key
	// (strict decoding), a bad value (Validate).
	for _, bad := range []struct{ file, reason string }{
		{"compress:\n  enabled: true\nbogus_key: 1\n", "bogus_key"},
		{"compress:\n  enabled: true\nmax_body: 0\n", "max_body"},
	} {
		writeFile(t, cfgFile, bad.file)
		if line := hup(); !strings.Contains(line, "config reload rejected") || !strings.Contains(line, bad.reason) {
			t.Errorf("reload line: %s", line)
		}
		if got := send(); got != messagesBody {
			t.Errorf("after a rejected reload (%s), the old configuration (compress off) is not in force:\n%.300s", bad.reason, got)
		}
	}

	// Valid again, with a restart-only setting and a deprecated key.
	writeFile(t, cfgFile, "compress:\n  enabled: true\nlimits:\n  sessions: 5\ntimeouts:\n  shutdown: 10s\n")
	line := hup()
	if !strings.Contains(line, "config reloaded") || !strings.Contains(line, "limits.sessions") || !strings.Contains(line, "timeouts.drain") {
		t.Errorf("reload line: %s", line)
	}
	if got := send(); got == messagesBody {
		t.Error("after the reload turned compress on again, the body went upstream as it came")
	}
	if exited, err := p.Exited(); exited {
		t.Fatalf("serve exited (%v); log:\n%s", err, p.Log())
	}
}

// TestServeReloadSwitchesUpstream: a reload that changes the upstream
// sends the next request to the new one (serve builds a new proxy).
func TestServeReloadSwitchesUpstream(t *testing.T) {
	a, b := startUpstream(t, false), startUpstream(t, false)
	cfgFile := filepath.Join(t.TempDir(), "ctxguard.yaml")
	writeFile(t, cfgFile, "upstreams: {anthropic: "+a.URL+", openai: "+a.URL+"}\n")
	p := startServe(t, cfgFile, "")
	for i, want := range []*upstream{a, b} {
		if i == 1 {
			writeFile(t, cfgFile, "upstreams: {anthropic: "+b.URL+", openai: "+b.URL+"}\n")
			if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			waitFor(t, p, "the reload", func() bool { return strings.Contains(p.Log(), "config reloaded") })
		}
		res, err := post(p.URL)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || len(want.Bodies()) != 1 {
			t.Fatalf("request %d: status %d; upstream a got %d requests, b %d", i, res.StatusCode, len(a.Bodies()), len(b.Bodies()))
		}
	}
}
