// Package redistest runs a real redis-server for tests: on a free
// loopback port, without persistence, stopped when the test ends. A
// machine without redis-server fails the test (CI installs Debian's
// redis-server package; it must not skip what it cannot run).
package redistest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startTimeout bounds the wait for a started server to answer PING.
const startTimeout = 20 * time.Second

// Server is a running redis-server.
type Server struct {
	// Addr is its host:port on 127.0.0.1.
	Addr string
	cmd  *exec.Cmd
	log  *bytes.Buffer
}

// URL returns the server's redis:// URL for database db.
func (s *Server) URL(db int) string { return fmt.Sprintf("redis://%s/%d", s.Addr, db) }

// Start runs redis-server with extra arguments (say "--requirepass",
// "secret") and waits until it answers PING. It fails the test if
// redis-server is not installed or does not come up in time; the server
// is stopped in t.Cleanup.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is not installed (Debian: apt-get install redis-server): the Redis store's tests need a real server: %v", err)
	}
	port := freePort(t)
	dir := t.TempDir()
	args := append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--protected-mode", "yes", "--loglevel", "warning",
	}, extra...)
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), log: &bytes.Buffer{}}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout = s.log
	s.cmd.Stderr = s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		s.cmd.Process.Signal(syscall.SIGCONT) // if a test paused it
		s.cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(startTimeout):
			t.Errorf("redis-server (pid %d) did not exit after SIGKILL", s.cmd.Process.Pid)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		if ping(ctx, s.Addr) {
			return s
		}
		select {
		case <-done:
			t.Fatalf("redis-server exited before answering: %v\n%s", s.cmd.ProcessState, s.log)
		case <-ctx.Done():
			t.Fatalf("redis-server on %s did not answer PING within %v\n%s", s.Addr, startTimeout, s.log)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Pause stops the server's process (SIGSTOP): it keeps its port and
// accepted connections but answers nothing. Resume undoes it.
func (s *Server) Pause(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
}

// Resume continues a paused server.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// ping reports whether a server at addr answers PING (any answer counts:
// a server that wants a password says NOAUTH, which is up).
func ping(ctx context.Context, addr string) bool {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && (strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH"))
}

// freePort returns a loopback TCP port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ClosedPort returns a loopback address where nothing listens.
func ClosedPort(t testing.TB) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
}
