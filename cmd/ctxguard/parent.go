package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// `go run ./cmd/ctxguard serve &` runs ctxguard as a child of the go
// command, which does not pass SIGTERM on: `kill %1` ends go and leaves
// ctxguard holding the port. So serve can watch its parent and shut down
// when it is gone: always with --exit-with-parent=true, and by default
// (auto) when the binary is one `go run` built.

// parentWatch decides, from the --exit-with-parent value, whether serve
// watches its parent.
func parentWatch(v string) (bool, error) {
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	case "auto", "":
		exe, err := os.Executable()
		return err == nil && builtByGoRun(exe), nil
	}
	return false, fmt.Errorf("--exit-with-parent: %q must be true, false or auto", v)
}

// builtByGoRun reports whether exe is a binary `go run` built: it lives
// in a go-build temporary folder ($TMPDIR/go-build<digits>/.../exe/NAME).
func builtByGoRun(exe string) bool {
	dir := filepath.Dir(exe)
	if filepath.Base(dir) != "exe" {
		return false
	}
	for d := filepath.Dir(dir); d != filepath.Dir(d); d = filepath.Dir(d) {
		if strings.HasPrefix(filepath.Base(d), "go-build") {
			return true
		}
	}
	return false
}

// watchParent returns a context that is cancelled when the process's
// parent changes (the parent exited and the process was re-parented),
// checked every interval.
func watchParent(ctx context.Context, log *slog.Logger, every time.Duration) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	ppid := os.Getppid()
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if os.Getppid() != ppid {
					log.Info("parent process exited; shutting down", "parent_pid", ppid)
					cancel(fmt.Errorf("parent process %d exited", ppid))
					return
				}
			}
		}
	}()
	return ctx
}
