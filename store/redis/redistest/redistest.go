// Package redistest runs a real redis-server for tests: on a free
// loopback port, without persistence, stopped when the test ends. On a
// machine without redis-server the test is skipped, unless Required:
// CI installs Debian's redis-server package and sets CTXGUARD_REDIS, so
// there a missing server fails the test.
package redistest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/internal/testtool"
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
	return start(t, 0, extra)
}

// StartTLS is Start for a server that takes TLS connections only (at
// Addr: use rediss:// URLs), with a certificate for 127.0.0.1 from a CA
// made for the test, which it returns for clients to trust.
func StartTLS(t testing.TB, extra ...string) (*Server, *x509.CertPool) {
	t.Helper()
	dir := t.TempDir()
	pool, cert, key := makeCerts(t)
	files := map[string][]byte{"server.crt": cert, "server.key": key, "ca.crt": cert}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tlsPort := freePort(t)
	args := append([]string{"--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", filepath.Join(dir, "server.crt"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.crt"), "--tls-auth-clients", "no"}, extra...)
	s := start(t, tlsPort, args)
	return s, pool
}

// makeCerts returns a pool trusting a new self-signed certificate for
// 127.0.0.1, and that certificate and its key in PEM.
func makeCerts(t testing.TB) (*x509.CertPool, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pool, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// start runs redis-server on a free port, and waits for it to answer
// PING there; Addr is tlsPort's address if not 0.
func start(t testing.TB, tlsPort int, extra []string) *Server {
	t.Helper()
	bin := testtool.Find(t, "CTXGUARD_REDIS", "Debian: apt-get install redis-server", "redis-server")
	port := freePort(t)
	dir := t.TempDir()
	args := append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--protected-mode", "yes", "--loglevel", "warning",
	}, extra...)
	plain := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &Server{Addr: plain, log: &bytes.Buffer{}}
	if tlsPort != 0 {
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort))
	}
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
		if ping(ctx, plain) {
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
