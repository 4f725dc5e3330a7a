//go:build unix

package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/internal/testtool"
	"github.com/ctxguard/ctxguard/proxy"
)

func TestProbe(t *testing.T) {
	handler := func(status int, pid string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/healthz" {
				http.NotFound(w, r)
				return
			}
			if pid != "" {
				w.Header().Set(proxy.PidHeader, pid)
			}
			w.WriteHeader(status)
		}
	}
	for _, tc := range []struct {
		name    string
		h       http.Handler
		found   Found
		wantPid int
	}{
		{"ctxguard", handler(200, "4242"), Ctxguard, 4242},
		{"no pid header", handler(200, ""), Foreign, 0},
		{"bad pid", handler(200, "abc"), Foreign, 0},
		{"negative pid", handler(200, "-1"), Foreign, 0},
		{"not ok", handler(503, "4242"), Foreign, 0},
		{"redirect", http.RedirectHandler("/elsewhere", http.StatusFound), Foreign, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.h)
			defer srv.Close()
			found, pid := Probe(context.Background(), srv.Listener.Addr().String())
			if found != tc.found || pid != tc.wantPid {
				t.Errorf("Probe = %v, %d; want %v, %d", found, pid, tc.found, tc.wantPid)
			}
		})
	}
	t.Run("nothing listens", func(t *testing.T) {
		addr := testtool.FreeAddr(t)
		if found, pid := Probe(context.Background(), addr); found != Nothing || pid != 0 {
			t.Errorf("Probe = %v, %d; want nothing", found, pid)
		}
	})
	t.Run("not HTTP", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
				c.Close()
			}
		}()
		if found, _ := Probe(context.Background(), ln.Addr().String()); found != Foreign {
			t.Errorf("Probe = %v, want %v", found, Foreign)
		}
	})
}

func TestForward(t *testing.T) {
	for _, tc := range []struct {
		sig        syscall.Signal
		foreground bool
		want       bool
	}{
		// In the terminal's foreground group the client got these from
		// the terminal already.
		{syscall.SIGINT, true, false},
		{syscall.SIGQUIT, true, false},
		{syscall.SIGWINCH, true, false},
		{syscall.SIGTERM, true, true},
		{syscall.SIGHUP, true, true},
		{syscall.SIGUSR1, true, true},
		// Anywhere else every signal came from kill(2).
		{syscall.SIGINT, false, true},
		{syscall.SIGQUIT, false, true},
		{syscall.SIGWINCH, false, true},
		{syscall.SIGTERM, false, true},
	} {
		if got := forward(tc.sig, tc.foreground); got != tc.want {
			t.Errorf("forward(%v, foreground %v) = %v, want %v", tc.sig, tc.foreground, got, tc.want)
		}
	}
}

func TestExitCode(t *testing.T) {
	for script, want := range map[string]int{
		"exit 0":         0,
		"exit 3":         3,
		"kill -TERM $$":  128 + int(syscall.SIGTERM),
		"kill -INT $$":   128 + int(syscall.SIGINT),
		"kill -KILL $$":  128 + int(syscall.SIGKILL),
		"exit 255":       255,
		"kill -USR1 $$ ": 128 + int(syscall.SIGUSR1),
	} {
		cmd := exec.Command("sh", "-c", script)
		_ = cmd.Run()
		if got := exitCode(cmd.ProcessState); got != want {
			t.Errorf("%q: exitCode = %d, want %d", script, got, want)
		}
	}
}

