package loadtest

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// synthCase builds a case whose targets have the given latency,
// first-byte and relay p50/p99 (ms), and ctxguard the given peak RSS.
func synthCase(size, conc int, mode Mode, lat, relay [3][2]float64, peak int64) CaseResult {
	c := CaseResult{Name: caseSpec{Anthropic, size, conc, mode}.name(), Protocol: Anthropic, Size: size, BodyBytes: size, Concurrency: conc, Mode: mode}
	for i, name := range []string{Direct, Passthrough, Ctxguard} {
		t := TargetResult{Target: name, Requests: 10,
			Latency: Summary{N: 10, P50: lat[i][0], P99: lat[i][1]},
			TTFB:    Summary{N: 10, P50: lat[i][0] / 2, P99: lat[i][1] / 2},
			Relay:   Summary{N: 10, P50: relay[i][0], P99: relay[i][1]},
			// Throughput as if one client waited for each answer.
			ThroughputRPS: float64(conc) * 1000 / lat[i][0],
		}
		if name != Direct {
			t.Process = &ProcStats{CPUPerRequestMs: 1, PeakRSS: 20 << 20, PeakReset: true}
		}
		if name == Ctxguard {
			t.Process.PeakRSS = peak
		}
		c.Targets = append(c.Targets, t)
	}
	c.compare()
	return c
}

func TestCompare(t *testing.T) {
	c := synthCase(1<<20, 1, Stream,
		[3][2]float64{{1, 2}, {1.5, 3}, {2.25, 6}},
		[3][2]float64{{0.1, 0.2}, {0.2, 0.5}, {0.3, 0.4}}, 30<<20)
	type got struct{ PtDirect, CtDirect, CtPass *Overhead }
	want := got{
		PtDirect: &Overhead{Latency: Delta{0.5, 1}, TTFB: Delta{0.25, 0.5}, Relay: Delta{0.1, 0.3}},
		CtDirect: &Overhead{Latency: Delta{1.25, 4}, TTFB: Delta{0.625, 2}, Relay: Delta{0.2, 0.2}},
		CtPass:   &Overhead{Latency: Delta{0.75, 3}, TTFB: Delta{0.375, 1.5}, Relay: Delta{0.1, -0.1}},
	}
	g := got{c.target(Passthrough).VsDirect, c.target(Ctxguard).VsDirect, c.target(Ctxguard).VsPassthrough}
	if diff := cmp.Diff(want, g, approx); diff != "" {
		t.Errorf("overheads (-want +got):\n%s", diff)
	}
	if d := c.target(Direct); d.VsDirect != nil || d.VsPassthrough != nil {
		t.Errorf("direct compared with itself: %+v", d)
	}
	if p := c.target(Passthrough); p.VsPassthrough != nil {
		t.Errorf("passthrough compared with itself: %+v", p.VsPassthrough)
	}

	// A target without successful requests is compared with nothing.
	c.Targets[2].Latency, c.Targets[2].TTFB, c.Targets[2].Relay = Summary{}, Summary{}, Summary{}
	c.compare()
	if ct := c.target(Ctxguard); ct.VsDirect != nil || ct.VsPassthrough != nil {
		t.Errorf("empty target got overheads: %+v %+v", ct.VsDirect, ct.VsPassthrough)
	}
}

func synthReport() *Report {
	r := &Report{Ctxguard: ProcInfo{IdleRSS: 10 << 20}}
	lat := func(ct50, ct99 float64) [3][2]float64 { return [3][2]float64{{1, 2}, {1.5, 3}, {ct50, ct99}} }
	relay := func(ct float64) [3][2]float64 { return [3][2]float64{{0.1, 0.2}, {0.2, 0.4}, {ct, 1}} }
	r.Cases = []CaseResult{
		synthCase(100<<10, 1, Stream, lat(2, 4), relay(0.3), 12<<20),         // relay +0.1: met
		synthCase(1<<20, 1, Stream, lat(2.4, 5), relay(0.9), 14<<20),         // +0.9 / +2 met, relay +0.7 missed
		synthCase(1<<20, 1, JSON, lat(2.6, 6.5), relay(0.2), 14<<20),         // +1.1 / +3.5 both missed
		synthCase(1<<20, 8, Stream, lat(20, 40), relay(0.7), 10<<20+8*3<<20), // relay +0.5: met (limit inclusive)
	}
	r.RSS = FitRSS(r)
	r.Checks = Checks(r)
	return r
}

