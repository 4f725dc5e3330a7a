package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// Report is the result of a Run. It marshals to JSON as it is (see
// WriteJSON) and renders as text with WriteText.
type Report struct {
	Started     string       `json:"started"` // RFC 3339, UTC
	Elapsed     string       `json:"elapsed"`
	Machine     Machine      `json:"machine"`
	Source      SourceInfo   `json:"source"`
	Upstream    UpstreamInfo `json:"upstream"`
	Passthrough ProcInfo     `json:"passthrough"`
	Ctxguard    ProcInfo     `json:"ctxguard"`
	Settings    Settings     `json:"settings"`
	Cases       []CaseResult `json:"cases"`
	// RSS relates ctxguard's peak RSS to the bytes in flight.
	RSS    *RSSFit `json:"rss,omitempty"`
	Checks []Check `json:"checks"`
}

// RSSFit relates ctxguard's peak RSS per case to the request bytes in
// flight (body bytes × concurrency): the least-squares line
// peak ≈ Base + Slope × body × c over the cases, and the smallest fixed
// base with which every case stays under LimitRSSFactor × body × c.
type RSSFit struct {
	Points    int     `json:"points"`
	Slope     float64 `json:"slope"`
	BaseMiB   float64 `json:"base_mib"`
	NeededMiB float64 `json:"needed_base_mib"` // max over cases of peak − 3 × body × c
	IdleMiB   float64 `json:"idle_mib"`
	WorstCase string  `json:"worst_case"` // the case that sets NeededMiB
}

// FitRSS computes r's RSSFit from ctxguard's per-case peaks; nil when
// fewer than two cases have one or the line cannot be fitted.
func FitRSS(r *Report) *RSSFit {
	var x, y []float64
	f := &RSSFit{IdleMiB: mib(r.Ctxguard.IdleRSS), NeededMiB: math.Inf(-1)}
	for i := range r.Cases {
		c := &r.Cases[i]
		t := c.target(Ctxguard)
		if t == nil || t.Process == nil || t.Process.PeakRSS == 0 {
			continue
		}
		inFlight := float64(c.BodyBytes * c.Concurrency)
		x = append(x, inFlight)
		y = append(y, float64(t.Process.PeakRSS))
		if need := mib(t.Process.PeakRSS) - LimitRSSFactor*inFlight/(1<<20); need > f.NeededMiB {
			f.NeededMiB, f.WorstCase = need, c.Name
		}
	}
	slope, base, ok := FitLine(x, y)
	if !ok {
		return nil
	}
	f.Points, f.Slope, f.BaseMiB = len(x), slope, base/(1<<20)
	return f
}