func TestRegistryLeases(t *testing.T) {
	r := registry{dir: t.TempDir()}
	unlock, err := r.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	a, err := r.addLease()
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.addLease()
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatalf("two leases of one process share the name %q", a)
	}
	// A lease of a process that has ended, and a file that is no lease.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{strconv.Itoa(dead.Process.Pid) + ".abc", "junk"} {
		if err := os.WriteFile(filepath.Join(r.dir, "leases", name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := r.liveLeases(); err != nil || n != 2 {
		t.Fatalf("liveLeases = %d, %v; want 2", n, err)
	}
	ents, _ := os.ReadDir(filepath.Join(r.dir, "leases"))
	if len(ents) != 2 {
		t.Errorf("%d lease files remain, want the 2 live ones", len(ents))
	}
	if err := r.dropLease(a); err != nil {
		t.Fatal(err)
	}
	if err := r.dropLease(a); err != nil {
		t.Errorf("dropping a dropped lease: %v", err)
	}
	if n, _ := r.liveLeases(); n != 1 {
		t.Errorf("liveLeases = %d after one drop, want 1", n)
	}
}

func TestRegistryOwner(t *testing.T) {
	r := registry{dir: t.TempDir()}
	if got := r.owner(); got != 0 {
		t.Errorf("owner of a new registry = %d", got)
	}
	if err := r.setOwner(4242); err != nil {
		t.Fatal(err)
	}
	if got := r.owner(); got != 4242 {
		t.Errorf("owner = %d, want 4242", got)
	}
	if err := r.setOwner(0); err != nil {
		t.Fatal(err)
	}
	if err := r.setOwner(0); err != nil {
		t.Errorf("clearing a cleared owner: %v", err)
	}
	if got := r.owner(); got != 0 {
		t.Errorf("owner after clearing = %d", got)
	}
	if err := os.WriteFile(filepath.Join(r.dir, "server"), []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := r.owner(); got != 0 {
		t.Errorf("owner of a garbage file = %d", got)
	}
}

// TestRegistryLock: one holder at a time; a waiter gives up when its
// context ends, and gets the lock once it is free.
func TestRegistryLock(t *testing.T) {
	r := registry{dir: t.TempDir()}
	unlock, err := r.lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := r.lock(ctx); err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "another ctxguard run") {
		t.Errorf("second lock while held: %v", err)
	}
	unlock()
	unlock2, err := r.lock(context.Background())
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}

func TestGone(t *testing.T) {
	if gone(os.Getpid()) {
		t.Error("this process is gone")
	}
	// A child that has ended but is not reaped yet (a zombie) is gone.
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Wait()
	deadline := time.Now().Add(30 * time.Second)
	for !gone(zombie.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("an exited child never counts as gone")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fakeServe writes a script that stands in for the ctxguard binary.
func fakeServe(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fake-ctxguard")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func runOptions(t *testing.T, exe string, command ...string) Options {
	var out strings.Builder
	return Options{
		Command: command, Environ: os.Environ(),
		Stdout: &out, Stderr: &out,
		Exe: exe, Listen: testtool.FreeAddr(t), StateDir: t.TempDir(),
	}
}

// TestRunServeFails: a ctxguard that ends before it answers is an error
// that quotes its log; the client never runs, and nothing is left in
// the state folder that names a server or a user.
func TestRunServeFails(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "client-ran")
	o := runOptions(t, fakeServe(t, `echo "config: boom, args: $*" >&2; exit 3`), "sh", "-c", "touch "+marker)
	o.ServeArgs = []string{"--upstream", "http://127.0.0.1:1"}
	code, err := Run(context.Background(), o)
	if code != 1 || err == nil {
		t.Fatalf("Run = %d, %v; want 1 and an error", code, err)
	}
	for _, want := range []string{"ended before it answered", "exit status 3",
		"config: boom, args: serve --upstream http://127.0.0.1:1 --listen " + o.Listen + " --exit-with-parent=false"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the client ran")
	}
	r := registry{dir: filepath.Join(o.StateDir, addrDir(o.Listen))}
	if n, _ := r.liveLeases(); n != 0 || r.owner() != 0 {
		t.Errorf("after the failure: %d leases, owner %d", n, r.owner())
	}
}

// TestRunServeNeverAnswers: a ctxguard that does not answer in time is
// killed, and the error says so.
func TestRunServeNeverAnswers(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	o := runOptions(t, fakeServe(t, `echo $$ > `+pidFile+`; exec sleep 120`), "true")
	o.Ready = 300 * time.Millisecond
	code, err := Run(context.Background(), o)
	if code != 1 || err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("Run = %d, %v; want 1 and a timeout", code, err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 || !gone(pid) {
		t.Errorf("the ctxguard that never answered (pid %d) still runs", pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestRunInterruptedStart: a signal while ctxguard starts stops it, and
// Run ends with 128+n, the client never started.
func TestRunInterruptedStart(t *testing.T) {
	dir := t.TempDir()
	pidFile, marker := filepath.Join(dir, "pid"), filepath.Join(dir, "client-ran")
	// The stand-in sends SIGINT to its parent, this test process, where
	// Run has it.
	o := runOptions(t, fakeServe(t, `echo $$ > `+pidFile+`; kill -INT $PPID; exec sleep 120`), "sh", "-c", "touch "+marker)
	code, err := Run(context.Background(), o)
	var in interrupted
	if code != 128+int(syscall.SIGINT) || !errors.As(err, &in) {
		t.Fatalf("Run = %d, %v; want 130, interrupted", code, err)
	}
	b, _ := os.ReadFile(pidFile)
	if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid <= 0 || !gone(pid) {
		t.Errorf("the ctxguard being started (pid %d) still runs", pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the client ran")
	}
	r := registry{dir: filepath.Join(o.StateDir, addrDir(o.Listen))}
	if n, _ := r.liveLeases(); n != 0 || r.owner() != 0 {
		t.Errorf("after the interruption: %d leases, owner %d", n, r.owner())
	}
}

// TestRunClientNotFound: a client that is not in PATH is status 127, and
// no ctxguard is started for it.
func TestRunClientNotFound(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "serve-ran")
	o := runOptions(t, fakeServe(t, "touch "+marker), "no-such-client-ctxguard-test")
	code, err := Run(context.Background(), o)
	if code != 127 || err == nil {
		t.Fatalf("Run = %d, %v; want 127 and an error", code, err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a ctxguard was started for a client that does not exist")
	}
}

// TestMain lets TestForeground run this test binary to print foreground().
func TestMain(m *testing.M) {
	if os.Getenv("CTXGUARD_TEST_FOREGROUND") == "1" {
		fmt.Println("foreground:", foreground())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestForeground: a process on a terminal, in its foreground group (as
// script(1) runs it), is in the foreground; one whose streams are pipes
// and /dev/null is not.
func TestForeground(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "CTXGUARD_TEST_FOREGROUND=1", "SHELL=/bin/sh")
	piped := exec.Command(self)
	piped.Env = env
	out, err := piped.Output()
	if err != nil || strings.TrimSpace(string(out)) != "foreground: false" {
		t.Errorf("with pipes: %q, %v; want foreground: false", out, err)
	}
	script := testtool.Find(t, "CTXGUARD_SCRIPT", "util-linux's script, Debian package bsdutils", "script")
	onTTY := exec.Command(script, "-qec", self, "/dev/null")
	onTTY.Env = env
	out, err = onTTY.Output()
	if err != nil || !strings.Contains(string(out), "foreground: true") {
		t.Errorf("on a terminal: %q, %v; want foreground: true", out, err)
	}
}
