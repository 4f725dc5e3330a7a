//go:build unix

package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// registry is what the `ctxguard run` processes of one address share, in
// a folder of their own:
//
//	lock        flock(2)ed while a run looks for a server, starts one,
//	            or decides to stop one
//	server      the process id of the ctxguard a run started there
//	leases/     one file per run that uses the server, named PID.RANDOM
//	serve.log   the log of the ctxguard a run started there
//
// A lease whose process is gone (a run killed with SIGKILL) counts for
// nothing: every look at the leases removes it.
type registry struct{ dir string }

// lock takes the registry's lock, waiting at most until ctx ends, and
// returns the function that releases it.
func (r registry) lock(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(filepath.Join(r.dir, "leases"), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(r.dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			if cause := context.Cause(ctx); !errors.Is(cause, context.DeadlineExceeded) {
				return nil, cause
			}
			return nil, fmt.Errorf("another ctxguard run held %s for too long: %w", f.Name(), context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// addLease records that this process uses the server, and returns the
// lease's name for dropLease.
func (r registry) addLease() (string, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := strconv.Itoa(os.Getpid()) + "." + hex.EncodeToString(b[:])
	return name, os.WriteFile(filepath.Join(r.dir, "leases", name), nil, 0o600)
}

func (r registry) dropLease(name string) error {
	err := os.Remove(filepath.Join(r.dir, "leases", name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// liveLeases removes the leases of processes that are gone and returns
// how many remain.
func (r registry) liveLeases() (int, error) {
	dir := filepath.Join(r.dir, "leases")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(strings.SplitN(e.Name(), ".", 2)[0])
		if err == nil && pid > 0 && !gone(pid) {
			n++
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, err
		}
	}
	return n, nil
}

// owner returns the process id of the ctxguard a run started at the
// address, or 0.
func (r registry) owner() int {
	b, err := os.ReadFile(filepath.Join(r.dir, "server"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// setOwner records pid as the ctxguard a run started (0: none).
func (r registry) setOwner(pid int) error {
	p := filepath.Join(r.dir, "server")
	if pid == 0 {
		err := os.Remove(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// gone reports whether process pid has ended: it does not exist, or it
// is a zombie (ended, not yet reaped by its parent).
func gone(pid int) bool {
	err := syscall.Kill(pid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, rerr := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if rerr != nil {
		return false // no /proc: kill(2) said it exists
	}
	// pid (comm) STATE ...: comm may hold spaces and parentheses.
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z' || b[i+2] == 'X'
	}
	return false
}