func TestFitRSS(t *testing.T) {
	r := synthReport()
	// Points (MiB in flight, MiB peak): (0.1, 12), (1, 14), (1, 14), (8, 34).
	x := []float64{0.09765625, 1, 1, 8}
	y := []float64{12, 14, 14, 34}
	slope, base, _ := FitLine(x, y)
	// The base needed at slope 3: 12-0.29=11.71, 14-3=11, 34-24=10.
	want := &RSSFit{Points: 4, Slope: slope, BaseMiB: base, IdleMiB: 10,
		NeededMiB: 12 - 3*0.09765625, WorstCase: "anthropic 100KB c=1 sse"}
	if diff := cmp.Diff(want, r.RSS, approx); diff != "" {
		t.Errorf("FitRSS (-want +got):\n%s", diff)
	}
	if FitRSS(&Report{Cases: r.Cases[:1]}) != nil {
		t.Error("FitRSS of one case is not nil")
	}
}

func TestChecks(t *testing.T) {
	r := synthReport()
	type row struct {
		Name, Case string
		Value      float64
		Met        bool
	}
	var got []row
	for _, k := range r.Checks {
		got = append(got, row{k.Name, k.Case, k.Value, k.Met})
	}
	relayName := "added SSE first-byte relay p50 over passthrough"
	want := []row{
		{relayName, "anthropic 100KB c=1 sse", 0.1, true},
		{"added latency p50 over passthrough", "anthropic 1MB c=1 sse", 0.9, true},
		{"added latency p99 over passthrough", "anthropic 1MB c=1 sse", 2, true},
		{relayName, "anthropic 1MB c=1 sse", 0.7, false},
		{"added latency p50 over passthrough", "anthropic 1MB c=1 json", 1.1, false},
		{"added latency p99 over passthrough", "anthropic 1MB c=1 json", 3.5, false},
		{relayName, "anthropic 1MB c=8 sse", 0.5, true},
		{"peak RSS slope ≤ 3 × body × c (+ fixed base)", "all cases", r.RSS.Slope, r.RSS.Slope <= 3},
	}
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("Checks (-want +got):\n%s", diff)
	}

	// Missing figures fail their checks.
	r.Cases[1].Targets[2].VsPassthrough = nil
	r.RSS = nil
	for _, k := range Checks(r) {
		if (k.Case == "anthropic 1MB c=1 sse" || k.Case == "all cases") && (k.Met || k.Note != "no data") {
			t.Errorf("check without data: %+v", k)
		}
	}
}

func TestWriteText(t *testing.T) {
	r := synthReport()
	r.Started, r.Elapsed = "2026-11-22T00:00:00Z", "1m0s"
	r.Cases[0].Targets[2].Errors, r.Cases[0].Targets[2].FirstError = 2, "status 502"
	r.Cases[0].Targets[2].Rewrite = &RewriteStats{Rewritten: 8, Passes: "compress,clear", TokensBefore: 100, TokensAfter: 40}
	r.Ctxguard.AfterIdleRSS, r.Ctxguard.IdleWaitS = 24<<20, 360
	r.Settings.NoSessionHeader = true
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"ctxguard overhead benchmark, 2026-11-22T00:00:00Z, took 1m0s",
		"anthropic 100KB c=1 sse", "anthropic 1MB c=8 sse", "passthrough", "+0.90", // 1MB c=1 sse ctxguard over passthrough p50
		"compress,clear", "100 -> 40",
		"100KB c=1 sse ctxguard: 2 failed, first: status 502",
		"MISSED  added latency p50 over passthrough",
		"met     added SSE first-byte relay p50 over passthrough",
		"ctxguard peak RSS ≈",
		"ctxguard memory: peak RSS", "24.0 MiB after 360 s idle",
		"requests sent without the client's session header",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}

// synthInstances makes r's ctxguard target two instances: its process
// figures become the sums of two instances' with the given requests and
// peaks, the first 7 MiB RSS larger than the second.
func synthInstances(r *Report) {
	r.Ctxguard.Instances = 2
	for i := range r.Cases {
		ct := r.Cases[i].target(Ctxguard)
		ct.Instances = 2
		half := ct.Process.PeakRSS / 2
		a := InstanceStats{Requests: (ct.Requests + 1) / 2, CPUMs: 12, PeakRSS: half + 7<<19, RSS: half}
		b := InstanceStats{Requests: ct.Requests / 2, CPUMs: 8, PeakRSS: half - 7<<19, RSS: half}
		ct.Process.Instances = []InstanceStats{a, b}
		ct.Process.RSS = a.RSS + b.RSS
	}
}

