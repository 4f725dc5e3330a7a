// Command ctxguard runs the ctxguard proxy and its tools.
//
//	ctxguard serve    [--listen ADDR] [--upstream URL] [--config FILE] ...
//	ctxguard run      [flags] -- CLIENT [ARGS...]  a client through ctxguard
//	ctxguard config   [--config FILE]   print the effective configuration
//	ctxguard replay   [flags] [PATH...]  what ctxguard would save on transcripts
//	ctxguard bench    [flags]            the overhead load test
//	ctxguard version                     print the version
//
// Flags override the environment (CTXGUARD_LISTEN, CTXGUARD_UPSTREAM,
// CTXGUARD_DATA_DIR, CTXGUARD_AUTH_TOKEN), which overrides the config file, which overrides the
// embedded defaults.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ctxguard/ctxguard"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/suggest"
)

const usage = `usage: ctxguard <command> [flags]

commands:
  serve    run the proxy (default 127.0.0.1:8787 -> https://api.anthropic.com)
  run      run a client through ctxguard: ctxguard run [flags] -- claude|codex|opencode|gemini|CMD [ARGS...]
  config   print the effective configuration as YAML
  replay   what-if report: replay session transcripts through the pipeline
  bench    measure ctxguard's overhead (loopback load test); --json, --benchfmt
  version  print the version

run "ctxguard <command> -h" for the flags of a command
`

// commands are the commands run knows, for "did you mean".
var commands = []string{"serve", "run", "config", "replay", "bench", "version", "help"}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run runs one command and returns the exit status: 0 on success and for
// -h, 2 for a usage error (unknown command, bad flag), 1 for a failure.
// Every error is printed once, to stderr.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch cmd, args := args[0], args[1:]; cmd {
	case "serve":
		err = serve(args, stdout, stderr)
	case "run":
		var code int
		if code, err = runClient(args, stdout, stderr); err == nil {
			return code
		}
		if ce, ok := err.(clientError); ok {
			fmt.Fprintln(stderr, "ctxguard run:", ce.err)
			return ce.code
		}
	case "config":
		err = printConfig(args, stdout)
	case "replay":
		err = runReplay(args, stdout, stderr, isTerminal(stderr))
	case "bench":
		err = bench(args, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, version())
	case "-h", "--help", "-help", "help":
		fmt.Fprint(stdout, usage)
	default:
		hint := ""
		if s, ok := suggest.Closest(cmd, commands); ok {
			hint = fmt.Sprintf(" (did you mean %q?)", s)
		}
		fmt.Fprintf(stderr, "ctxguard: unknown command %q%s\n\n%s", cmd, hint, usage)
		return 2
	}
	var ue usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %v\nrun \"%s -h\" for its flags\n", ue.cmd, ue.err, ue.cmd)
		return 2
	}
	fmt.Fprintln(stderr, "ctxguard:", err)
	return 1
}

// errHelp is returned by parseFlags after it printed a command's usage for
// -h: the command did what was asked.
var errHelp = errors.New("help printed")

// usageError is a bad command line: printed once, with a hint, exit 2.
type usageError struct {
	cmd string
	err error
}

func (e usageError) Error() string { return e.cmd + ": " + e.err.Error() }

// newFlagSet returns a flag set whose -h prints help (a description, then
// the flags) to stdout.
func newFlagSet(name, help string, stdout io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fs.SetOutput(stdout)
		fmt.Fprint(stdout, help)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs without letting package flag print
// anything: -h prints the usage (errHelp), a bad flag comes back as a
// usageError for run to print once.
func parseFlags(fs *flag.FlagSet, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
		return errHelp
	case err != nil:
		return usageError{cmd: fs.Name(), err: flagHint(fs, err)}
	}
	return nil
}

// flagHint adds to the error of an unknown flag the flag of fs it was
// probably meant to be.
func flagHint(fs *flag.FlagSet, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if s, ok := suggest.Closest(strings.TrimLeft(name, "-"), names); ok {
		return fmt.Errorf("%w (did you mean --%s?)", err, s)
	}
	return err
}

// version reports the module version, the VCS revision when the binary
// was built with it, and the Go version.
func version() string {
	v, rev, dirty := "(devel)", "", false
	goVersion := runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	out := "ctxguard " + v
	if rev != "" {
		out += " " + rev[:min(12, len(rev))]
		if dirty {
			out += "+dirty"
		}
	}
	return out + " " + goVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
}

const commonHelp = `
Flags override the environment (CTXGUARD_LISTEN, CTXGUARD_UPSTREAM,
CTXGUARD_DATA_DIR, CTXGUARD_AUTH_TOKEN), which overrides the config file,
which overrides the embedded defaults.

flags:
`

const serveHelp = `usage: ctxguard serve [flags]

Runs the proxy: point a client's API base URL at it, e.g.
  ANTHROPIC_BASE_URL=http://127.0.0.1:8787 claude
At start-up it prints the line for each client and the dashboard's URL,
and warns about an upstream it cannot reach.

SIGTERM drains: no new connections, the requests in flight end (at most
timeouts.drain). SIGHUP reloads the configuration (see docs/operations.md).
` + commonHelp