// Machine describes where the run happened.
type Machine struct {
	OS     string `json:"os"`
	Arch   string `json:"arch"`
	CPUs   int    `json:"cpus"`
	CPU    string `json:"cpu,omitempty"` // model name from /proc/cpuinfo
	Go     string `json:"go"`
	Kernel string `json:"kernel,omitempty"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1, 5 and 15 minute
	// averages when measuring started and ended.
	LoadBefore string `json:"load_before,omitempty"`
	LoadAfter  string `json:"load_after,omitempty"`
	// ForeignCPU is the share of the machine's CPU time (elapsed × CPUs)
	// that processes other than the harness and its two proxies used
	// while measuring: the noise the run had to share the machine with.
	ForeignCPU float64 `json:"foreign_cpu"`
}

// SourceInfo says which real session the bodies were made of.
type SourceInfo struct {
	Path    string `json:"path"` // relative to the module root
	Session string `json:"session"`
	Rounds  int    `json:"rounds"` // tool rounds in the session
}

// UpstreamInfo describes the fake upstream.
type UpstreamInfo struct {
	DelayMs      float64 `json:"delay_ms"`
	EventDelayMs float64 `json:"event_delay_ms"`
	SSEEvents    int     `json:"sse_events"`
	SSEBytes     int     `json:"sse_bytes"`
	JSONBytes    int     `json:"json_bytes"`
}

// ProcInfo describes a proxy process.
type ProcInfo struct {
	Command string   `json:"command"`
	Config  string   `json:"config,omitempty"` // ctxguard's YAML configuration
	Env     []string `json:"env,omitempty"`    // variables added to its environment
	// Instances is the number of processes (ctxguard serve
	// --ctxguard-instances) when more than one; then Command is the
	// first's, and IdleRSS, AfterIdleRSS and ErrorLogLines are sums.
	Instances int `json:"instances,omitempty"`
	// IdleRSS is the resident set size after start-up, before any
	// request: the fixed base of the RSS check.
	IdleRSS int64 `json:"idle_rss"`
	// AfterIdleRSS is the resident set size IdleWaitS seconds after the
	// last case, with no request meanwhile (0 when not measured).
	AfterIdleRSS int64   `json:"after_idle_rss,omitempty"`
	IdleWaitS    float64 `json:"idle_wait_s,omitempty"`
	// ErrorLogLines counts stderr lines logged at level ERROR during the
	// run (ctxguard logs every fail-open rewrite there).
	ErrorLogLines int `json:"error_log_lines"`
}

// Settings are the run's bounds.
type Settings struct {
	DurationS   float64 `json:"duration_s"`
	MaxRequests int     `json:"max_requests"`
	Warmup      int     `json:"warmup_rounds"`
	// NoSessionHeader: requests went without the client's session header.
	NoSessionHeader bool `json:"no_session_header,omitempty"`
}

// CaseResult is one case: a body size, a concurrency, an answer mode.
type CaseResult struct {
	Name        string   `json:"name"`
	Protocol    Protocol `json:"protocol"`
	Size        int      `json:"size"`       // nominal body size
	BodyBytes   int      `json:"body_bytes"` // actual size of worker 0's body
	Rounds      int      `json:"rounds"`     // tool rounds in the body
	Concurrency int      `json:"concurrency"`
	Mode        Mode     `json:"mode"`
	// MeasuredRounds counts the rounds after warm-up; each target got
	// Concurrency × (1 at concurrency 1, else 3) requests per round.
	MeasuredRounds int            `json:"measured_rounds"`
	Targets        []TargetResult `json:"targets"` // direct, passthrough, ctxguard
}

// TargetResult is one target's figures in a case. Latency, TTFB and Relay
// cover the requests that succeeded.
type TargetResult struct {
	Target string `json:"target"`
	// Instances is the number of processes behind the target when more
	// than one (ctxguard's, round robin per request); see Label.
	Instances  int    `json:"instances,omitempty"`
	Requests   int    `json:"requests"`
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// Latency runs from the request's start to the answer's last byte;
	// TTFB to its first byte.
	Latency Summary `json:"latency"`
	TTFB    Summary `json:"ttfb"`
	// Relay runs from the upstream writing the first answer byte to the
	// client reading it: what the hop adds on the way back.
	Relay Summary `json:"relay"`
	// UpstreamBytes is the mean request body size the upstream received.
	UpstreamBytes int64 `json:"upstream_bytes"`
	// ThroughputRPS is the successful requests per second of the time
	// the target was being measured (its slots, in which the case's
	// clients send only to it): at concurrency 1 about 1 / latency, above
	// it what the target serves with that many clients.
	ThroughputRPS float64 `json:"throughput_rps"`
	// VsDirect and VsPassthrough are what this target adds over the other
	// (nil for the target itself and for direct).
	VsDirect      *Overhead     `json:"vs_direct,omitempty"`
	VsPassthrough *Overhead     `json:"vs_passthrough,omitempty"`
	Process       *ProcStats    `json:"process,omitempty"` // proxies only
	Rewrite       *RewriteStats `json:"rewrite,omitempty"` // ctxguard only
}

// Overhead is what one target adds over another.
type Overhead struct {
	Latency Delta `json:"latency"`
	TTFB    Delta `json:"ttfb"`
	Relay   Delta `json:"relay"`
}

// ProcStats are a proxy process's figures in a case.
type ProcStats struct {
	// CPUPerRequestMs is the process's user + system CPU time over the
	// measured rounds divided by its measured requests (resolution 10 ms
	// over the whole case).
	CPUPerRequestMs float64 `json:"cpu_per_request_ms"`
	// PeakRSS is VmHWM at the end of the case, reset when the case began
	// (warm-up included) if PeakReset, else the peak since the process
	// started; RSS is VmRSS then.
	// For a target of several processes, PeakRSS, RSS and the CPU time
	// are sums over them, PeakReset holds if it does for every one, and
	// Instances has each one's figures.
	PeakRSS   int64           `json:"peak_rss"`
	RSS       int64           `json:"rss"`
	PeakReset bool            `json:"peak_reset"`
	Instances []InstanceStats `json:"instances,omitempty"`
}

// InstanceStats are one process's figures in a case, for a target of
// several.
type InstanceStats struct {
	Requests int     `json:"requests"` // sent to it, measured rounds only
	CPUMs    float64 `json:"cpu_ms"`   // over the measured rounds
	PeakRSS  int64   `json:"peak_rss"`
	RSS      int64   `json:"rss"`
}

// Label names the target in reports: its name, followed by "×N" for N
// instances ("ctxguard×2").
func (t *TargetResult) Label() string {
	return instancesLabel(t.Target, t.Instances)
}

func instancesLabel(name string, n int) string {
	if n > 1 {
		return fmt.Sprintf("%s×%d", name, n)
	}
	return name
}

// RewriteStats say what ctxguard did to the measured requests, from its
// response headers.
type RewriteStats struct {
	Rewritten    int    `json:"rewritten"`   // answers naming applied passes
	FailedOpen   int    `json:"failed_open"` // answers with X-Ctxguard-Error-Id
	Skipped      int    `json:"skipped"`     // answers with X-Ctxguard-Skipped
	Passes       string `json:"passes"`      // X-Ctxguard-Passes of the last answer
	TokensBefore int    `json:"tokens_before"`
	TokensAfter  int    `json:"tokens_after"`
}

// target returns the named target's result, or nil.
func (c *CaseResult) target(name string) *TargetResult {
	for i := range c.Targets {
		if c.Targets[i].Target == name {
			return &c.Targets[i]
		}
	}
	return nil
}

// compare fills VsDirect and VsPassthrough.
func (c *CaseResult) compare() {
	d, p := c.target(Direct), c.target(Passthrough)
	for i := range c.Targets {
		t := &c.Targets[i]
		if t.Target == Direct {
			continue
		}
		if d != nil {
			t.VsDirect = overhead(t, d)
		}
		if p != nil && t.Target != Passthrough {
			t.VsPassthrough = overhead(t, p)
		}
	}
}

func overhead(t, base *TargetResult) *Overhead {
	lat, ok1 := Sub(t.Latency, base.Latency)
	ttfb, ok2 := Sub(t.TTFB, base.TTFB)
	relay, ok3 := Sub(t.Relay, base.Relay)
	if !ok1 || !ok2 || !ok3 {
		return nil
	}
	return &Overhead{Latency: lat, TTFB: ttfb, Relay: relay}
}

// The targets for ctxguard.
const (
	LimitAddedP50   = 1.0 // ms over the passthrough, 1 MB body, concurrency 1
	LimitAddedP99   = 3.0 // ms, same
	LimitRelayAdded = 0.5 // ms over the passthrough, SSE first byte, p50
	LimitRSSFactor  = 3   // peak RSS ≤ idle RSS + 3 × body × concurrency
)

// Check is one target of the issue, evaluated on one case.
type Check struct {
	Name  string  `json:"name"`
	Case  string  `json:"case"`
	Value float64 `json:"value"`
	Limit float64 `json:"limit"`
	Unit  string  `json:"unit"`
	Met   bool    `json:"met"`
	Note  string  `json:"note,omitempty"`
}

// Checks evaluates ctxguard's targets on the report's cases:
//
//   - at 1 MB (1<<20 nominal) and concurrency 1, in each mode: what
//     ctxguard adds over the passthrough at p50 (≤ 1 ms) and p99 (≤ 3 ms);
//   - in every SSE case: what it adds to the first-byte relay over the
//     passthrough at p50 (≤ 0.5 ms) — the time-to-first-byte ctxguard adds
//     on the answer's way back, which does not include reading and
//     rewriting the request (that is in the latency checks);
//   - over all cases: ctxguard's peak RSS grows by at most 3 bytes per
//     request byte in flight (the slope of r.RSS, see FitRSS); the fixed
//     base is the fitted intercept, and the note gives the smallest base
//     with which every case stays under 3 × body × concurrency.
//
// Checks reads r.RSS, so set it (FitRSS) first. A check whose figures are
// missing (no successful request, fewer than two cases) is not met.
func Checks(r *Report) []Check {
	var out []Check
	missing := func(ch Check) Check {
		ch.Note = "no data"
		return ch
	}
	for i := range r.Cases {
		c := &r.Cases[i]
		ct := c.target(Ctxguard)
		if ct == nil {
			continue
		}
		vs := ct.VsPassthrough
		if c.Size == 1<<20 && c.Concurrency == 1 {
			for _, ch := range []struct {
				name  string
				limit float64
				get   func(*Overhead) float64
			}{
				{"added latency p50 over passthrough", LimitAddedP50, func(o *Overhead) float64 { return o.Latency.P50 }},
				{"added latency p99 over passthrough", LimitAddedP99, func(o *Overhead) float64 { return o.Latency.P99 }},
			} {
				k := Check{Name: ch.name, Case: c.Name, Limit: ch.limit, Unit: "ms"}
				if vs == nil {
					out = append(out, missing(k))
					continue
				}
				k.Value = ch.get(vs)
				k.Met = k.Value <= k.Limit
				out = append(out, k)
			}
		}
		if c.Mode == Stream {
			k := Check{Name: "added SSE first-byte relay p50 over passthrough", Case: c.Name, Limit: LimitRelayAdded, Unit: "ms"}
			if vs == nil {
				out = append(out, missing(k))
			} else {
				k.Value = vs.Relay.P50
				k.Met = k.Value <= k.Limit
				out = append(out, k)
			}
		}
	}
	k := Check{Name: fmt.Sprintf("peak RSS slope ≤ %d × body × c (+ fixed base)", LimitRSSFactor), Case: "all cases", Unit: "×", Limit: LimitRSSFactor}
	if f := r.RSS; f == nil {
		out = append(out, missing(k))
	} else {
		k.Value = f.Slope
		k.Met = k.Value <= k.Limit
		k.Note = fmt.Sprintf("fitted base %.1f MiB (idle %.1f MiB); at slope %d the base must be ≥ %.1f MiB (%s)",
			f.BaseMiB, f.IdleMiB, LimitRSSFactor, f.NeededMiB, f.WorstCase)
		out = append(out, k)
	}
	return out
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report as plain-text tables.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "ctxguard overhead benchmark, %s, took %s\n", r.Started, r.Elapsed)
	fmt.Fprintf(&b, "machine: %s/%s, %d CPUs", m.OS, m.Arch, m.CPUs)
	if m.CPU != "" {
		fmt.Fprintf(&b, " (%s)", m.CPU)
	}
	fmt.Fprintf(&b, ", %s", m.Go)
	if m.Kernel != "" {
		fmt.Fprintf(&b, ", Linux %s", m.Kernel)
	}
	if m.LoadBefore != "" {
		fmt.Fprintf(&b, "; load average %s before, %s after", m.LoadBefore, m.LoadAfter)
	}
	fmt.Fprintf(&b, "; other processes used %.1f%% of the CPU time while measuring", 100*m.ForeignCPU)
	b.WriteString("\n")
	fmt.Fprintf(&b, "bodies: Claude Code requests rebuilt from session %s (%s, %d tool rounds), its rounds repeated with fresh tool ids up to the size; one session per client\n",
		r.Source.Session, r.Source.Path, r.Source.Rounds)
	u := r.Upstream
	fmt.Fprintf(&b, "upstream: fake, in the harness process; delay %.1f ms, event delay %.1f ms; SSE answer %d events, %s; JSON answer %s\n",
		u.DelayMs, u.EventDelayMs, u.SSEEvents, bytesName(int64(u.SSEBytes)), bytesName(int64(u.JSONBytes)))
	fmt.Fprintf(&b, "passthrough: httputil.ReverseProxy (FlushInterval -1, full duplex), own process; idle RSS %s\n", bytesName(r.Passthrough.IdleRSS))
	env := ""
	if len(r.Ctxguard.Env) > 0 {
		env = " with " + strings.Join(r.Ctxguard.Env, " ")
	}
	if n := r.Ctxguard.Instances; n > 1 {
		fmt.Fprintf(&b, "%s: %d ctxguard serve processes%s, the same configuration, every pass on (compress, persist, clear at shipped settings), a fresh data dir each; the client sends each request to the next, round robin; idle RSS %s (sum); %d error log lines\n",
			instancesLabel(Ctxguard, n), n, env, bytesName(r.Ctxguard.IdleRSS), r.Ctxguard.ErrorLogLines)
	} else {
		fmt.Fprintf(&b, "ctxguard: ctxguard serve%s, every pass on (compress, persist, clear at shipped settings), fresh data dir, own process; idle RSS %s; %d error log lines\n",
			env, bytesName(r.Ctxguard.IdleRSS), r.Ctxguard.ErrorLogLines)
	}
	if _, added, ok := strings.Cut(r.Ctxguard.Config, configMark); ok {
		fmt.Fprintf(&b, "ctxguard configuration added (--ctxguard-config): %s\n", yamlLine(added))
	}
	if c := r.Ctxguard; c.AfterIdleRSS > 0 {
		var peak int64
		for i := range r.Cases {
			if t := r.Cases[i].target(Ctxguard); t != nil && t.Process != nil {
				peak = max(peak, t.Process.PeakRSS)
			}
		}
		fmt.Fprintf(&b, "%s memory: peak RSS %s during the run; %s after %.0f s idle\n", instancesLabel(Ctxguard, c.Instances), bytesName(peak), bytesName(c.AfterIdleRSS), c.IdleWaitS)
	}
	s := r.Settings
	fmt.Fprintf(&b, "measuring: %.0f s split over %d cases, at most %d requests per target and case, %d warm-up rounds per case, targets interleaved\n",
		s.DurationS, len(r.Cases), s.MaxRequests, s.Warmup)
	if s.NoSessionHeader {
		b.WriteString("requests sent without the client's session header\n")
	}
	b.WriteString("\nlatency, ms (request start to last answer byte); +direct / +pass: what the target adds over direct / over the passthrough (difference of percentiles); req/s: successful requests per second of the target's measuring time\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tbody\ttarget\treq\terr\treq/s\tp50\tp99\t+direct p50\t+direct p99\t+pass p50\t+pass p99\t")
	for i := range r.Cases {
		c := &r.Cases[i]
		for j, t := range c.Targets {
			name, body := "", ""
			if j == 0 {
				name, body = c.Name, bytesName(int64(c.BodyBytes))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, body, t.Label(), t.Requests, t.Errors, t.ThroughputRPS,
				num(t.Latency, t.Latency.P50), num(t.Latency, t.Latency.P99),
				delta(t.VsDirect, func(o *Overhead) float64 { return o.Latency.P50 }),
				delta(t.VsDirect, func(o *Overhead) float64 { return o.Latency.P99 }),
				delta(t.VsPassthrough, func(o *Overhead) float64 { return o.Latency.P50 }),
				delta(t.VsPassthrough, func(o *Overhead) float64 { return o.Latency.P99 }))
		}
	}
	tw.Flush()

	b.WriteString("\nfirst byte, ms: ttfb = request start to first answer byte; relay = upstream wrote it to client read it. Proxy process: CPU per request, peak RSS in the case\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\ttarget\tttfb p50\t+pass ttfb p50\trelay p50\trelay p99\t+pass relay p50\t+pass relay p99\tcpu/req ms\tpeak RSS\tupstream got\t")
	for i := range r.Cases {
		c := &r.Cases[i]
		for j, t := range c.Targets {
			name := ""
			if j == 0 {
				name = c.Name
			}
			cpu, rss := "", ""
			if t.Process != nil {
				cpu, rss = fmt.Sprintf("%.2f", t.Process.CPUPerRequestMs), bytesName(t.Process.PeakRSS)
				if !t.Process.PeakReset {
					rss += " (since start)"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, t.Label(),
				num(t.TTFB, t.TTFB.P50),
				delta(t.VsPassthrough, func(o *Overhead) float64 { return o.TTFB.P50 }),
				num(t.Relay, t.Relay.P50), num(t.Relay, t.Relay.P99),
				delta(t.VsPassthrough, func(o *Overhead) float64 { return o.Relay.P50 }),
				delta(t.VsPassthrough, func(o *Overhead) float64 { return o.Relay.P99 }),
				cpu, rss, bytesName(t.UpstreamBytes))
		}
	}
	tw.Flush()

	r.writeInstances(&b)

	b.WriteString("\nctxguard's rewrites (from its response headers)\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\trewritten\tfailed open\tskipped\tpasses\ttokens before -> after\tbody -> upstream")
	for i := range r.Cases {
		c := &r.Cases[i]
		t := c.target(Ctxguard)
		if t == nil || t.Rewrite == nil {
			continue
		}
		rw := t.Rewrite
		fmt.Fprintf(tw, "%s\t%d/%d\t%d\t%d\t%s\t%d -> %d\t%s -> %s\n", c.Name, rw.Rewritten, t.Requests-t.Errors, rw.FailedOpen, rw.Skipped,
			orDash(rw.Passes), rw.TokensBefore, rw.TokensAfter, bytesName(int64(c.BodyBytes)), bytesName(t.UpstreamBytes))
	}
	tw.Flush()

	if f := r.RSS; f != nil {
		fmt.Fprintf(&b, "\nctxguard peak RSS ≈ %.1f MiB + %.2f × body × c (least squares over %d cases; idle RSS %.1f MiB)\n",
			f.BaseMiB, f.Slope, f.Points, f.IdleMiB)
	}

	var errs []string
	for _, c := range r.Cases {
		for _, t := range c.Targets {
			if t.Errors > 0 {
				errs = append(errs, fmt.Sprintf("%s %s: %d failed, first: %s", c.Name, t.Label(), t.Errors, t.FirstError))
			}
		}
	}
	if len(errs) > 0 {
		b.WriteString("\nfailed requests\n  " + strings.Join(errs, "\n  ") + "\n")
	}

	b.WriteString("\ntargets (ctxguard)\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, k := range r.Checks {
		verdict := "met"
		if !k.Met {
			verdict = "MISSED"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%.2f %s\t(limit %.2f)\t%s\n", verdict, k.Name, k.Case, k.Value, k.Unit, k.Limit, k.Note)
	}
	tw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}

// writeInstances writes, for the targets of several processes, each
// one's share of the requests, CPU time and peak RSS per case.
func (r *Report) writeInstances(b *strings.Builder) {
	header := false
	var tw *tabwriter.Writer
	for i := range r.Cases {
		c := &r.Cases[i]
		for _, t := range c.Targets {
			if t.Process == nil || len(t.Process.Instances) < 2 {
				continue
			}
			if !header {
				b.WriteString("\ninstances (round robin per request): requests sent, CPU time and peak RSS of each in the case\n")
				tw = tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
				fmt.Fprintln(tw, "case\ttarget\tinstance\treq\tcpu ms\tpeak RSS\t")
				header = true
			}
			for k, in := range t.Process.Instances {
				name, label := "", ""
				if k == 0 {
					name, label = c.Name, t.Label()
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%s\t\n", name, label, k+1, in.Requests, in.CPUMs, bytesName(in.PeakRSS))
			}
		}
	}
	if tw != nil {
		tw.Flush()
	}
}

// yamlLine renders YAML on one line: its lines trimmed, without blank
// ones and comments, joined by "; ".
func yamlLine(y string) string {
	var parts []string
	for l := range strings.Lines(y) {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

func num(s Summary, v float64) string {
	if s.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func delta(o *Overhead, get func(*Overhead) float64) string {
	if o == nil {
		return ""
	}
	return fmt.Sprintf("%+.2f", get(o))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// sizeName names a nominal body size: "100KB", "1MB" (powers of 1024).
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// bytesName renders a byte count in KiB or MiB with one decimal.
func bytesName(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// progressLine summarizes a finished case in one line.
func progressLine(c *CaseResult) string {
	var parts []string
	for _, t := range c.Targets {
		parts = append(parts, fmt.Sprintf("%s p50 %s p99 %s %.0f req/s", t.Label(), num(t.Latency, t.Latency.P50), num(t.Latency, t.Latency.P99), t.ThroughputRPS))
	}
	return fmt.Sprintf("%-16s %3d rounds  %s", c.Name, c.MeasuredRounds, strings.Join(parts, ", "))
}

// WriteBenchfmt writes the report in the Go benchmark format, one line per
// case and target, named
// BenchmarkOverhead/size=1MB/c=1/mode=sse/target=ctxguard, with the
// successful requests as the iteration count and the units p50-ns,
// p99-ns, ttfb-p50-ns, relay-p50-ns and req/s (throughput), plus
// cpu-ns/req and peak-rss-B for the proxies; a target of several
// instances is named by its Label (target=ctxguard×2). benchstat reads it: several runs appended to one file
// give confidence intervals, "benchstat -col /target" compares the
// targets, and two files compare two builds of ctxguard.
func (r *Report) WriteBenchfmt(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "goos: %s\ngoarch: %s\n", r.Machine.OS, r.Machine.Arch)
	if r.Machine.CPU != "" {
		fmt.Fprintf(&b, "cpu: %s\n", r.Machine.CPU)
	}
	b.WriteString("pkg: github.com/ctxguard/ctxguard/tools/loadtest\n")
	for i := range r.Cases {
		c := &r.Cases[i]
		for _, t := range c.Targets {
			n := t.Requests - t.Errors
			if n <= 0 {
				continue
			}
			ns := func(ms float64) int64 { return int64(math.Round(ms * 1e6)) }
			fmt.Fprintf(&b, "BenchmarkOverhead/proto=%s/size=%s/c=%d/mode=%s/target=%s-%d\t%d\t%d p50-ns\t%d p99-ns\t%d ttfb-p50-ns\t%d relay-p50-ns\t%.1f req/s",
				c.Protocol, sizeName(c.Size), c.Concurrency, c.Mode, t.Label(), r.Machine.CPUs, n,
				ns(t.Latency.P50), ns(t.Latency.P99), ns(t.TTFB.P50), ns(t.Relay.P50), t.ThroughputRPS)
			if t.Process != nil {
				fmt.Fprintf(&b, "\t%d cpu-ns/req\t%d peak-rss-B", ns(t.Process.CPUPerRequestMs), t.Process.PeakRSS)
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
