//go:build unix

package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ctxguard/ctxguard/config"
)

// Supported reports whether Run works on this system.
const Supported = true

// Default waits (Options.Ready, Options.Drain) and the margin a stopped
// ctxguard gets beyond its drain timeout before it is killed.
const (
	defaultReady = 60 * time.Second
	defaultDrain = 30 * time.Second
	stopMargin   = 10 * time.Second
)

// Run starts o.Command through ctxguard and returns the client's exit
// status (128+n when signal n ended it).
//
// The ctxguard: one answering on o.Listen (PidHeader on /healthz) is
// used as it is. When nothing listens there, Run starts "o.Exe serve" on
// it in a session of its own (the terminal's signals do not reach it),
// its output to serve.log in the address's state folder, and waits at
// most o.Ready for it to answer. When another program holds the address,
// Run starts one on a free port of the same host for this client alone.
//
// Sharing: every run using the ctxguard on an address holds a lease in
// the address's state folder. When a run's client exits, the run drops
// its lease; if no run that is still alive holds one and the ctxguard
// there is one a run started, it is stopped (SIGTERM: it drains the
// requests in flight; killed if it has not ended after its drain timeout
// plus 10 s). So a ctxguard that runs started lives as long as one of
// them does, whichever started it, and a ctxguard started any other way
// (ctxguard serve) is never stopped. A run killed with SIGKILL leaves
// its ctxguard running; the next run on the address uses it and stops it
// in the end.
//
// The client: its command is run with the arguments and environment of
// Point, the standard streams as they are (a terminal stays the
// client's), in Run's process group. Run passes on the signals in
// forwarded, except those the terminal has already sent to the client
// (see forward). Run prints one line to o.Stderr before the client
// starts (where ctxguard is, the dashboard's URL), and warnings.
//
// An error means the client did not run (or Run could not clean up);
// the status returned with it is what to exit with: 127 for a command
// not found, 126 for one that cannot be started, 128+n for a signal
// during start-up, 1 otherwise.
func Run(ctx context.Context, o Options) (int, error) {
	if len(o.Command) == 0 || o.Command[0] == "" {
		return 2, errors.New("no client command")
	}
	if o.Ready <= 0 {
		o.Ready = defaultReady
	}
	if o.Drain <= 0 {
		o.Drain = defaultDrain
	}
	path, err := exec.LookPath(o.Command[0])
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return 127, err
		}
		return 126, err
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	// Until the client runs, a signal interrupts the start-up.
	actx, cancel := context.WithCancelCause(ctx)
	stopWatch, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case sig := <-sigs:
			cancel(interrupted{sig})
		case <-stopWatch:
		}
	}()
	s, err := acquire(actx, o)
	close(stopWatch)
	<-watched
	if err == nil {
		if cause := context.Cause(actx); cause != nil { // a signal just after
			if rerr := s.release(ctx, o); rerr != nil {
				fmt.Fprintln(o.Stderr, "ctxguard run: "+rerr.Error())
			}
			err = cause
		}
	}
	cancel(nil)
	if err != nil {
		var in interrupted
		if errors.As(err, &in) {
			return signalCode(in.sig), err
		}
		return 1, err
	}
	fmt.Fprintln(o.Stderr, "ctxguard run: "+s.describe(o.Dashboard))
	setup := Point(KindOf(o.Command[0]), o.Command[1:], o.Environ, "http://"+s.addr, o.Token)
	for _, w := range setup.Warnings {
		fmt.Fprintln(o.Stderr, "ctxguard run: warning: "+w)
	}

	cmd := exec.Command(path, setup.Args...)
	cmd.Args[0] = o.Command[0]
	cmd.Env = setup.Env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = o.Stdin, o.Stdout, o.Stderr
	if err := cmd.Start(); err != nil {
		if rerr := s.release(ctx, o); rerr != nil {
			fmt.Fprintln(o.Stderr, "ctxguard run: "+rerr.Error())
		}
		return 126, err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status is in cmd.ProcessState
		close(done)
	}()
	for waiting := true; waiting; {
		select {
		case sig := <-sigs:
			if forward(sig, foreground()) {
				_ = cmd.Process.Signal(sig)
			}
		case <-done:
			waiting = false
		}
	}
	code := exitCode(cmd.ProcessState)
	if err := s.release(ctx, o); err != nil {
		fmt.Fprintln(o.Stderr, "ctxguard run: "+err.Error())
	}
	return code, nil
}

