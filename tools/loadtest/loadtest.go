// Package loadtest is ctxguard's overhead benchmark: a reproducible load
// test on loopback (127.0.0.1 only), bounded in time and in requests, that
// measures what ctxguard adds to a request's latency compared with going
// straight to the upstream and with a plain Go reverse proxy. The command
// is "go run ./cmd/ctxguard bench" (see its -h).
//
// # Setup
//
// Three targets get the same requests:
//
//   - direct: the client talks to the fake upstream itself;
//   - passthrough: a plain httputil.ReverseProxy (FlushInterval -1), built
//     from ./tools/loadtest/cmd/passthrough and run as a process of its
//     own; like ctxguard it enables HTTP/1 full duplex, without which the
//     stock proxy cuts a few percent of SSE answers under load
//     (golang/go#40747) and the baseline would count failures;
//   - ctxguard: "ctxguard serve" built from ./cmd/ctxguard, run as a
//     process of its own with every pass on (compress, persist, clear, at
//     their shipped settings), its default log level, and a fresh data
//     folder in a temporary directory. With Options.CtxguardInstances
//     above 1 it is that many such processes (a data folder each, one
//     configuration, which can name a shared store), and the client sends
//     each request to the next one, round robin, as a balancer in front
//     of a fleet would: the target is reported as "ctxguard×N", its peak
//     RSS and CPU time summed over the processes and given per process.
//
// The fake upstream answers POST /v1/messages in the API's wire format,
// as JSON or as an SSE stream (answers rendered once by anthropictest: a
// thinking block, text, a Bash tool call), after a configurable delay. It
// runs inside the harness process, which is the fairest place for it:
// its cost is the same code in the same process for all three targets; it
// allocates nothing per request (pooled read buffer, precomputed
// answers), so it adds no garbage-collection work that could fall on one
// target more than another; and it shares the client's monotonic clock,
// which lets the harness measure the first-byte relay exactly (the upstream
// notes when it writes the first answer byte, the client when it reads
// it). Each proxy in its own process means its peak RSS (VmHWM of
// /proc/PID/status) and CPU time (utime + stime of /proc/PID/stat) are its
// own, and both proxies pay the same two loopback hops, so the passthrough
// differs from ctxguard only in the work ctxguard does.
//
// Request bodies are rebuilt by transcript.Builder from a real Claude Code
// session (DefaultSessions; NewSource picks the largest): the session's
// first user message, then its tool rounds in order, repeated with fresh
// tool ids ("_r1", "_r2", ...) until the body is closest to the target
// size, so ctxguard parses, compresses and clears as much as it would in a
// session that long. Each protocol gets the same session in its own shape
// (transcript.BuildOptions.Protocol): Messages requests as Claude Code
// sends them, Responses requests as Codex does, Chat Completions requests
// as opencode does, each with its client's headers. Each concurrent
// worker is a session of its own (its own session id in the body and in
// the client's session header) and sends the same body every time, as a
// client re-sending its history does: every block was seen before, which
// is true of all but the newest turn of a real session. Bodies are
// deterministic.
//
// # Measurement
//
// A case is one body size, concurrency and answer mode; cases run from
// the fewest bytes in flight (size × concurrency) up. In each round of a case every target gets one
// slot, in an order that cycles through all six permutations, so drift and
// noise from other work on the machine fall on all targets alike. In a
// slot, each of the case's workers sends its requests one after the other
// (one request at concurrency 1, three at higher concurrency), all to the
// same target. The first rounds of a case are warm-up and not counted;
// then rounds run until the case's share of the time budget or the
// request cap is reached.
//
// Per request the client records the latency (request start to the last
// answer byte), the time to first byte (request start to the first answer
// byte: for ctxguard it includes reading and rewriting the request), and
// the relay delay (the upstream writing the first answer byte to the
// client reading it: what a hop adds on the answer's way back). The
// report gives their percentiles, what the passthrough and ctxguard add
// over direct and ctxguard over the passthrough (differences of
// percentiles), each target's throughput (successful requests per second
// of the time its slots took), the proxies' CPU time per request and
// peak RSS per case,
// a line fitted through ctxguard's peak RSS against the bytes in flight,
// the share of CPU time other processes took while measuring, and checks
// ctxguard's targets (Checks). It renders as text, JSON, or the Go
// benchmark format for benchstat.
//
// A Run keeps the machine's CPUs busy for its duration; run it when the
// machine is otherwise quiet, several times, and compare runs with
// benchstat.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ctxguard/ctxguard/internal/module"
	"github.com/ctxguard/ctxguard/internal/procs"
)

// Mode is how the upstream answers.
type Mode string

