package fault

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/internal/procs"
)

// The cases in this file are the failures of the safety review; each
// failed before its fix.

// TestForeignDataDir: a data dir holding files that are not ctxguard's is
// refused, the error names it, and nothing in it changes: no file
// deleted, no mode changed. (Before: the start-up sweep deleted every
// file older than blob_ttl, recursively, and chmodded the folder.)
func TestForeignDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	sub := filepath.Join(dir, "projects")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-3 * 365 * 24 * time.Hour)
	files := map[string]string{
		filepath.Join(dir, "notes.txt"):       "my notes",
		filepath.Join(sub, "main.go"):         "package main",
		filepath.Join(dir, "blobs", "x.txt"):  "not a blob",
		filepath.Join(dir, "records", "conf"): "not a record",
	}
	for p, c := range files {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p, old, old)
	}
	code, out := runCtxguard(t, []string{"HOME=" + t.TempDir()}, "serve", "--listen", "127.0.0.1:0", "--data-dir", dir)
	if code == 0 || !strings.Contains(out, dir) {
		t.Errorf("serve on a foreign folder: exit %d, output does not name %s:\n%s", code, dir, out)
	}
	for p, c := range files {
		if b, err := os.ReadFile(p); err != nil || string(b) != c {
			t.Errorf("%s changed: %q, %v", p, b, err)
		}
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
		t.Errorf("the folder's mode changed to %v", fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(dir, ".ctxguard-store")); err == nil {
		t.Error("ctxguard marked a foreign folder as its own")
	}
}

// TestTildeDataDir: "~" and $VAR in the config's data_dir expand; no
// literal "~" folder appears in the working directory.
func TestTildeDataDir(t *testing.T) {
	home := t.TempDir()
	wd := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte("data_dir: ~/.local/share/ctxguard-test\n"), 0o600)
	cmd := exec.Command(bin, "config", "--config", cfg)
	cmd.Dir, cmd.Env = wd, []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if want := "data_dir: " + filepath.Join(home, ".local/share/ctxguard-test"); !strings.Contains(string(out), want) {
		t.Errorf("ctxguard config does not show %q:\n%s", want, out)
	}
	up := newUpstream(t)
	start(t, serveOpts{upstream: up.URL, config: "data_dir: $FAULT_HOME/cg\n", env: []string{"FAULT_HOME=" + home}, dataDirFromConfig: true})
	if _, err := os.Stat(filepath.Join(home, "cg", ".ctxguard-store")); err != nil {
		t.Errorf("$VAR data_dir not created and marked: %v", err)
	}
	if ents, _ := os.ReadDir(wd); len(ents) != 0 {
		t.Errorf("the working directory got %v", ents)
	}
}

// sseStream writes n bytes of SSE events (text deltas) to w, flushing each.
func sseStream(w http.ResponseWriter, n int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	rc := http.NewResponseController(w)
	chunk := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" + strings.Repeat("x", 16<<10) + "\"}}\n\n"
	for sent := 0; sent < n; sent += len(chunk) {
		if _, err := io.WriteString(w, chunk); err != nil {
			return
		}
		rc.Flush()
	}
}

// TestSlowReader: a client that stops reading for longer than
// timeouts.idle still gets the whole answer: idle time counts upstream
// silence only. (Before: the answer was cut at 4.1 of 24 MiB and the log
// blamed the upstream.)
func TestSlowReader(t *testing.T) {
	const size = 24 << 20
	up := newUpstream(t)
	up.on("big", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		sseStream(w, size)
	})
	in := start(t, serveOpts{upstream: up.URL}) // idle: 2s
	req, _ := http.NewRequest(http.MethodPost, in.URL+"/v1/messages", bytes.NewReader(smallBody("long answer")))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Fault", "big")
	res, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	head := make([]byte, 1<<20)
	if _, err := io.ReadFull(res.Body, head); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second) // the client pauses: 2.5 × idle
	rest, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("after a pause the answer was cut at %.1f MiB: %v", float64(len(head)+len(rest))/(1<<20), err)
	}
	if got := len(head) + len(rest); got < size {
		t.Errorf("got %d bytes of at least %d", got, size)
	}
	if strings.Contains(in.Log(), "sent nothing") {
		t.Errorf("the log blames the upstream:\n%s", in.Tail())
	}
}

// stalledUpload opens a connection, sends the headers of a Messages
// request announcing size bytes and then sent bytes of it, and leaves it
// there. It returns the connection.
func stalledUpload(t *testing.T, url string, size, sent int) net.Conn {
	c := dial(t, url)
	fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", size)
	c.Write(bytes.Repeat([]byte(" "), sent))
	return c
}

