package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/dashboard/chart"
	replaypkg "github.com/ctxguard/ctxguard/tools/replay"
)

// The transcripts of package transcript's tests.
const (
	ccDir  = "../../tools/transcript/testdata/claude-code"
	sweDir = "../../tools/transcript/testdata/swe-agent"
)

func runArgs(t *testing.T, tty bool, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	err = runReplay(args, &o, &e, tty)
	return o.String(), e.String(), err
}

type jsonReport struct {
	Version  int      `json:"version"`
	Passes   []string `json:"passes"`
	Requests int      `json:"requests"`
	Total    struct {
		Requests   int     `json:"requests"`
		TokenRatio float64 `json:"token_ratio"`
		CostRatio  float64 `json:"cost_ratio"`
		Events     int     `json:"events"`
		OrigUSD    float64 `json:"orig_usd"`
		// estimates of the requests, against the overflow line
		PeakOrigTokens int `json:"peak_orig_tokens"`
		OverLine       int `json:"over_line"`
		OrigOverLine   int `json:"orig_over_line"`
	} `json:"total"`
	Prices   map[string]json.RawMessage `json:"prices"`
	Sessions []struct {
		ID    string `json:"id"`
		Model string `json:"model"`
	} `json:"sessions"`
}

func decode(t *testing.T, out string) jsonReport {
	t.Helper()
	var r jsonReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	return r
}

func TestReplayJSON(t *testing.T) {
	out, errOut, err := runArgs(t, false, "--json", ccDir, sweDir)
	if err != nil {
		t.Fatal(err, errOut)
	}
	r := decode(t, out)
	if r.Version != 1 || len(r.Passes) == 0 || r.Total.Requests == 0 || r.Total.Requests != r.Requests || len(r.Sessions) < 6 {
		t.Errorf("report: %+v", r)
	}
	if errOut != "" {
		t.Errorf("stderr without a terminal: %q", errOut)
	}
}

// Flags may follow the paths; --off switches every rule off.
func TestReplayFlagsAfterPaths(t *testing.T) {
	out, _, err := runArgs(t, false, ccDir, "--off", "--json")
	if err != nil {
		t.Fatal(err)
	}
	r := decode(t, out)
	if len(r.Passes) != 0 || r.Total.TokenRatio != 1 || r.Total.CostRatio != 1 || r.Total.Events != 0 {
		t.Errorf("--off: passes %v, ratios %v %v, events %d", r.Passes, r.Total.TokenRatio, r.Total.CostRatio, r.Total.Events)
	}
}

func TestReplayText(t *testing.T) {
	out, _, err := runArgs(t, false, "--requests", ccDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ctxguard replay:", "TOTAL", "cost orig", "quote retention", "token estimate vs API usage"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q", want)
		}
	}
}