// interrupted is the error of a start-up a signal cut short.
type interrupted struct{ sig os.Signal }

func (e interrupted) Error() string {
	return "interrupted by " + e.sig.String() + " while starting ctxguard"
}

// server is the ctxguard a run uses.
type server struct {
	addr  string    // HOST:PORT the client dials
	reg   *registry // nil: a ctxguard of this run alone (free port)
	lease string
	note  string // why it is not on the configured address

	// A ctxguard this run started:
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has ended
	log    string
}

// describe is the line Run prints about s.
func (s *server) describe(dashboard bool) string {
	var b strings.Builder
	if s.note != "" {
		b.WriteString(s.note + "; ")
	}
	if s.cmd != nil {
		fmt.Fprintf(&b, "started ctxguard on http://%s (log: %s)", s.addr, s.log)
	} else {
		fmt.Fprintf(&b, "using the ctxguard on http://%s", s.addr)
	}
	if dashboard {
		fmt.Fprintf(&b, "; dashboard: http://%s/ctxguard/", s.addr)
	}
	return b.String()
}

// acquire finds or starts the ctxguard for o (see Run). Cancelling ctx
// stops a ctxguard it is starting; the error is then ctx's cause.
func acquire(ctx context.Context, o Options) (*server, error) {
	addr := config.LocalAddr(o.Listen)
	host, port, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", o.Listen, err)
	}
	reg := &registry{dir: filepath.Join(o.StateDir, addrDir(addr))}
	if port == "0" {
		return startFree(ctx, o, reg, host, "")
	}
	lctx, cancel := context.WithTimeout(ctx, o.Ready+o.Drain+stopMargin)
	unlock, err := reg.lock(lctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("state folder: %w", err)
	}
	s, foreign, err := func() (*server, bool, error) {
		defer unlock()
		found, _ := Probe(ctx, addr)
		if ctx.Err() != nil {
			return nil, false, context.Cause(ctx)
		}
		var s *server
		switch found {
		case Foreign:
			return nil, true, nil
		case Ctxguard:
			s = &server{addr: addr, reg: reg}
		case Nothing:
			var err error
			s, err = start(ctx, o, o.Listen, filepath.Join(reg.dir, "serve.log"))
			if err != nil {
				return nil, false, err
			}
			s.reg = reg
			if err := reg.setOwner(s.cmd.Process.Pid); err != nil {
				s.kill()
				return nil, false, err
			}
		}
		var err error
		if s.lease, err = reg.addLease(); err != nil {
			if s.cmd != nil {
				s.kill()
				_ = reg.setOwner(0)
			}
			return nil, false, err
		}
		return s, false, nil
	}()
	if foreign {
		return startFree(ctx, o, reg, host, addr+" is taken by another program")
	}
	return s, err
}

