package loadtest

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/internal/module"
)

// smokeRun runs the harness with opt on the module's test transcripts,
// or skips the test in -short mode.
func smokeRun(t *testing.T, opt Options) *Report {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs ctxguard and the passthrough as processes")
	}
	root, err := module.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	opt.Root = root
	opt.Sessions = []string{filepath.Join(root, "tools", "transcript", "testdata", "claude-code")}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestRunSmoke runs the whole harness briefly: it builds ctxguard and the
// passthrough, starts them and the fake upstream, and measures a tiny
// body of every protocol in both modes at concurrency 1 and 2 for a few
// rounds. It checks that the report is well formed, that every target was
// measured without failures and that ctxguard parsed every protocol's
// bodies (it reports their tokens); it asserts nothing about timings.
func TestRunSmoke(t *testing.T) {
	rep := smokeRun(t, Options{
		Sizes:       []int{48 << 10},
		Concurrency: []int{1, 2},
		Duration:    2 * time.Second,
		MaxRequests: 12,
		Warmup:      1,
	})
	if got := len(rep.Cases); got != 12 {
		t.Fatalf("%d cases, want 12 (3 protocols × 2 concurrencies × 2 modes)", got)
	}
	if rep.Ctxguard.IdleRSS <= 0 || rep.Passthrough.IdleRSS <= 0 {
		t.Errorf("idle RSS not measured: ctxguard %d, passthrough %d", rep.Ctxguard.IdleRSS, rep.Passthrough.IdleRSS)
	}
	if rep.Ctxguard.ErrorLogLines != 0 {
		t.Errorf("ctxguard logged %d errors", rep.Ctxguard.ErrorLogLines)
	}
	for _, c := range rep.Cases {
		if c.BodyBytes < 24<<10 || c.MeasuredRounds < 1 {
			t.Errorf("%s: body %d bytes, %d measured rounds", c.Name, c.BodyBytes, c.MeasuredRounds)
		}
		var names []string
		for _, tr := range c.Targets {
			names = append(names, tr.Target)
			if tr.Requests == 0 || tr.Errors != 0 || tr.Latency.N != tr.Requests || tr.Relay.N != tr.Requests {
				t.Errorf("%s %s: %d requests, %d failed (%s), %d latencies, %d relays", c.Name, tr.Target,
					tr.Requests, tr.Errors, tr.FirstError, tr.Latency.N, tr.Relay.N)
			}
			if tr.Latency.P50 <= 0 || tr.Latency.P99 < tr.Latency.P50 || tr.TTFB.P50 > tr.Latency.Max {
				t.Errorf("%s %s: odd latency %+v, ttfb %+v", c.Name, tr.Target, tr.Latency, tr.TTFB)
			}
			if tr.UpstreamBytes <= 0 {
				t.Errorf("%s %s: the upstream received nothing", c.Name, tr.Target)
			}
			if proxy := tr.Target != Direct; proxy != (tr.Process != nil) || proxy != (tr.VsDirect != nil) {
				t.Errorf("%s %s: process %v, vs direct %v", c.Name, tr.Target, tr.Process, tr.VsDirect)
			} else if proxy && tr.Process.PeakRSS <= 0 {
				t.Errorf("%s %s: no peak RSS", c.Name, tr.Target)
			}
		}
		if want := []string{Direct, Passthrough, Ctxguard}; len(names) != 3 || names[0] != want[0] || names[1] != want[1] || names[2] != want[2] {
			t.Errorf("%s: targets %v, want %v", c.Name, names, want)
		}
		ct := c.target(Ctxguard)
		if ct.VsPassthrough == nil || ct.Rewrite == nil || ct.Rewrite.FailedOpen != 0 || ct.Rewrite.Skipped != 0 || ct.Rewrite.TokensBefore == 0 {
			t.Errorf("%s: ctxguard vs passthrough %v, rewrite %+v", c.Name, ct.VsPassthrough, ct.Rewrite)
		}
	}
	relays := 0
	for _, k := range rep.Checks {
		if k.Note == "no data" {
			t.Errorf("check without data: %+v", k)
		}
		if k.Name == "added SSE first-byte relay p50 over passthrough" {
			relays++
		}
	}
	if relays != 6 {
		t.Errorf("%d relay checks, want 6 (one per SSE case)", relays)
	}
	for name, write := range map[string]func(*bytes.Buffer) error{
		"text":     func(b *bytes.Buffer) error { return rep.WriteText(b) },
		"json":     func(b *bytes.Buffer) error { return rep.WriteJSON(b) },
		"benchfmt": func(b *bytes.Buffer) error { return rep.WriteBenchfmt(b) },
	} {
		var b bytes.Buffer
		if err := write(&b); err != nil || b.Len() == 0 {
			t.Errorf("%s report: %d bytes, %v", name, b.Len(), err)
		}
	}
	if testing.Verbose() {
		var b bytes.Buffer
		_ = rep.WriteText(&b)
		t.Log("\n" + b.String())
	}
}

