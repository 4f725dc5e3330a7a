package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ctxguard/ctxguard/tools/loadtest"
)

// bench runs the overhead benchmark (tools/loadtest) and prints its
// report on stdout: as text, with --json as JSON, with --benchfmt in the
// Go benchmark format for benchstat. Progress goes to stderr. Unless both
// --ctxguard-bin and --passthrough-bin are given, it must run inside the
// ctxguard module: it builds ctxguard serve and the passthrough proxy from
// source.
//
//	go run ./cmd/ctxguard bench [--duration 3m] [--sizes 100KB,1MB,5MB] [--concurrency 1,8] [--modes sse,json] [--protocols anthropic,responses,chat] [--ctxguard-instances 2] [--no-session-header] [--json | --benchfmt] ...
const benchUsage = `usage: ctxguard bench [flags]

Measures ctxguard's overhead: a loopback load test of a real session's
requests, in each protocol as its client sends them (Claude Code, Codex CLI,
opencode), against a fake upstream directly, through a plain reverse proxy
and through ctxguard serve.

flags:
`

func bench(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ctxguard bench", benchUsage, stdout)
	duration := fs.Duration("duration", 3*time.Minute, "measuring time, split over the cases (warm-up and setup on top)")
	maxReq := fs.Int("max-requests", 2000, "most measured requests per target and case")
	warmup := fs.Int("warmup", 3, "warm-up rounds per case, not counted")
	sizes := fs.String("sizes", "100KB,1MB,5MB", "request body sizes")
	conc := fs.String("concurrency", "1,8", "numbers of concurrent clients")
	modes := fs.String("modes", "sse,json", "answer modes: sse, json")
	protos := fs.String("protocols", "anthropic,responses,chat", "APIs: anthropic (Messages), responses, chat (Chat Completions)")
	idleWait := fs.Duration("idle-wait", 0, "after the run, wait this long sending nothing and measure ctxguard's RSS again (e.g. 6m: past limits.session_idle)")
	delay := fs.Duration("upstream-delay", 0, "fake upstream's delay before its response headers")
	eventDelay := fs.Duration("event-delay", 0, "fake upstream's delay between SSE events")
	sessions := fs.String("sessions", "", "comma-separated transcript files or folders (default: shared/data/claude-code beside the module, else tools/transcript/testdata/claude-code)")
	session := fs.String("session", "", "session ID prefix to build bodies from (default: the largest)")
	root := fs.String("root", "", "module root (default: found from the working directory)")
	ctBin := fs.String("ctxguard-bin", "", "prebuilt ctxguard binary (with --passthrough-bin; default: build from the module)")
	ptBin := fs.String("passthrough-bin", "", "prebuilt passthrough binary (tools/loadtest/cmd/passthrough)")
	ctEnv := fs.String("ctxguard-env", "", "comma-separated KEY=VALUE added to ctxguard's environment only (e.g. GOGC=200)")
	ctN := fs.Int("ctxguard-instances", 1, "ctxguard serve processes with the same configuration, sent requests round robin (name a shared store with --ctxguard-config)")
	ctCfg := fs.String("ctxguard-config", "", "a YAML file appended to ctxguard's configuration (every pass on), e.g. to turn the dashboard and metrics off")
	noHeader := fs.Bool("no-session-header", false, "send the requests without the client's session header, as SDK apps do")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	benchfmt := fs.Bool("benchfmt", false, "print the report in the Go benchmark format (for benchstat)")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{cmd: fs.Name(), err: fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if *ctN < 1 {
		return usageError{cmd: fs.Name(), err: fmt.Errorf("--ctxguard-instances %d: want at least 1", *ctN)}
	}
	opt := loadtest.Options{Root: *root, SessionID: *session, Duration: *duration, MaxRequests: *maxReq, Warmup: *warmup,
		IdleWait: *idleWait, UpstreamDelay: *delay, EventDelay: *eventDelay, CtxguardBin: *ctBin, PassthroughBin: *ptBin,
		CtxguardInstances: *ctN, NoSessionHeader: *noHeader}
	var err error
	if opt.Sizes, err = loadtest.ParseSizes(*sizes); err != nil {
		return err
	}
	if opt.Concurrency, err = loadtest.ParseInts(*conc); err != nil {
		return err
	}
	if opt.Modes, err = loadtest.ParseModes(*modes); err != nil {
		return err
	}
	if opt.Protocols, err = loadtest.ParseProtocols(*protos); err != nil {
		return err
	}
	if *sessions != "" {
		opt.Sessions = strings.Split(*sessions, ",")
	}
	if *ctCfg != "" {
		b, err := os.ReadFile(*ctCfg)
		if err != nil {
			return err
		}
		opt.CtxguardConfig = string(b)
	}
	if *ctEnv != "" {
		opt.CtxguardEnv = strings.Split(*ctEnv, ",")
	}
	if !*quiet {
		opt.Progress = stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := loadtest.Run(ctx, opt)
	if err != nil {
		return err
	}
	switch {
	case *asJSON:
		return rep.WriteJSON(stdout)
	case *benchfmt:
		return rep.WriteBenchfmt(stdout)
	}
	return rep.WriteText(stdout)
}