const (
	Stream Mode = "sse"  // an SSE stream ("stream": true)
	JSON   Mode = "json" // one JSON message ("stream": false)
)

// Protocol is the API a case's requests speak.
type Protocol string

const (
	Anthropic Protocol = "anthropic" // POST /v1/messages, as Claude Code sends it
	Responses Protocol = "responses" // POST /v1/responses, as Codex CLI sends it
	Chat      Protocol = "chat"      // POST /v1/chat/completions, as opencode sends it
)

// pathOf is the request path of p's requests.
func pathOf(p Protocol) string {
	switch p {
	case Responses:
		return "/v1/responses"
	case Chat:
		return "/v1/chat/completions"
	}
	return "/v1/messages"
}

// Target names.
const (
	Direct      = "direct"
	Passthrough = "passthrough"
	Ctxguard    = "ctxguard"
)

// Options configure a Run. Zero fields take the defaults given.
type Options struct {
	// Root is the module's folder (default: module.Root of the working
	// directory). The proxies are built from it and the default sessions
	// found beside it; it is not needed when both binaries and Sessions
	// are given.
	Root string
	// CtxguardBin and PassthroughBin are prebuilt binaries; when either is
	// empty both are built (go build) into a temporary folder.
	CtxguardBin, PassthroughBin string
	// CtxguardEnv adds KEY=VALUE variables to ctxguard's environment only
	// (GOGC=200, say, to try a runtime setting).
	CtxguardEnv []string
	// CtxguardInstances is how many "ctxguard serve" processes make the
	// ctxguard target (default 1), all with the same configuration and
	// each with its own data folder; the client sends each request to the
	// next one, round robin, as a balancer in front of a fleet would: one
	// turn for all clients, so at concurrency 1 a session's requests
	// alternate between the instances, and above it each goes to whichever
	// is next. Its peak RSS and CPU are the sums over the instances. For
	// instances to serve each other's blobs and summaries, CtxguardConfig
	// names a shared store.
	CtxguardInstances int
	// CtxguardConfig is YAML appended to ctxguard's configuration
	// (ctxguardConfig), to measure other settings: "dashboard: {enabled:
	// false}", say. It must not repeat the keys ctxguardConfig sets.
	CtxguardConfig string
	// Sessions are transcript files or folders (default
	// DefaultSessions(Root)); SessionID picks a session by ID prefix
	// (default: see NewSource).
	Sessions  []string
	SessionID string
	// Sizes are the target body sizes in bytes (default 100 KiB, 1 MiB,
	// 5 MiB); Concurrency the numbers of concurrent clients (default 1
	// and 8); Modes the answer modes (default Stream, JSON); Protocols
	// the APIs (default Anthropic, Responses, Chat).
	Sizes       []int
	Concurrency []int
	Modes       []Mode
	Protocols   []Protocol
	// Duration bounds the whole run's measuring, split evenly over the
	// cases; building, start-up and each case's warm-up rounds come on
	// top. Default 3 minutes.
	Duration time.Duration
	// MaxRequests caps the measured requests per target and case.
	// Default 2000.
	MaxRequests int
	// Warmup is the number of rounds per case not counted. Default 3.
	Warmup int
	// IdleWait, when positive, is how long the run waits after the last
	// case, sending nothing, before it measures ctxguard's resident set
	// size once more (ProcInfo.AfterIdleRSS): what it holds once idle.
	IdleWait time.Duration
	// UpstreamDelay is the fake upstream's wait before its response
	// headers; EventDelay its wait between two SSE events. Default 0.
	UpstreamDelay, EventDelay time.Duration
	// NoSessionHeader sends the requests without the client's session
	// header (as SDK apps do): ctxguard then finds a session's memory by
	// the start of its conversation.
	NoSessionHeader bool
	// Progress, if set, receives a line per case as it ends.
	Progress io.Writer
}