// TestRunSmokeInstances runs the harness briefly with ctxguard as two
// processes: each gets every other request, and the target's figures are
// the sums of the two's. It asserts nothing about timings.
func TestRunSmokeInstances(t *testing.T) {
	rep := smokeRun(t, Options{
		Sizes:             []int{48 << 10},
		Concurrency:       []int{1, 2},
		Modes:             []Mode{Stream},
		Protocols:         []Protocol{Anthropic},
		Duration:          time.Second,
		MaxRequests:       12,
		Warmup:            1,
		CtxguardInstances: 2,
	})
	if rep.Ctxguard.Instances != 2 || rep.Ctxguard.ErrorLogLines != 0 || rep.Ctxguard.IdleRSS <= 0 {
		t.Errorf("ctxguard: %d instances, %d error lines, idle RSS %d", rep.Ctxguard.Instances, rep.Ctxguard.ErrorLogLines, rep.Ctxguard.IdleRSS)
	}
	if len(rep.Cases) != 2 {
		t.Fatalf("%d cases, want 2", len(rep.Cases))
	}
	for _, c := range rep.Cases {
		for _, tr := range c.Targets {
			if tr.Requests == 0 || tr.Errors != 0 || tr.ThroughputRPS <= 0 {
				t.Errorf("%s %s: %d requests, %d failed (%s), %.1f req/s", c.Name, tr.Label(), tr.Requests, tr.Errors, tr.FirstError, tr.ThroughputRPS)
			}
		}
		if p := c.target(Passthrough); p.Instances != 0 || len(p.Process.Instances) != 0 {
			t.Errorf("%s: passthrough with instances: %d, %+v", c.Name, p.Instances, p.Process.Instances)
		}
		ct := c.target(Ctxguard)
		if ct.Label() != "ctxguard×2" || ct.Process == nil || len(ct.Process.Instances) != 2 {
			t.Fatalf("%s: %s, process %+v", c.Name, ct.Label(), ct.Process)
		}
		a, b := ct.Process.Instances[0], ct.Process.Instances[1]
		if a.Requests+b.Requests != ct.Requests || a.Requests-b.Requests > 1 || b.Requests-a.Requests > 1 {
			t.Errorf("%s: instances got %d and %d of %d requests", c.Name, a.Requests, b.Requests, ct.Requests)
		}
		if a.PeakRSS <= 0 || b.PeakRSS <= 0 || a.PeakRSS+b.PeakRSS != ct.Process.PeakRSS || a.RSS+b.RSS != ct.Process.RSS {
			t.Errorf("%s: peak RSS %d + %d, total %d; RSS %d + %d, total %d", c.Name, a.PeakRSS, b.PeakRSS, ct.Process.PeakRSS, a.RSS, b.RSS, ct.Process.RSS)
		}
		if ct.Rewrite == nil || ct.Rewrite.FailedOpen != 0 || ct.Rewrite.TokensBefore == 0 {
			t.Errorf("%s: rewrite %+v", c.Name, ct.Rewrite)
		}
	}
	if testing.Verbose() {
		var b bytes.Buffer
		_ = rep.WriteText(&b)
		t.Log("\n" + b.String())
	}
}
