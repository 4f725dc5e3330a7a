package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/ctxguard/ctxguard/internal/launch"
)

const runHelp = `usage: ctxguard run [flags] [--] CLIENT [ARGS...]

Runs CLIENT with its model requests going through ctxguard, for that
process only; no config file of the client's is read or written:
  claude     ANTHROPIC_BASE_URL=http://ADDR
  codex      -c openai_base_url="http://ADDR/v1" before ARGS
  opencode   ANTHROPIC_BASE_URL and OPENAI_BASE_URL=http://ADDR/v1
  gemini     GOOGLE_GEMINI_BASE_URL=http://ADDR
  other      ANTHROPIC_BASE_URL=http://ADDR, OPENAI_BASE_URL=http://ADDR/v1

It uses the ctxguard serving on the listen address, or starts one there
with the same flags (on a free port when another program holds the
address), its log in $XDG_STATE_HOME/ctxguard/run (default
~/.local/state/ctxguard/run). A ctxguard that runs started is stopped
when the last run using it exits; one started otherwise is left alone.
Signals, the standard streams and the exit status pass through (128+n
when signal n ended the client).
` + commonHelp

// clientError is a `ctxguard run` failure with the status to exit with
// (127: the client was not found).
type clientError struct {
	code int
	err  error
}

func (e clientError) Error() string { return e.err.Error() }

// runClient is `ctxguard run`: it returns the client's exit status.
func runClient(args []string, stdout, stderr io.Writer) (int, error) {
	var command []string
	cfg, err := loadConfig("run", runHelp, args, stdout, nil, &command)
	if err != nil {
		return 0, err
	}
	if len(command) == 0 {
		return 0, usageError{cmd: "ctxguard run", err: fmt.Errorf("name the client to start: ctxguard run [flags] -- CLIENT [ARGS...]")}
	}
	// The flags go to the serve a run starts, as they were given.
	serveArgs := args[:len(args)-len(command)]
	if n := len(serveArgs); n > 0 && serveArgs[n-1] == "--" {
		serveArgs = serveArgs[:n-1]
	}
	if !launch.Supported {
		return launch.Run(context.Background(), launch.Options{})
	}
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("cannot find the ctxguard binary to start: %w", err)
	}
	state, err := launch.DefaultStateDir(os.Getenv)
	if err != nil {
		return 0, fmt.Errorf("no folder for ctxguard run's state (set XDG_STATE_HOME): %w", err)
	}
	code, err := launch.Run(context.Background(), launch.Options{
		Command: command,
		Environ: os.Environ(),
		Stdin:   os.Stdin, Stdout: stdout, Stderr: stderr,
		Exe:       exe,
		ServeArgs: serveArgs,
		Listen:    cfg.Listen,
		StateDir:  state,
		Token:     cfg.AuthToken,
		Dashboard: cfg.Dashboard.Enabled && cfg.Local.Access != "off",
		Drain:     cfg.Timeouts.Drain,
	})
	if err != nil {
		return 0, clientError{code: code, err: err}
	}
	return code, nil
}