func TestWriteTextInstances(t *testing.T) {
	r := synthReport()
	r.Cases[1].Targets[2].Requests = 11 // 6 + 5
	synthInstances(r)
	r.Ctxguard.Config = ctxguardConfig + configMark + "store: redis://127.0.0.1:6390/0\n\n# shared\npublic_url: http://127.0.0.1:8787\n"
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	// The report's lines with their columns' padding collapsed.
	var lines []string
	for l := range strings.Lines(out) {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	// The 1MB c=1 sse case has ctxguard's p50 at 2.4 ms: 416.7 req/s;
	// its instances peaked at 7 ± 3.5 MiB.
	for _, want := range []string{
		"ctxguard×2: 2 ctxguard serve processes, the same configuration, every pass on (compress, persist, clear at shipped settings), a fresh data dir each; the client sends each request to the next, round robin; idle RSS 10.0 MiB (sum); 0 error log lines",
		"ctxguard configuration added (--ctxguard-config): store: redis://127.0.0.1:6390/0; public_url: http://127.0.0.1:8787",
		"case body target req err req/s p50 p99 +direct p50 +direct p99 +pass p50 +pass p99",
		"anthropic 1MB c=1 sse 1.0 MiB direct 10 0 1000.0 1.00 2.00",
		"ctxguard×2 11 0 416.7 2.40 5.00 +1.40 +3.00 +0.90 +2.00",
		"instances (round robin per request): requests sent, CPU time and peak RSS of each in the case",
		"anthropic 1MB c=1 sse ctxguard×2 1 6 12 10.5 MiB",
		"2 5 8 3.5 MiB",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("text report lacks the line %q:\n%s", want, out)
		}
	}
	// One row per instance and case, and the passthrough is not listed.
	section := out[strings.Index(out, "instances (round robin"):strings.Index(out, "ctxguard's rewrites")]
	if got, want := strings.Count(section, "MiB"), 2*len(r.Cases); got != want {
		t.Errorf("instances section has %d rows, want %d:\n%s", got, want, section)
	}
	if strings.Contains(section, Passthrough) {
		t.Errorf("instances section lists the passthrough:\n%s", section)
	}

	// One instance and no added configuration: no label suffix, no
	// section, no configuration line.
	b.Reset()
	if err := synthReport().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "ctxguard×") || strings.Contains(out, "instances (round robin") || strings.Contains(out, "--ctxguard-config") {
		t.Errorf("single-instance report mentions instances:\n%s", out)
	}
}

func TestWriteJSON(t *testing.T) {
	r := synthReport()
	synthInstances(r)
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, &back); diff != "" {
		t.Errorf("JSON round trip (-want +got):\n%s", diff)
	}
}

func TestWriteBenchfmt(t *testing.T) {
	r := synthReport()
	r.Machine = Machine{OS: "linux", Arch: "amd64", CPUs: 2, CPU: "Test CPU"}
	var b bytes.Buffer
	if err := r.WriteBenchfmt(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if diff := cmp.Diff([]string{"goos: linux", "goarch: amd64", "cpu: Test CPU", "pkg: github.com/ctxguard/ctxguard/tools/loadtest"}, lines[:4]); diff != "" {
		t.Errorf("header (-want +got):\n%s", diff)
	}
	if got, want := len(lines), 4+3*len(r.Cases); got != want {
		t.Errorf("%d lines, want %d", got, want)
	}
	want := "BenchmarkOverhead/proto=anthropic/size=1MB/c=1/mode=json/target=ctxguard-2\t10\t2600000 p50-ns\t6500000 p99-ns\t1300000 ttfb-p50-ns\t200000 relay-p50-ns\t384.6 req/s\t1000000 cpu-ns/req\t14680064 peak-rss-B"
	if !strings.Contains(b.String(), want+"\n") {
		t.Errorf("benchfmt lacks\n%s\nin\n%s", want, b.String())
	}

	// Two instances: the target is named by its label.
	synthInstances(r)
	b.Reset()
	if err := r.WriteBenchfmt(&b); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(b.String(), "/target=ctxguard×2-2\t"); got != len(r.Cases) {
		t.Errorf("%d lines for ctxguard×2, want %d:\n%s", got, len(r.Cases), b.String())
	}
}

func TestNames(t *testing.T) {
	type pair struct{ In, Out string }
	var got []pair
	for _, n := range []int{100 << 10, 1 << 20, 5 << 20, 1500, 3 << 10} {
		got = append(got, pair{strconv.Itoa(n), sizeName(n)})
	}
	for _, n := range []int64{512, 2048, 3 << 20, 1<<20 + 1<<19} {
		got = append(got, pair{strconv.Itoa(int(n)), bytesName(n)})
	}
	want := []pair{
		{"102400", "100KB"}, {"1048576", "1MB"}, {"5242880", "5MB"}, {"1500", "1500B"}, {"3072", "3KB"},
		{"512", "512 B"}, {"2048", "2.0 KiB"}, {"3145728", "3.0 MiB"}, {"1572864", "1.5 MiB"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}