func (o *Options) defaults() error {
	needRoot := o.CtxguardBin == "" || o.PassthroughBin == "" || len(o.Sessions) == 0
	if o.Root == "" && needRoot {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if o.Root, err = module.Root(wd); err != nil {
			return err
		}
	}
	if len(o.Sessions) == 0 {
		o.Sessions = DefaultSessions(o.Root)
	}
	if len(o.Sizes) == 0 {
		o.Sizes = []int{100 << 10, 1 << 20, 5 << 20}
	}
	if len(o.Concurrency) == 0 {
		o.Concurrency = []int{1, 8}
	}
	if len(o.Modes) == 0 {
		o.Modes = []Mode{Stream, JSON}
	}
	if len(o.Protocols) == 0 {
		o.Protocols = []Protocol{Anthropic, Responses, Chat}
	}
	if o.Duration <= 0 {
		o.Duration = 3 * time.Minute
	}
	if o.MaxRequests <= 0 {
		o.MaxRequests = 2000
	}
	if o.Warmup <= 0 {
		o.Warmup = 3
	}
	if o.CtxguardInstances == 0 {
		o.CtxguardInstances = 1
	}
	if o.CtxguardInstances < 1 || o.CtxguardInstances > 16 {
		return fmt.Errorf("loadtest: %d ctxguard instances, want 1..16", o.CtxguardInstances)
	}
	for _, s := range o.Sizes {
		if s <= 0 {
			return fmt.Errorf("loadtest: size %d must be positive", s)
		}
	}
	for _, c := range o.Concurrency {
		if c <= 0 || c > 256 {
			return fmt.Errorf("loadtest: concurrency %d must be in 1..256", c)
		}
	}
	for _, m := range o.Modes {
		if m != Stream && m != JSON {
			return fmt.Errorf("loadtest: mode %q must be %q or %q", m, Stream, JSON)
		}
	}
	for _, p := range o.Protocols {
		if p != Anthropic && p != Responses && p != Chat {
			return fmt.Errorf("loadtest: protocol %q must be %q, %q or %q", p, Anthropic, Responses, Chat)
		}
	}
	if o.UpstreamDelay < 0 || o.EventDelay < 0 {
		return errors.New("loadtest: delays must not be negative")
	}
	return nil
}

// ctxguardConfig is the configuration ctxguard runs with: every pass on,
// at the settings it ships with.
const ctxguardConfig = `# loadtest: every pass on, at the shipped settings
compress:
  enabled: true
persist:
  enabled: true
clear:
  enabled: true
`

// configMark precedes Options.CtxguardConfig in ctxguard's configuration.
const configMark = "# --ctxguard-config\n"

// target is one of the three ways to the upstream.
type target struct {
	name   string
	urls   []string      // one per instance
	procs  []*procs.Proc // the same order; none for direct
	rr     roundRobin
	client *http.Client
}

// roundRobin hands out 0, 1, ..., n-1, 0, 1, ... to concurrent callers,
// one index per call: which instance of a target gets the next request.
type roundRobin struct{ calls atomic.Uint64 }

func (r *roundRobin) next(n int) int {
	return int((r.calls.Add(1) - 1) % uint64(max(n, 1)))
}

// pids returns the process ids of procs.
func pids(ps []*procs.Proc) []int {
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = p.Pid()
	}
	return out
}

// harness is the state of one Run.
type harness struct {
	opt     Options
	ans     map[Protocol]*answers
	up      *upstream
	targets []*target
	ids     atomic.Int64
}

