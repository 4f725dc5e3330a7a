// Package redistest runs a real redis-server (Debian's package) for the
// tests that need one: the Redis store's conformance suite and the fleet
// test. A missing redis-server fails the test: CI installs it (.ci/run),
// and a test that needs it must not pass without it.
package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is a redis-server process on a loopback port, with no
// persistence, stopped when the test ends.
type Server struct {
	Addr string // "127.0.0.1:PORT"
	Cmd  *exec.Cmd
}

// URL returns the redis:// URL of database db.
func (s *Server) URL(db int) string { return "redis://" + s.Addr + "/" + strconv.Itoa(db) }

// Options are extra settings for the server.
type Options struct {
	// Password, if set, is required of clients (requirepass).
	Password string
}

// Start starts a redis-server for t and waits (at most 30 s) until it
// answers PING.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server is not installed (Debian: apt-get install redis-server; .ci/run installs it): %v", err)
	}
	var last error
	for range 5 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", t.TempDir(), "--protected-mode", "no"}
		if o.Password != "" {
			args = append(args, "--requirepass", o.Password)
		}
		cmd := exec.Command(bin, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting redis-server: %v", err)
		}
		s := &Server{Addr: addr, Cmd: cmd}
		if last = s.waitReady(o.Password, 30*time.Second); last == nil {
			t.Cleanup(s.stop)
			return s
		}
		s.stop() // the port was taken meanwhile, say: try another
	}
	t.Fatalf("redis-server did not answer: %v", last)
	return nil
}

func (s *Server) stop() {
	s.Cmd.Process.Kill()
	s.Cmd.Wait()
}

// Pause stops the server's process (SIGSTOP): it holds its connections
// but answers nothing, as a hung server does. Resume undoes it.
func (s *Server) Pause() error { return s.Cmd.Process.Signal(syscall.SIGSTOP) }

// Resume lets a paused server go on.
func (s *Server) Resume() error { return s.Cmd.Process.Signal(syscall.SIGCONT) }

// Do sends one command (inline form) and returns the first line of the
// answer: enough for test set-up (FLUSHALL, SET of a foreign key, ...).
func (s *Server) Do(password string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	if password != "" {
		if _, err := roundTrip(c, r, "AUTH", password); err != nil {
			return "", err
		}
	}
	return roundTrip(c, r, args...)
}

// roundTrip writes a command in RESP and reads one answer line (and a
// bulk string's payload).
func roundTrip(c net.Conn, r *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "-"):
		return "", fmt.Errorf("redis: %s", line[1:])
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return strings.TrimLeft(line, "+:"), nil
}

func (s *Server) waitReady(password string, d time.Duration) error {
	deadline := time.Now().Add(d)
	var err error
	for time.Now().Before(deadline) {
		var got string
		if got, err = s.Do(password, "PING"); err == nil && got == "PONG" {
			return nil
		}
		if s.Cmd.ProcessState != nil {
			return fmt.Errorf("redis-server exited: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no PONG within %v: %v", d, err)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