// At a 16K window the test transcripts compact: the JSON and the text
// say what each summary kept of the messages it replaced.
func TestReplayRecall(t *testing.T) {
	out, _, err := runArgs(t, false, "--window", "16k", "--json", ccDir)
	if err != nil {
		t.Fatal(err)
	}
	type count struct{ Found, Total int }
	var r struct {
		Total struct {
			Summaries int              `json:"summaries"`
			Recall    map[string]count `json:"recall"`
		} `json:"total"`
		Sessions []struct {
			SummaryRecall []struct {
				Messages int              `json:"messages"`
				Recall   map[string]count `json:"recall"`
			} `json:"summary_recall"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	n, requests := 0, 0
	for _, s := range r.Sessions {
		for _, sr := range s.SummaryRecall {
			n++
			requests += sr.Recall["user_requests"].Total
			if sr.Messages <= 0 {
				t.Errorf("a summary of %d messages", sr.Messages)
			}
		}
	}
	if r.Total.Summaries == 0 || n != r.Total.Summaries || requests == 0 || r.Total.Recall["user_requests"].Total != requests || len(r.Total.Recall) != 7 {
		t.Errorf("%d compactions, %d measured, %d requests in their spans, total recall %v", r.Total.Summaries, n, requests, r.Total.Recall)
	}
	text, _, err := runArgs(t, false, "--window", "16k", "--requests", ccDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"what the agent keeps:", "the user's requests", "summary of request"} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q", want)
		}
	}
}

func TestReplayProgress(t *testing.T) {
	for _, tc := range []struct {
		tty  bool
		args []string
		bar  bool
	}{{false, nil, false}, {true, nil, true}, {false, []string{"--progress"}, true}} {
		_, errOut, err := runArgs(t, tc.tty, append(tc.args, "--json", ccDir)...)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(errOut, "replaying ["); got != tc.bar {
			t.Errorf("tty %v %v: bar drawn %v, want %v (%q)", tc.tty, tc.args, got, tc.bar, errOut)
		}
	}
}

func TestReplayChart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.svg")
	_, errOut, err := runArgs(t, false, "--chart", path, ccDir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("<svg ")) {
		t.Errorf("chart: %v %.40q", err, b)
	}
	if !strings.Contains(errOut, "chart: "+path) {
		t.Errorf("stderr %q does not name the chart", errOut)
	}
}

// TestReplayChartLine: --chart draws each session's overflow line, the
// window less the maximum output (--window 20k: 20,000 − 2,500).
func TestReplayChartLine(t *testing.T) {
	dir := t.TempDir() + "/"
	if _, errOut, err := runArgs(t, false, "--window", "20k", "--chart", dir, ccDir); err != nil {
		t.Fatal(err, errOut)
	}
	files, _ := filepath.Glob(dir + "*.svg")
	if len(files) == 0 {
		t.Fatal("no chart written")
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		m, err := chart.ReadMarks(b)
		if err != nil || m.Line != 17_500 {
			t.Errorf("%s: overflow line %d (%v), want 17500", filepath.Base(f), m.Line, err)
		}
	}
}

func TestReplayModelProfilePrices(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "profile.json")
	if err := os.WriteFile(profile, []byte(`{"system": ["a", "b", "c"], "tools": [], "system_message": "", "reminder": ""}`), 0o644); err != nil {
		t.Fatal(err)
	}
	prices := filepath.Join(dir, "prices.yaml")
	if err := os.WriteFile(prices, []byte("claude-sonnet-4-5: {input: 1000}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runArgs(t, false, "--json", "--model", "claude-sonnet-4-5", "--profile", profile, "--prices", prices, ccDir)
	if err != nil {
		t.Fatal(err)
	}
	r := decode(t, out)
	for _, s := range r.Sessions {
		if s.Model != "claude-sonnet-4-5" {
			t.Errorf("%s: model %q", s.ID, s.Model)
		}
	}
	var p struct {
		Input      float64 `json:"input"`
		CacheWrite float64 `json:"cache_write"`
	}
	if len(r.Prices) != 1 || json.Unmarshal(r.Prices["claude-sonnet-4-5"], &p) != nil || p.Input != 1000 || p.CacheWrite != 1250 {
		t.Errorf("prices %s", r.Prices)
	}
	// A smaller profile gives smaller requests than the default one.
	def, _, err := runArgs(t, false, "--json", "--model", "claude-sonnet-4-5", "--prices", prices, ccDir)
	if err != nil {
		t.Fatal(err)
	}
	if small, big := r.Total.OrigUSD, decode(t, def).Total.OrigUSD; !(small < big) {
		t.Errorf("cost with the tiny profile %v, with the default %v", small, big)
	}
}

func TestReplayErrors(t *testing.T) {
	dir := t.TempDir()
	badCfg := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badCfg, []byte("clear:\n  nonsense: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--bogus", ccDir}, "flag provided but not defined"},
		{[]string{"--config", badCfg, ccDir}, "nonsense"},
		{[]string{"--config", filepath.Join(dir, "none.yaml"), ccDir}, "no such file"},
		{[]string{"--profile", filepath.Join(dir, "none.json"), ccDir}, "no such file"},
		{[]string{"--prices", filepath.Join(dir, "none.yaml"), ccDir}, "no such file"},
		{[]string{"--chart", filepath.Join(dir, "c.png"), ccDir}, ".svg"},
		{[]string{filepath.Join(dir, "missing.jsonl")}, "no such file"},
		{[]string{empty}, "no sessions"},
	} {
		_, _, err := runArgs(t, false, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%v: error %v, want one mentioning %q", tc.args, err, tc.msg)
		}
	}
	// No path: ~/.claude/projects, which this HOME lacks.
	t.Setenv("HOME", dir)
	if _, _, err := runArgs(t, false); err == nil || !strings.Contains(err.Error(), ".claude") {
		t.Errorf("no path: %v", err)
	}
	// -h prints the usage to stdout and is not an error.
	out, _, err := runArgs(t, false, "-h")
	if !errors.Is(err, errHelp) || !strings.Contains(out, "usage: ctxguard replay") || !strings.Contains(out, "-chart") {
		t.Errorf("-h: %v %q", err, out)
	}
}

// A folder of Codex rollouts is found and replayed as Responses API
// requests, priced at OpenAI's rates.
func TestReplayCodex(t *testing.T) {
	out, errOut, err := runArgs(t, false, "--json", "../../tools/transcript/testdata/codex")
	if err != nil {
		t.Fatal(err, errOut)
	}
	var r struct {
		Requests int                        `json:"requests"`
		Prices   map[string]json.RawMessage `json:"prices"`
		Unpriced []string                   `json:"unpriced_models"`
		Sessions []struct {
			Format   string `json:"format"`
			Protocol string `json:"protocol"`
			Error    string `json:"error"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Sessions) != 3 || r.Requests != 15 || len(r.Unpriced) != 0 || r.Prices["gpt-5.2"] == nil {
		t.Fatalf("report: %+v", r)
	}
	for _, s := range r.Sessions {
		if s.Format != "codex" || s.Protocol != "responses" || s.Error != "" {
			t.Errorf("session %+v", s)
		}
	}
}

// --protocol responses writes Claude Code sessions as Responses requests.
func TestReplayProtocolFlag(t *testing.T) {
	out, errOut, err := runArgs(t, false, "--json", "--protocol", "responses", ccDir)
	if err != nil {
		t.Fatal(err, errOut)
	}
	if !strings.Contains(out, `"protocol": "responses"`) || strings.Contains(out, `"protocol": "anthropic"`) {
		t.Errorf("sessions not replayed as responses:\n%.2000s", out)
	}
	out, errOut, err = runArgs(t, false, "--json", "--protocol", "chat", ccDir)
	if err != nil || !strings.Contains(out, `"protocol": "chat"`) {
		t.Errorf("--protocol chat: %v %s", err, errOut)
	}
	out, errOut, err = runArgs(t, false, "--json", "--protocol", "gemini", ccDir)
	if err != nil || !strings.Contains(out, `"protocol": "gemini"`) || strings.Contains(out, `"protocol": "anthropic"`) {
		t.Errorf("--protocol gemini: %v %s\n%.2000s", err, errOut, out)
	}
	if _, _, err := runArgs(t, false, "--protocol", "smtp", ccDir); err == nil || !strings.Contains(err.Error(), "smtp") {
		t.Errorf("unknown protocol: %v", err)
	}
}

// The cost is time-aware by default: a request 10 minutes after the one
// before finds Anthropic's 5-minute cache cold and writes its prompt
// again; --cache-ttl never gives the time-blind figures the report
// carries beside them, and a lifetime longer than the gap finds no cold
// request.
func TestReplayCacheTTL(t *testing.T) {
	rec := func(ts, typ, msg string) string {
		return `{"timestamp":"` + ts + `","type":"` + typ + `","sessionId":"s1","isSidechain":false,"message":` + msg + `}`
	}
	user := func(ts, text string) string { return rec(ts, "user", `{"role":"user","content":"`+text+`"}`) }
	asst := func(ts, id string) string {
		return rec(ts, "assistant", `{"model":"claude-sonnet-4-5-20250929","id":"`+id+`","type":"message","role":"assistant","content":[{"type":"text","text":"done `+id+`"}]}`)
	}
	long := strings.Repeat("the quick brown fox jumps over the lazy dog ", 200)
	lines := []string{
		user("2026-01-17T04:00:00Z", "first "+long), asst("2026-01-17T04:00:05Z", "m1"),
		user("2026-01-17T04:00:30Z", "second"), asst("2026-01-17T04:01:00Z", "m2"),
		user("2026-01-17T04:10:30Z", "third, after a pause"), asst("2026-01-17T04:11:00Z", "m3"),
	}
	path := filepath.Join(t.TempDir(), "s1.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	type total = replaypkg.Summary
	get := func(args ...string) (string, total) {
		out, errOut, err := runArgs(t, false, append([]string{"--json", path}, args...)...)
		if err != nil {
			t.Fatal(err, errOut)
		}
		var r struct {
			CacheTTL string `json:"cache_ttl"`
			Total    total  `json:"total"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r.CacheTTL, r.Total
	}
	ttl, aware := get()
	if ttl != "provider" || aware.Requests != 3 || aware.Cold != 1 || !(aware.OrigCost > aware.OrigBlindCost) {
		t.Errorf("default: cache_ttl %q, %+v; want provider, 3 requests, 1 cold, original cost above the time-blind one", ttl, aware)
	}
	ttl, blind := get("--cache-ttl", "never")
	type costs struct{ Orig, Sent, Ratio, OrigBlind, SentBlind, BlindRatio, Cold float64 }
	of := func(s total) costs {
		return costs{s.OrigCost, s.SentCost, s.CostRatio, s.OrigBlindCost, s.SentBlindCost, s.BlindCostRatio, float64(s.Cold)}
	}
	want := costs{aware.OrigBlindCost, aware.SentBlindCost, aware.BlindCostRatio, aware.OrigBlindCost, aware.SentBlindCost, aware.BlindCostRatio, 0}
	if ttl != "never" || of(blind) != want {
		t.Errorf("--cache-ttl never: cache_ttl %q, %+v; want never, %+v", ttl, of(blind), want)
	}
	if _, hour := get("--cache-ttl", "1h"); hour.Cold != 0 || hour.OrigCost != aware.OrigBlindCost {
		t.Errorf("--cache-ttl 1h: %+v; want no cold request and the time-blind cost", hour)
	}
	if _, _, err := runArgs(t, false, path, "--cache-ttl", "soon"); err == nil || !strings.Contains(err.Error(), "--cache-ttl") {
		t.Errorf("--cache-ttl soon: %v", err)
	}
}
