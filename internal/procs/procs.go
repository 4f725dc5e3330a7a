// Package procs builds ctxguard's commands and runs them as real processes
// for the tests and harnesses that need one (the fault suite, the
// end-to-end tests, the load test): start a process, wait for the address
// it listens on, read its log, measure its memory, stop it.
package procs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ctxguard/ctxguard/config"
)

// Build compiles the packages (e.g. "./cmd/ctxguard") of the module at
// root into dir with one `go build`, and returns the binaries' paths in
// the same order.
func Build(ctx context.Context, root, dir string, pkgs ...string) ([]string, error) {
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("procs: go build: %v\n%s", err, out)
	}
	bins := make([]string, len(pkgs))
	for i, p := range pkgs {
		bins[i] = filepath.Join(dir, filepath.Base(p))
	}
	return bins, nil
}

// Proc is a process Start started.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	// URL is "http://HOST:PORT" of the address the process said it
	// listens on; an unspecified host (0.0.0.0, ::) is given as
	// 127.0.0.1.
	URL string

	mu     sync.Mutex
	log    bytes.Buffer // stderr, up to maxLog bytes
	tail   []string     // the last lines of stderr
	errors int          // stderr lines at level ERROR
	done   chan struct{}
	waited chan struct{}
	werr   error
}

// maxLog bounds the stderr a Proc keeps whole; past it only the tail is
// kept.
const maxLog = 16 << 20

var listening = regexp.MustCompile(`listening on http://(\S+?)(?:"|\s|$)`)

// Start runs bin with args and env and waits (at most 60 s) for it to
// print "listening on http://ADDR" on stderr. It keeps draining stderr
// after that (a full pipe would stall the process), keeping the log for
// Log and Tail. The process is killed if the caller's process dies.
func Start(name, bin string, env []string, args ...string) (*Proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("procs: start %s: %w", name, err)
	}
	p := &Proc{Name: name, Cmd: cmd, done: make(chan struct{}), waited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			if p.log.Len() < maxLog {
				p.log.WriteString(line + "\n")
			}
			if strings.Contains(line, "level=ERROR") || strings.Contains(line, `"level":"ERROR"`) {
				p.errors++
			}
			p.tail = append(p.tail, line)
			if len(p.tail) > 40 {
				p.tail = p.tail[1:]
			}
			p.mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		<-p.done
		p.werr = cmd.Wait()
		close(p.waited)
	}()
	select {
	case a := <-addr:
		p.URL = "http://" + config.LocalAddr(a)
		return p, nil
	case <-p.waited:
		return nil, fmt.Errorf("procs: %s exited before listening (%v): %s", name, p.werr, p.Tail())
	case <-time.After(60 * time.Second):
		p.Stop()
		return nil, fmt.Errorf("procs: %s did not listen within 60s: %s", name, p.Tail())
	}
}

// Log returns what the process wrote to stderr so far (its first 16 MiB).
func (p *Proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Tail returns the last lines the process wrote to stderr.
func (p *Proc) Tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// ErrorLines counts the stderr lines logged at level ERROR.
func (p *Proc) ErrorLines() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errors
}

// Pid returns the process id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Exited reports whether the process has ended, and its wait error.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.waited:
		return true, p.werr
	default:
		return false, nil
	}
}

// Wait waits at most d for the process to end and returns its wait
// error, or an error saying it still runs.
func (p *Proc) Wait(d time.Duration) error {
	select {
	case <-p.waited:
		return p.werr
	case <-time.After(d):
		return fmt.Errorf("procs: %s still runs after %v", p.Name, d)
	}
}

// Stop asks the process to end (SIGTERM), and kills it after 10 s. It
// returns the process's wait error.
func (p *Proc) Stop() error {
	if p == nil || p.Cmd.Process == nil {
		return nil
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.waited:
	case <-time.After(10 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-p.waited
	}
	return p.werr
}

// Memory returns process pid's peak and current resident set size in
// bytes (VmHWM and VmRSS of /proc/PID/status).
func Memory(pid int) (peak, rss int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return ParseStatusMem(b)
}

// ParseStatusMem reads VmHWM and VmRSS (in kB) from the content of
// /proc/PID/status, in bytes.
func ParseStatusMem(b []byte) (peak, rss int64, err error) {
	var havePeak, haveRSS bool
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmHWM" && k != "VmRSS") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("procs: /proc status %s: %w", k, err)
		}
		if k == "VmHWM" {
			peak, havePeak = n<<10, true
		} else {
			rss, haveRSS = n<<10, true
		}
	}
	if !havePeak || !haveRSS {
		return 0, 0, errors.New("procs: /proc status: no VmHWM or VmRSS")
	}
	return peak, rss, nil
}

// ResetPeak resets the process's VmHWM to its current RSS (Linux 4.0+,
// "5" to /proc/PID/clear_refs). It reports whether that worked.
func ResetPeak(pid int) bool {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0) == nil
}