// readStatus reads a response's status code and headers from c (at most
// 30 s), or 0 when the connection closed without one.
func readStatus(c net.Conn) (int, http.Header) {
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, nil
	}
	res.Body.Close()
	return res.StatusCode, res.Header
}

// TestStalledUploads: clients that stall mid-upload are cut after
// timeouts.body_read, and while they stall the bytes buffered for them
// stay under limits.max_buffered: beyond it new requests get the API's
// overloaded error (529, Retry-After). (Before: 12 such clients held
// 366 MiB for ever.)
func TestStalledUploads(t *testing.T) {
	up := newUpstream(t)
	in := start(t, serveOpts{upstream: up.URL, config: "limits: {max_buffered: 67108864}\n"}) // 64 MiB; body_read 2s
	_, rss0, _ := procs.Memory(in.Pid())
	const size = 30 << 20
	var conns []net.Conn
	for range 12 {
		conns = append(conns, stalledUpload(t, in.URL, size, 1<<20))
	}
	time.Sleep(500 * time.Millisecond) // let ctxguard take what was sent
	peak, _, _ := procs.Memory(in.Pid())
	if grown := peak - rss0; grown > 2*64<<20+32<<20 {
		t.Errorf("12 stalled 30 MiB uploads grew RSS by %d MiB (max_buffered 64 MiB)", grown>>20)
	}
	codes := map[int]int{}
	var overloaded http.Header
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, h := readStatus(c)
			mu.Lock()
			codes[code]++
			if code == 529 {
				overloaded = h
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[529] < 9 || overloaded.Get("Retry-After") == "" {
		t.Errorf("status codes %v: want at least 9 overloaded (529 with Retry-After), got header %v", codes, overloaded)
	}
	if codes[408]+codes[0]+codes[529] != 12 {
		t.Errorf("status codes %v: the stalled uploads were not all cut", codes)
	}
	// Everything is released: a normal request goes through.
	res, body := post(t, client(), in.URL, nil, smallBody("after the storm"))
	if res.StatusCode != 200 {
		t.Errorf("after the stalled uploads: %d %s", res.StatusCode, body)
	}
}

// TestUpstreamNeverReads: an upstream that accepts the connection and
// never reads the request body is timed out (timeouts.upstream_write) with
// 504. (Before: never.)
func TestUpstreamNeverReads(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never read
		}
	}()
	in := start(t, serveOpts{upstream: "http://" + l.Addr().String()})
	body := bigResultBody(strings.Repeat("y", 100)) // about 16 MiB
	for len(body) < 16<<20 {
		body = append(body[:len(body)-4], body[len(body)/2:]...)
	}
	res, got := post(t, client(), in.URL, nil, body)
	if res.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("an upstream that never reads: %d %s", res.StatusCode, got)
	}
}

// TestTooLargeReachesPython: Python's http.client writes the whole body
// before it reads; it must still see the 413, not a broken pipe.
func TestTooLargeReachesPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed for this test: ", err)
	}
	in := start(t, serveOpts{upstream: "http://127.0.0.1:1"})
	script := `
import http.client, sys
host, port = sys.argv[1].rsplit(":", 1)
body = b'{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"' + b"x" * (33 << 20) + b'"}]}'
c = http.client.HTTPConnection(host, int(port), timeout=60)
c.request("POST", "/v1/messages", body=body, headers={"Content-Type": "application/json"})
r = c.getresponse()
print(r.status)
print(r.read().decode())
`
	out, err := exec.Command(py, "-c", script, hostPort(in.URL)).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "413\n") || !strings.Contains(string(out), "request_too_large") {
		t.Errorf("python http.client: %v\n%s", err, out)
	}
}

// TestLocalEndpointsHost: /ctxguard/ answers loopback Host names only (a
// web page cannot read it through DNS rebinding), plus local.hosts.
func TestLocalEndpointsHost(t *testing.T) {
	in := start(t, serveOpts{upstream: "http://127.0.0.1:1", config: "local: {hosts: [ctxguard.internal]}\n"})
	_, port, _ := net.SplitHostPort(hostPort(in.URL))
	for host, want := range map[string]int{
		"":                           200,
		"localhost:" + port:          200,
		"127.0.0.1:" + port:          200,
		"[::1]:" + port:              200,
		"ctxguard.internal:" + port:  200,
		"evil.example:" + port:       403,
		"evil.example":               403,
		"127.0.0.1.nip.io:" + port:   403,
		"localhost.evil.com:" + port: 403,
	} {
		res, body := get(t, in.URL+"/ctxguard/v1/stats", host, nil)
		if res.StatusCode != want {
			t.Errorf("Host %q: %d %s, want %d", host, res.StatusCode, body, want)
		}
	}
}

