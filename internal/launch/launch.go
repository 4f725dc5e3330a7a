package launch

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Options say what Run starts and where.
type Options struct {
	// Command is the client and its arguments; Command[0] is looked up
	// in PATH.
	Command []string
	// Environ is the environment of the client (changed by Point) and of
	// a ctxguard Run starts.
	Environ []string
	// Stdin, Stdout and Stderr are the client's standard streams (an
	// *os.File, a terminal among them, is handed over as it is). Run's
	// own messages go to Stderr, one line each.
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	// Exe is the ctxguard binary Run starts as "Exe serve ServeArgs...
	// --listen ADDR --exit-with-parent=false" when no ctxguard serves.
	Exe       string
	ServeArgs []string
	// Listen is the configured listen address; port 0 always starts a
	// ctxguard of this run's own on a free port.
	Listen string
	// StateDir holds a folder per address (see registry): leases, the
	// started server's process id and log.
	StateDir string
	// Token is ctxguard's auth token, "" when it requires none.
	Token string
	// Dashboard says whether the dashboard is served (its URL is printed).
	Dashboard bool
	// Ready bounds the wait for a started ctxguard to answer (default
	// 60 s); Drain is its drain timeout (default 30 s): how long a
	// stopped ctxguard may take to end, plus a margin.
	Ready, Drain time.Duration
}

// DefaultStateDir is where `ctxguard run` keeps its state and the logs of
// the servers it starts: $XDG_STATE_HOME/ctxguard/run, else
// ~/.local/state/ctxguard/run.
func DefaultStateDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "ctxguard", "run"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".local", "state", "ctxguard", "run"), nil
}

// addrDir names the state folder of an address: "127.0.0.1:8787" is
// "127.0.0.1-8787", "[::1]:8787" is "--1-8787" (no character a file
// name cannot hold).
func addrDir(addr string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			return r
		}
		return '-'
	}, addr)
}