// Run builds the proxies, starts them and the fake upstream, measures
// every case and returns the report. It stops every process it started
// before returning. An error means the run could not be set up or was
// cancelled; failed requests do not fail the run but are counted in the
// report (TargetResult.Errors).
func Run(ctx context.Context, opt Options) (*Report, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	started := time.Now()
	rep := &Report{Started: started.UTC().Format(time.RFC3339), Machine: machine()}
	src, err := NewSource(opt.Sessions, opt.SessionID)
	if err != nil {
		return nil, err
	}
	rep.Source = SourceInfo{Path: relPath(opt.Root, src.Session.Path), Session: src.Session.ID, Rounds: src.Rounds}

	tmp, err := os.MkdirTemp("", "ctxguard-loadtest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	ctBin, ptBin := opt.CtxguardBin, opt.PassthroughBin
	if ctBin == "" || ptBin == "" {
		bins, err := procs.Build(ctx, opt.Root, filepath.Join(tmp, "bin"), "./cmd/ctxguard", "./tools/loadtest/cmd/passthrough")
		if err != nil {
			return nil, err
		}
		ctBin, ptBin = bins[0], bins[1]
	}

	h := &harness{opt: opt}
	if h.ans, err = newAnswers(); err != nil {
		return nil, err
	}
	if h.up, err = startUpstream(h.ans, opt.UpstreamDelay, opt.EventDelay); err != nil {
		return nil, err
	}
	defer h.up.close()
	rep.Upstream = UpstreamInfo{DelayMs: ms(opt.UpstreamDelay), EventDelayMs: ms(opt.EventDelay),
		SSEEvents: len(h.ans[Anthropic].events), SSEBytes: h.ans[Anthropic].sse, JSONBytes: len(h.ans[Anthropic].json)}

	env := cleanEnv()
	pt, err := procs.Start(Passthrough, ptBin, env, "--listen", "127.0.0.1:0", "--upstream", h.up.URL)
	if err != nil {
		return nil, err
	}
	defer pt.Stop()
	cfgPath := filepath.Join(tmp, "ctxguard.yaml")
	cfg := ctxguardConfig
	if opt.CtxguardConfig != "" {
		cfg += configMark + opt.CtxguardConfig + "\n"
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	cts := make([]*procs.Proc, opt.CtxguardInstances)
	for i := range cts {
		name, dir := Ctxguard, "data"
		if len(cts) > 1 {
			name, dir = fmt.Sprintf("%s-%d", Ctxguard, i+1), fmt.Sprintf("data-%d", i+1)
		}
		ct, err := procs.Start(name, ctBin, append(slices.Clip(env), opt.CtxguardEnv...), "serve", "--config", cfgPath, "--listen", "127.0.0.1:0",
			"--upstream", h.up.URL, "--data-dir", filepath.Join(tmp, dir))
		if err != nil {
			return nil, err
		}
		defer ct.Stop()
		cts[i] = ct
	}
	ctURLs := make([]string, len(cts))
	for i, ct := range cts {
		ctURLs[i] = ct.URL
	}
	h.targets = []*target{
		{name: Direct, urls: []string{h.up.URL}},
		{name: Passthrough, urls: []string{pt.URL}, procs: []*procs.Proc{pt}},
		{name: Ctxguard, urls: ctURLs, procs: cts},
	}
	maxConc := 1
	for _, c := range opt.Concurrency {
		maxConc = max(maxConc, c)
	}
	for _, t := range h.targets {
		tr := &http.Transport{
			MaxIdleConns:        4 * maxConc,
			MaxIdleConnsPerHost: 2 * maxConc,
			IdleConnTimeout:     5 * time.Minute,
			DisableCompression:  true,
			WriteBufferSize:     64 << 10,
			ReadBufferSize:      64 << 10,
		}
		defer tr.CloseIdleConnections()
		t.client = &http.Client{Transport: tr}
	}
	for _, t := range h.targets[1:] {
		p := t.procs[0]
		info := ProcInfo{Command: filepath.Base(p.Cmd.Path) + " " + strings.Join(p.Cmd.Args[1:], " ")}
		info.IdleRSS = sumRSS(t.procs)
		if t.name == Ctxguard {
			info.Config, info.Env = cfg, opt.CtxguardEnv
			if len(t.procs) > 1 {
				info.Instances = len(t.procs)
			}
			rep.Ctxguard = info
		} else {
			rep.Passthrough = info
		}
	}
	rep.Settings = Settings{DurationS: opt.Duration.Seconds(), MaxRequests: opt.MaxRequests, Warmup: opt.Warmup, NoSessionHeader: opt.NoSessionHeader}
	rep.Machine.LoadBefore = loadAvg()
	meter := newCPUMeter(append([]int{pt.Pid()}, pids(cts)...)...)

	cases := caseOrder(opt.Protocols, opt.Sizes, opt.Concurrency, opt.Modes)
	budget := opt.Duration / time.Duration(len(cases))
	type sizeKey struct {
		p    Protocol
		size int
	}
	sized := map[sizeKey]int{} // rounds
	for _, cs := range cases {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n, ok := sized[sizeKey{cs.proto, cs.size}]
		if !ok {
			b, err := src.Sized(cs.proto, cs.size, sessionID(0))
			if err != nil {
				return nil, err
			}
			n, sized[sizeKey{cs.proto, cs.size}] = b.Rounds, b.Rounds
		}
		res, err := h.runCase(ctx, src, cs, n, budget)
		if err != nil {
			return nil, err
		}
		rep.Cases = append(rep.Cases, res)
		if opt.Progress != nil {
			fmt.Fprintln(opt.Progress, progressLine(&res))
		}
	}
	rep.Machine.LoadAfter = loadAvg()
	rep.Machine.ForeignCPU = meter.foreign(runtime.NumCPU())
	if opt.IdleWait > 0 {
		if opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "waiting %v idle before measuring ctxguard's memory again\n", opt.IdleWait)
		}
		for _, t := range h.targets {
			t.client.CloseIdleConnections()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(opt.IdleWait):
		}
		rep.Ctxguard.AfterIdleRSS, rep.Ctxguard.IdleWaitS = sumRSS(cts), opt.IdleWait.Seconds()
	}
	for _, ct := range cts {
		rep.Ctxguard.ErrorLogLines += ct.ErrorLines()
	}
	rep.Elapsed = time.Since(started).Round(time.Second).String()
	rep.RSS = FitRSS(rep)
	rep.Checks = Checks(rep)
	return rep, nil
}

// sumRSS returns the sum of the processes' resident set sizes (those
// that can be read).
func sumRSS(ps []*procs.Proc) int64 {
	var n int64
	for _, p := range ps {
		if _, rss, err := procs.Memory(p.Pid()); err == nil {
			n += rss
		}
	}
	return n
}