const token = "fault-test-token-0123456789"

// TestNetworkExposure: listening beyond loopback needs an auth token;
// with one, requests without it get 401, the token never goes upstream
// and never into the log.
func TestNetworkExposure(t *testing.T) {
	code, out := runCtxguard(t, []string{"HOME=" + t.TempDir()}, "serve", "--listen", "0.0.0.0:0", "--data-dir", filepath.Join(t.TempDir(), "d"))
	if code == 0 || !strings.Contains(out, "auth_token") {
		t.Errorf("serve --listen 0.0.0.0:0 without a token: exit %d\n%s", code, out)
	}
	up := newUpstream(t)
	in := start(t, serveOpts{upstream: up.URL, listen: "0.0.0.0:0", env: []string{"CTXGUARD_AUTH_TOKEN=" + token}})
	if !in.waitLog("beyond loopback") {
		t.Errorf("no warning about listening beyond loopback:\n%s", in.Tail())
	}
	for _, tc := range []struct {
		tok  string
		want int
	}{{"", 401}, {"wrong-token-0123456789", 401}, {token + "x", 401}, {token, 200}} {
		h := http.Header{}
		if tc.tok != "" {
			h.Set("X-Ctxguard-Token", tc.tok)
		}
		res, body := post(t, client(), in.URL, h, smallBody("hi"))
		if res.StatusCode != tc.want {
			t.Errorf("token %q: %d %s, want %d", tc.tok, res.StatusCode, body, tc.want)
		}
		res, _ = get(t, in.URL+"/ctxguard/v1/stats", "", h)
		if res.StatusCode != tc.want {
			t.Errorf("token %q on /ctxguard/: %d, want %d", tc.tok, res.StatusCode, tc.want)
		}
	}
	for _, h := range up.headers() {
		if h.Get("X-Ctxguard-Token") != "" {
			t.Error("the token reached the upstream")
		}
	}
	in.Stop()
	if strings.Contains(in.Log(), token) {
		t.Error("the token is in the log")
	}
}

// TestCredentialsRedacted: a password in the upstream URL appears neither
// in the start-up log nor in `ctxguard config`.
func TestCredentialsRedacted(t *testing.T) {
	up := newUpstream(t)
	withPass := strings.Replace(up.URL, "http://", "http://team:hunter2-secret@", 1)
	in := start(t, serveOpts{upstream: withPass})
	res, _ := post(t, client(), in.URL, nil, smallBody("hi"))
	if res.StatusCode != 200 {
		t.Errorf("%d", res.StatusCode)
	}
	in.Stop()
	_, out := runCtxguard(t, []string{"HOME=" + t.TempDir()}, "config", "--upstream", withPass)
	for what, s := range map[string]string{"log": in.Log(), "ctxguard config": out} {
		if strings.Contains(s, "hunter2") {
			t.Errorf("the password is in the %s:\n%s", what, s)
		}
	}
}

// TestNoInventedContentType: an answer without Content-Type reaches the
// client without one.
func TestNoInventedContentType(t *testing.T) {
	up := newUpstream(t)
	up.on("bare", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = nil
		w.WriteHeader(200)
		io.WriteString(w, `{"plain": "text without a type"}`)
	})
	in := start(t, serveOpts{upstream: up.URL})
	res, body := post(t, client(), in.URL, http.Header{"X-Fault": {"bare"}}, smallBody("hi"))
	if ct, ok := res.Header["Content-Type"]; ok {
		t.Errorf("Content-Type %q added to %s", ct, body)
	}
}

// TestCLISlips: -h is not an error, a bad flag is reported once, and
// there is a version command.
func TestCLISlips(t *testing.T) {
	env := []string{"HOME=" + t.TempDir()}
	if code, out := runCtxguard(t, env, "serve", "-h"); code != 0 || strings.Contains(out, "help requested") {
		t.Errorf("serve -h: exit %d\n%s", code, out)
	}
	if code, out := runCtxguard(t, env, "serve", "--nope"); code != 2 || strings.Count(out, "-nope") != 1 {
		t.Errorf("bad flag: exit %d\n%s", code, out)
	}
	if code, out := runCtxguard(t, env, "version"); code != 0 || !strings.HasPrefix(out, "ctxguard ") {
		t.Errorf("version: exit %d\n%s", code, out)
	}
}

