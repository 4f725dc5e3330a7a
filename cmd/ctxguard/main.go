// Command ctxguard runs the ctxguard proxy and its tools.
//
//	ctxguard serve    [--listen ADDR] [--upstream URL] [--config FILE] ...
//	ctxguard config   [--config FILE]   print the effective configuration
//	ctxguard replay   [flags] [PATH...]  what ctxguard would save on transcripts
//	ctxguard bench    [flags]            the overhead load test
//
// Flags override the environment (CTXGUARD_LISTEN, CTXGUARD_UPSTREAM,
// CTXGUARD_DATA_DIR), which overrides the config file, which overrides the
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
	"syscall"
	"time"

	"github.com/ctxguard/ctxguard"
	"github.com/ctxguard/ctxguard/config"
)

const usage = `usage: ctxguard <command> [flags]

commands:
  serve    run the proxy (default 127.0.0.1:8787 -> https://api.anthropic.com)
  config   print the effective configuration as YAML
  replay   what-if report: replay session transcripts through the pipeline
  bench    measure ctxguard's overhead (loopback load test); --json, --benchfmt

run "ctxguard <command> -h" for the flags of a command
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "serve":
		err = serve(args)
	case "config":
		err = printConfig(args, os.Stdout)
	case "replay":
		err = replay(args)
	case "bench":
		err = bench(args)
	case "-h", "--help", "help":
		fmt.Fprint(os.Stdout, usage)
	default:
		fmt.Fprintf(os.Stderr, "ctxguard: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ctxguard:", err)
		os.Exit(1)
	}
}

// loadConfig parses the common flags and returns the effective config.
func loadConfig(name string, args []string) (config.Config, error) {
	fs := flag.NewFlagSet("ctxguard "+name, flag.ContinueOnError)
	file := fs.String("config", "", "YAML config file")
	listen := fs.String("listen", "", "listen address (default 127.0.0.1:8787)")
	upstream := fs.String("upstream", "", "upstream API base URL (default https://api.anthropic.com)")
	dataDir := fs.String("data-dir", "", "data directory for the embedded store")
	dryRun := fs.Bool("dry-run", false, "compute rewrites and log them, forward the original")
	level := fs.String("log-level", "", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return config.Config{}, err
	}
	if fs.NArg() > 0 {
		return config.Config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg, err := config.Load(*file)
	if err != nil {
		return cfg, err
	}
	cfg.ApplyEnv(os.Getenv)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["listen"] {
		cfg.Listen = *listen
	}
	if set["upstream"] {
		cfg.Upstream = *upstream
	}
	if set["data-dir"] {
		cfg.DataDir = *dataDir
	}
	if set["dry-run"] {
		cfg.DryRun = *dryRun
	}
	if set["log-level"] {
		cfg.Log.Level = *level
	}
	if err := cfg.ExpandPaths(); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

func printConfig(args []string, w io.Writer) error {
	cfg, err := loadConfig("config", args)
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

func newLogger(cfg config.Config) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: lv}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

func serve(args []string) error {
	cfg, err := loadConfig("serve", args)
	if err != nil {
		return err
	}
	log := newLogger(cfg)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	// With port 0 the real address is known only now; stubs name it.
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
	defer h.Close()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go g.Sweep(ctx, time.Hour)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening on http://"+cfg.Listen, "upstream", cfg.Upstream, "data_dir", cfg.DataDir, "dry_run", cfg.DryRun)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
