package main

import (
	"fmt"
	"github.com/ctxguard/ctxguard/model"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/gemini"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	replaypkg "github.com/ctxguard/ctxguard/tools/replay"
	"github.com/ctxguard/ctxguard/tools/transcript"
)

const replayUsage = `usage: ctxguard replay [flags] [PATH...]

Replays agent session transcripts through ctxguard's pipeline and reports
what it would have saved: tokens, cache-aware cost (time-aware: a request
that comes after its prompt cache expired writes it again), money, edit events,
validity, and what the agent keeps (quote retention; the facts of the
messages each compaction replaced that its summary still names), per
session and in total.

PATH is a Claude Code transcript (.jsonl), a Codex CLI rollout
(rollout-*.jsonl, replayed as Responses API requests and priced at
OpenAI's rates), a Gemini CLI session (~/.gemini/tmp/*/chats/
session-*.jsonl, replayed as Gemini API requests), a SWE-agent trajectory
(.traj) or a folder of them (searched recursively); default
~/.claude/projects, ~/.codex/sessions and ~/.gemini/tmp, those that
exist. Flags may come before or after the paths.

flags:
`

// runReplay is replay with its streams given; tty says whether stderr is
// a terminal (the progress bar is drawn only then, or with --progress).
func runReplay(args []string, stdout, stderr io.Writer, tty bool) error {
	fs := newFlagSet("ctxguard replay", replayUsage, stdout)
	cfgFile := fs.String("config", "", "ctxguard YAML config, loaded as serve loads it (default: the embedded defaults)")
	off := fs.Bool("off", false, "switch every rule off (a baseline: every ratio must be 1)")
	profile := fs.String("profile", "", "JSON profile with the system prompt, tools and settings replayed requests carry (default: the built-in one)")
	modelID := fs.String("model", "", "send every request as this model (default: each answer's model)")
	prices := fs.String("prices", "", "YAML or JSON price table, merged over the built-in one (model: {input, cache_write, cache_read} in USD per MTok)")
	asJSON := fs.Bool("json", false, "write the report as JSON to stdout")
	chart := fs.String("chart", "", "write a chart: FILE.svg (the largest sessions), or a folder (existing, or ending in /) for one SVG per session")
	progress := fs.Bool("progress", false, "draw the progress bar even when stderr is not a terminal")
	perRequest := fs.Bool("requests", false, "list every request under its session in the table")
	noSide := fs.Bool("no-sidechains", false, "leave out subagent (Task) transcripts")
	window := fs.String("window", "", "set every model's context window to N tokens (64k, 200000, 1m) and report requests above the overflow line (window − max output)")
	maxOut := fs.String("max-output", "", "with --window: every model's maximum output, at most N tokens (default: a eighth of the window)")
	cacheTTL := fs.String("cache-ttl", "provider", "how long the prompt cache keeps a prefix after its last use, against the transcripts' times: provider (each provider's lifetime, or the longer one a request asks for), never (the time-blind cost of earlier versions), or a duration such as 5m")
	protoName := fs.String("protocol", "", "write Claude Code and SWE-agent sessions as requests of this API: anthropic (default), responses, chat or gemini (Codex rollouts can be Responses or Gemini requests, Gemini CLI sessions only Gemini requests)")
	// Flags may come before and after the paths.
	var paths []string
	for rest := args; ; {
		if err := parseFlags(fs, rest); err != nil {
			return err
		}
		rest = fs.Args()
		if len(rest) == 0 {
			break
		}
		paths, rest = append(paths, rest[0]), rest[1:]
	}
	if len(paths) == 0 {
		home, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("no PATH given and no home directory: %w", err)
		}
		defs := []string{filepath.Join(home, ".claude", "projects"), filepath.Join(home, ".codex", "sessions"), filepath.Join(home, ".gemini", "tmp")}
		for _, d := range defs {
			if _, err := os.Stat(d); err == nil {
				paths = append(paths, d)
			}
		}
		if len(paths) == 0 {
			return fmt.Errorf("no PATH given and neither %s exists", strings.Join(defs, " nor "))
		}
	}

	cfg, err := config.Load(*cfgFile)
	if err != nil {
		return err
	}
	cfg.ApplyEnv(os.Getenv)
	if *off {
		cfg = replaypkg.Off(cfg)
	}
	var win, line int
	if *window != "" {
		w, err := model.ParseAmount(*window)
		if err != nil || w.IsFraction() || w.TokenCount() <= 0 {
			return fmt.Errorf("--window %q: want a token count such as 64k", *window)
		}
		mo := 0
		if *maxOut != "" {
			m, err := model.ParseAmount(*maxOut)
			if err != nil || m.IsFraction() || m.TokenCount() <= 0 || m.TokenCount() >= w.TokenCount() {
				return fmt.Errorf("--max-output %q: want a token count below the window", *maxOut)
			}
			mo = m.TokenCount()
		}
		win = w.TokenCount()
		cfg, line = replaypkg.WithWindow(cfg, win, mo)
	}
	pipe, err := replaypkg.GuardPipeline(cfg)
	if err != nil {
		return err
	}
	ttl, err := replaypkg.ParseCacheTTL(*cacheTTL)
	if err != nil {
		return fmt.Errorf("--cache-ttl: %w", err)
	}
	build := transcript.BuildOptions{Model: *modelID}
	switch *protoName {
	case "", transcript.ProtoAnthropic:
	case transcript.ProtoResponses:
		build.Protocol = transcript.ProtoResponses
		pipe.Protocols = replaypkg.As(responses.Protocol)
	case transcript.ProtoChat:
		build.Protocol = transcript.ProtoChat
		pipe.Protocols = replaypkg.As(chat.Protocol)
	case transcript.ProtoGemini:
		build.Protocol = transcript.ProtoGemini
		pipe.Protocols = replaypkg.As(gemini.Protocol)
	default:
		return fmt.Errorf("--protocol %q: want anthropic, responses, chat or gemini", *protoName)
	}
	if *profile != "" {
		p, err := transcript.LoadProfile(*profile)
		if err != nil {
			return err
		}
		build.Profile = &p
	}
	table := replaypkg.DefaultPrices()
	if *prices != "" {
		if table, err = replaypkg.LoadPrices(*prices, table); err != nil {
			return err
		}
	}
	sessions, err := transcript.Load(paths, transcript.Options{SkipSidechains: *noSide})
	if err != nil {
		return err
	}
	if len(sessions) == 0 {
		return fmt.Errorf("no sessions found in %s", strings.Join(paths, ", "))
	}

	opt := replaypkg.RunOptions{Pipeline: pipe, Build: build, Prices: table, Window: win, Line: line, CacheTTL: ttl}
	var bar *replaypkg.ProgressBar
	if tty || *progress {
		bar = &replaypkg.ProgressBar{W: stderr}
		opt.Progress = bar.Update
	}
	rep, err := replaypkg.Run(sessions, opt)
	if bar != nil {
		bar.Done()
	}
	if err != nil {
		return err
	}
	if *chart != "" {
		files, err := replaypkg.WriteCharts(rep, *chart)
		if err != nil {
			return err
		}
		for _, f := range files {
			fmt.Fprintf(stderr, "chart: %s\n", f)
		}
	}
	if *asJSON {
		return rep.WriteJSON(stdout)
	}
	return rep.WriteText(stdout, replaypkg.TextOptions{Requests: *perRequest})
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