// startFree starts a ctxguard on a free port of host for this run alone.
func startFree(ctx context.Context, o Options, reg *registry, host, note string) (*server, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("no free port on %q: %w", host, err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close() // serve binds it next; another program could take it first, and serve would say so
	if err := os.MkdirAll(reg.dir, 0o700); err != nil {
		return nil, fmt.Errorf("state folder: %w", err)
	}
	s, err := start(ctx, o, net.JoinHostPort(host, port), filepath.Join(reg.dir, "serve-"+port+".log"))
	if err != nil {
		return nil, err
	}
	s.note = note
	return s, nil
}

// start runs "o.Exe serve" on listen, its output to logPath, and waits
// until it answers (at most o.Ready, and while ctx lasts).
func start(ctx context.Context, o Options, listen, logPath string) (*server, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return nil, fmt.Errorf("state folder: %w", err)
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ctxguard's log: %w", err)
	}
	args := append([]string{"serve"}, o.ServeArgs...)
	// The leases decide when it ends, not its parent's life: a run may
	// exit while another one still uses the ctxguard it started.
	args = append(args, "--listen", listen, "--exit-with-parent=false")
	cmd := exec.Command(o.Exe, args...)
	cmd.Env = o.Environ
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("start ctxguard serve: %w", err)
	}
	s := &server{addr: config.LocalAddr(listen), cmd: cmd, exited: make(chan struct{}), log: logPath}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	deadline := time.NewTimer(o.Ready)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if found, pid := Probe(ctx, s.addr); found == Ctxguard && pid == cmd.Process.Pid {
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("ctxguard serve ended before it answered on %s (%v); the end of its log, %s:\n%s", s.addr, cmd.ProcessState, logPath, tail(logPath))
		case <-deadline.C:
			s.kill()
			return nil, fmt.Errorf("ctxguard serve did not answer on %s within %v; the end of its log, %s:\n%s", s.addr, o.Ready, logPath, tail(logPath))
		case <-ctx.Done():
			s.kill()
			return nil, context.Cause(ctx)
		case <-tick.C:
		}
	}
}

// kill ends a ctxguard this run started that is not in use (SIGKILL) and
// waits for it.
func (s *server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// release drops this run's lease and stops the ctxguard when no other
// run uses it and a run started it (see Run).
func (s *server) release(ctx context.Context, o Options) error {
	timeout := o.Drain + stopMargin
	if s.reg == nil { // a ctxguard of this run alone
		if s.cmd == nil {
			return nil
		}
		err := stop(s.cmd.Process.Pid, s.exited, timeout)
		if err == nil && s.cmd.ProcessState.Success() {
			os.Remove(s.log)
		}
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, o.Ready+timeout)
	unlock, err := s.reg.lock(lctx)
	cancel()
	if err != nil {
		return fmt.Errorf("ctxguard left running: %w", err)
	}
	defer unlock()
	if err := s.reg.dropLease(s.lease); err != nil {
		return err
	}
	if n, err := s.reg.liveLeases(); err != nil || n > 0 {
		return err // another run uses it
	}
	owner := s.reg.owner()
	if owner == 0 {
		return nil // not started by a run: not ours to stop
	}
	var exited <-chan struct{}
	if s.cmd != nil && s.cmd.Process.Pid == owner {
		select {
		case <-s.exited:
			_ = s.reg.setOwner(0)
			return fmt.Errorf("the ctxguard it started had ended (%v); see its log, %s", s.cmd.ProcessState, s.log)
		default:
		}
		exited = s.exited
	} else if found, pid := Probe(ctx, s.addr); found != Ctxguard || pid != owner {
		// That ctxguard is gone; whatever answers now is not one a run
		// started.
		return s.reg.setOwner(0)
	}
	err = stop(owner, exited, timeout)
	if serr := s.reg.setOwner(0); err == nil {
		err = serr
	}
	return err
}

// stop sends SIGTERM to process pid and waits at most timeout for it to
// end (on exited, closed when it has, for a child of this process; else
// by polling), then kills it.
func stop(pid int, exited <-chan struct{}, timeout time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return fmt.Errorf("stop ctxguard (pid %d): %w", pid, err)
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if exited == nil && gone(pid) {
			return nil
		}
		select {
		case <-exited:
			return nil
		case <-deadline.C:
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Errorf("ctxguard (pid %d) did not end within %v of SIGTERM; killed", pid, timeout)
		case <-tick.C:
		}
	}
}

// tail returns the last lines of the file at path (at most 4 KiB).
func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	const max = 4 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		_, _ = f.Seek(fi.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, max))
	return strings.TrimRight(string(b), "\n")
}