// TestReadOnlyDataDir: a data dir that cannot be written does not stop
// the proxy: it serves without persistence, says so, and keeps removed
// content in memory, retrievable by URL.
func TestReadOnlyDataDir(t *testing.T) {
	if exec.Command("unshare", "-m", "true").Run() != nil {
		t.Fatal("this test needs a mount namespace (unshare -m, as root) for a read-only file system")
	}
	mnt := filepath.Join(t.TempDir(), "ro")
	os.Mkdir(mnt, 0o700)
	up := newUpstream(t)
	in := start(t, serveOpts{upstream: up.URL, dataDir: filepath.Join(mnt, "data"), env: []string{"MNT=" + mnt},
		wrap: []string{"unshare", "-m", "--propagation", "private", "sh", "-c", `mount -t tmpfs -o ro,size=1m tmpfs "$MNT" && exec "$@"`, "sh"}})
	if !in.waitLog("persistence") {
		t.Errorf("no warning that persistence is off:\n%s", in.Tail())
	}
	res, body := post(t, client(), in.URL, nil, bigResultBody("ro"))
	if res.StatusCode != 200 || res.Header.Get("X-Ctxguard-Error-Id") != "" {
		t.Fatalf("%d %s (error id %q)", res.StatusCode, body, res.Header.Get("X-Ctxguard-Error-Id"))
	}
	sent := up.messages()
	m := blobURL.FindSubmatch(sent[len(sent)-1])
	if m == nil {
		t.Fatalf("the big result was not persisted: %.300s", sent[len(sent)-1])
	}
	res, blob := get(t, in.URL+"/ctxguard/v1/blobs/"+string(m[1]), "", nil)
	if res.StatusCode != 200 || !bytes.Contains(blob, []byte("ro line 01999")) {
		t.Errorf("blob %s from memory: %d %.100s", m[1], res.StatusCode, blob)
	}
}

// TestMemoryAfterLoad: memory a burst of big sessions took is handed back
// within a few ticks of idleness (limits.session_idle, here 2 s). (Before:
// 307 MiB stayed resident for about 70 minutes.)
func TestMemoryAfterLoad(t *testing.T) {
	up := newUpstream(t)
	in := start(t, serveOpts{upstream: up.URL, config: "limits: {session_idle: 2s}\n"})
	_, rss0, _ := procs.Memory(in.Pid())
	body := bigResultBody(strings.Repeat("z", 40))
	for len(body) < 5<<20 {
		body = append(body[:len(body)-4], body[len(body)/2:]...)
	}
	var wg sync.WaitGroup
	for s := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				post(t, client(), in.URL, http.Header{"X-Claude-Code-Session-Id": {fmt.Sprint("load-", s)}}, body)
			}
		}()
	}
	wg.Wait()
	peak, _, _ := procs.Memory(in.Pid())
	deadline := time.Now().Add(30 * time.Second)
	var rss int64
	for time.Now().Before(deadline) {
		_, rss, _ = procs.Memory(in.Pid())
		if rss < rss0+32<<20 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("RSS: %d MiB at start, %d MiB peak, %d MiB after idle", rss0>>20, peak>>20, rss>>20)
	if rss >= rss0+32<<20 {
		t.Errorf("RSS still %d MiB 30 s after load (started at %d, peaked at %d)", rss>>20, rss0>>20, peak>>20)
	}
}

var blobURL = regexp.MustCompile(`/ctxguard/v1/blobs/([a-z]{13})\b`)

// TestLostBlobStoredAgain: blobs a live session's stubs name that vanish
// from the data dir (deleted by hand, or by another process's sweep) are
// stored again by the session's next requests, in the running process.
// (Before: the process remembered what it had stored and never wrote it
// again, so a stub could point at a deleted file for good.)
func TestLostBlobStoredAgain(t *testing.T) {
	bodies := sessionStream(t)
	up := newUpstream(t)
	// A short blob_ttl makes uses refresh blobs every second (ttl/8), so
	// a lost one is noticed quickly.
	in := start(t, serveOpts{upstream: up.URL, config: "blob_ttl: 8s\n"})
	half := len(bodies) * 3 / 4
	replay(t, in, bodies[:half])
	sent := up.messages()
	ids := map[string]bool{}
	for _, m := range blobRef.FindAllSubmatch(sent[len(sent)-1], -1) {
		ids[string(m[1])] = true
	}
	if len(ids) == 0 {
		t.Fatal("no blob referenced: the test checks too little")
	}
	for id := range ids {
		if err := os.Remove(filepath.Join(in.dataDir, "blobs", id+".txt")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // past the refresh interval
	replay(t, in, bodies[half:half+3])
	for id := range ids {
		if _, err := os.Stat(filepath.Join(in.dataDir, "blobs", id+".txt")); err != nil {
			t.Errorf("blob %s not stored again: %v", id, err)
		}
	}
}