const configHelp = `usage: ctxguard config [flags]
       ctxguard config --init [FILE]

Prints the effective configuration as YAML (secrets redacted). With
--init, writes a commented starter file instead: to FILE, else to the
file --config names, else to the default file
($XDG_CONFIG_HOME/ctxguard/config.yaml or ~/.config/ctxguard/config.yaml),
which serve reads when started without --config. It never replaces a
file.
` + commonHelp

// noConfigFile is what serve logs as its configuration file when it
// reads none.
const noConfigFile = "none (the embedded defaults)"

// serveFlags are serve's own flags, beside the common ones, and what
// loadConfig found.
type serveFlags struct {
	exitWithParent string
	// file is the configuration file loadConfig read ("" for none).
	file string
}

// loadConfig parses the common flags (and, for serve, sf's) and returns
// the effective config, paths expanded and validated. The arguments after
// the flags go to rest; with rest nil they are an error.
func loadConfig(name, help string, args []string, stdout io.Writer, sf *serveFlags, rest *[]string) (config.Config, error) {
	fs := newFlagSet("ctxguard "+name, help, stdout)
	cf := commonFlags(fs)
	if sf != nil {
		fs.StringVar(&sf.exitWithParent, "exit-with-parent", "auto", "exit when the parent process does: true, false, or auto (true when started by go run)")
	}
	if err := parseFlags(fs, args); err != nil {
		return config.Config{}, err
	}
	if rest != nil {
		*rest = fs.Args()
	} else if fs.NArg() > 0 {
		return config.Config{}, usageError{cmd: fs.Name(), err: fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	cfg, file, err := cf.load(fs)
	if sf != nil {
		sf.file = file
	}
	return cfg, err
}

// common are the flags every command that loads the configuration has.
type common struct {
	file, listen, upstream, dataDir, level, format *string
	dryRun                                         *bool
}

// commonFlags defines the common flags on fs.
func commonFlags(fs *flag.FlagSet) *common {
	var c common
	c.file = fs.String("config", "", "YAML config file (default $XDG_CONFIG_HOME/ctxguard/config.yaml or ~/.config/ctxguard/config.yaml, when it exists; --config= reads none)")
	c.listen = fs.String("listen", "", "listen address (default 127.0.0.1:8787)")
	c.upstream = fs.String("upstream", "", "one upstream base URL for every API, without /v1 (default: https://api.anthropic.com and https://api.openai.com)")
	c.dataDir = fs.String("data-dir", "", "data directory for the embedded store (default ~/.local/share/ctxguard)")
	c.dryRun = fs.Bool("dry-run", false, "compute rewrites and log them, forward the original")
	c.level = fs.String("log-level", "", "debug, info, warn or error (debug adds the pass decisions to each exchange's line)")
	c.format = fs.String("log-format", "", "text or json (json: one JSON object per line, one line per exchange)")
	return &c
}

// load returns the effective config, paths expanded and validated, from
// the flags of fs once parsed: the file (--config, else the default file
// when it exists), then the environment, then the flags. It also returns
// the file it read ("" for none).
func (c *common) load(fs *flag.FlagSet) (config.Config, string, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	file := configFile(*c.file, set["config"])
	cfg, err := config.Load(file)
	if err != nil {
		return cfg, file, err
	}
	cfg.ApplyEnv(os.Getenv)
	if set["listen"] {
		cfg.Listen = *c.listen
	}
	if set["upstream"] {
		cfg.Upstreams = config.AllUpstreams(*c.upstream)
	}
	if set["data-dir"] {
		cfg.DataDir = *c.dataDir
	}
	if set["dry-run"] {
		cfg.DryRun = *c.dryRun
	}
	if set["log-level"] {
		cfg.Log.Level = *c.level
	}
	if set["log-format"] {
		cfg.Log.Format = *c.format
	}
	if err := cfg.ExpandPaths(); err != nil {
		return cfg, file, err
	}
	return cfg, file, cfg.Validate()
}

func printConfig(args []string, w io.Writer) error {
	fs := newFlagSet("ctxguard config", configHelp, w)
	cf := commonFlags(fs)
	initFile := fs.Bool("init", false, "write a commented starter file (every setting at its default) to FILE, --config's file or the default file; never replaces one")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *initFile {
		return initConfig(fs, *cf.file, w)
	}
	if fs.NArg() > 0 {
		return usageError{cmd: fs.Name(), err: fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	cfg, _, err := cf.load(fs)
	if err != nil {
		return err
	}
	b, err := cfg.YAML()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// newLogger returns the logger cfg describes; its level is lv's, set
// from cfg.
func newLogger(cfg config.Config, w io.Writer, lv *slog.LevelVar) *slog.Logger {
	_ = lv.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: lv}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func serve(args []string, stdout, stderr io.Writer) error {
	var sf serveFlags
	cfg, err := loadConfig("serve", serveHelp, args, stdout, &sf, nil)
	if err != nil {
		return err
	}
	exitWithParent, err := parentWatch(sf.exitWithParent)
	if err != nil {
		return usageError{cmd: "ctxguard serve", err: err}
	}
	var level slog.LevelVar
	log := newLogger(cfg, stderr, &level)
	for _, w := range cfg.Warnings() {
		log.Warn("config: " + w)
	}
	if limit, set := memoryLimit(cfg.Limits); set {
		log.Debug("soft memory limit", "bytes", limit)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	// With port 0 the real address is known only now; stubs name it.
	configuredListen := cfg.Listen
	cfg.Listen = ln.Addr().String()
	g, err := ctxguard.New(cfg, ctxguard.WithLogger(log))
	if err != nil {
		ln.Close()
		return err
	}
	defer g.Close()
	h, err := g.Handler()
	if err != nil {
		ln.Close()
		return err
	}
	live := &liveProxy{}
	live.p.Store(h)
	defer func() { live.p.Load().Close() }()
	t := cfg.Timeouts
	var open conns
	srv := &http.Server{
		Handler:           live,
		ReadHeaderTimeout: t.RequestHeader,
		IdleTimeout:       t.KeepAlive,
		// No ReadTimeout or WriteTimeout: bodies and streamed answers
		// are bounded by the proxy's own timeouts, which measure
		// silence rather than total time.
		ErrorLog:  slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnState: open.track,
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if exitWithParent {
		ctx = watchParent(ctx, log, time.Second)
	}
	go g.Maintain(ctx)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	attrs := []any{"anthropic", config.RedactURL(cfg.Upstreams.Anthropic), "openai", config.RedactURL(cfg.Upstreams.OpenAI), "gemini", config.RedactURL(cfg.Upstreams.Gemini), "routes", len(cfg.Routes)}
	if cfg.Store != "" {
		attrs = append(attrs, "store", config.RedactURL(cfg.Store))
	} else {
		attrs = append(attrs, "data_dir", cfg.DataDir)
	}
	file := sf.file
	if file == "" {
		file = noConfigFile
	}
	log.Info("listening on http://"+cfg.Listen, append(attrs, "dry_run", cfg.DryRun, "config", file)...)
	if host, _, _ := net.SplitHostPort(cfg.Listen); !config.LoopbackHost(host) {
		log.Warn("listening beyond loopback: other machines can reach this proxy; every request must carry the auth token in X-Ctxguard-Token", "listen", cfg.Listen)
	}
	fmt.Fprint(stdout, clientHints(cfg))
	probe := prober{dial: (&net.Dialer{}).DialContext, proxy: http.ProxyFromEnvironment, timeout: probeTimeout}
	go probe.probeUpstreams(ctx, cfg, log)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	r := &reloader{args: args, listen: configuredListen, g: g, proxy: live, level: &level, log: log}
	for ctx.Err() == nil {
		select {
		case err := <-errc:
			return err
		case <-hup:
			r.reload()
		case <-ctx.Done():
		}
	}
	stop() // from now on a second SIGINT or SIGTERM ends the process at once
	return drain(srv, &open, log, context.Cause(ctx), g.Config().Timeouts.Drain)
}

// conns counts a server's open connections (its ConnState hook).
type conns struct{ open atomic.Int64 }

func (c *conns) track(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		c.open.Add(1)
	case http.StateClosed, http.StateHijacked:
		c.open.Add(-1)
	}
}

// drain stops srv gracefully: it stops accepting connections at once,
// closes the idle ones and waits for the requests in flight (streamed
// answers included) to end, at most timeout (0: no limit). What is still
// open then is closed, and drain returns an error, so that serve exits
// with status 1.
func drain(srv *http.Server, c *conns, log *slog.Logger, cause error, timeout time.Duration) error {
	log.Info("draining: no new connections; waiting for the requests in flight (a second signal ends them at once)",
		"reason", cause, "open_connections", c.open.Load(), "drain_timeout", timeout)
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	err := srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		n := c.open.Load()
		srv.Close()
		log.Error("drain timeout: closed the connections still in flight", "connections", n, "drain_timeout", timeout)
		return fmt.Errorf("drain timeout (%v): %d connections were still in flight and were closed", timeout, n)
	}
	if err != nil {
		return err
	}
	log.Info("drained: every request in flight ended; exiting")
	return nil
}

// runtimeOverhead is what serve's memory limit allows beyond the bytes
// the limits bound: the caches (blob and stub memos, the HTML cache: about
// 40 MiB at most), pools and the runtime itself.
const runtimeOverhead = 128 << 20

// memoryLimit sets the Go runtime's soft memory limit to what the limits
// bound (request bytes in flight, remembered sessions) plus
// runtimeOverhead, so that garbage does not push the process far past
// what it holds live: the collector works harder as the heap nears the
// limit instead of letting it grow to twice the live bytes. A GOMEMLIMIT
// in the environment wins. It reports the limit and whether it set it.
func memoryLimit(l config.Limits) (int64, bool) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1), false
	}
	limit := l.MaxBuffered + l.SessionMemory + runtimeOverhead
	debug.SetMemoryLimit(limit)
	return limit, true
}
