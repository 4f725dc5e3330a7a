// Package testtool finds the programs a test drives (redis-server,
// chromium): a test whose program is missing skips on a developer's
// machine, and fails where it must run, under CI or when the program's
// own variable is set (.ci/run sets them).
package testtool

import (
	"net"
	"os"
	"os/exec"
	"testing"
)

// Required reports whether a missing program fails the test rather than
// skipping it: CI is set (and not "0" or "false"), or env is.
func Required(env string) bool {
	ci := os.Getenv("CI")
	return (ci != "" && ci != "0" && ci != "false") || os.Getenv(env) != ""
}

// Find returns the path of the first of names on PATH. Without one it
// fails the test if Required(env), else skips it; hint says how to
// install the program.
func Find(t testing.TB, env, hint string, names ...string) string {
	t.Helper()
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if Required(env) {
		t.Fatalf("%s is not installed (%s); the test must run here", names[0], hint)
	}
	t.Skipf("%s is not installed (%s); set %s=1 to make this a failure", names[0], hint, env)
	return ""
}

// FreeAddr returns a loopback address ("127.0.0.1:PORT") nothing listens
// on now (another program may take it before the test does).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
