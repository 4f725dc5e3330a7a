package replay

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/internal/shareddata"
	"github.com/ctxguard/ctxguard/internal/stub"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/clearing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/dashboard/chart"
	"github.com/ctxguard/ctxguard/gemini"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/splice"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tools/transcript"
)

// testdataDirs are the transcripts of package transcript's tests (real
// sessions, see transcript/testdata/README.md).
var testdataDirs = []string{"../transcript/testdata/claude-code", "../transcript/testdata/swe-agent"}

func loadTestdata(t *testing.T) []*transcript.Session {
	t.Helper()
	ss, err := transcript.Load(testdataDirs, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) < 6 {
		t.Fatalf("only %d sessions in %v", len(ss), testdataDirs)
	}
	return ss
}

func testdataReport(t *testing.T, p Pipeline) *Report {
	t.Helper()
	rep, err := Run(loadTestdata(t), RunOptions{Pipeline: p})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// fakePipeline is a stand-in for ctxguard's passes that does not change
// when they do (so golden files stay put): "noop" changes nothing, and
// "fakeclear" replaces every string tool result of 200 bytes or more that
// is older than the last four messages with a stub naming a blob that
// holds it.
func fakePipeline() Pipeline {
	return Pipeline{
		Passes: []string{"noop", "fakeclear"},
		Check:  CheckRewrite(ValidateOptions),
		New: func(*transcript.Session, protocol.Protocol) (DetailedRewriter, store.Store, error) {
			mem := store.NewMemory()
			return func(body []byte, _ time.Time) (Outcome, error) {
				c, err := anthropic.Parse(body)
				if err != nil {
					return Outcome{}, err
				}
				var set splice.Set
				for i := 0; i < len(c.Messages)-4; i++ {
					for _, b := range c.Messages[i].Blocks {
						if b.Kind != conversation.ToolResult || jsonscan.KindOf(body, b.Content) != jsonscan.String || b.Content.Len() < 200 {
							continue
						}
						text, err := jsonscan.AppendUnquote(nil, c.Bytes(b.Content))
						if err != nil {
							return Outcome{}, err
						}
						id := store.ID(text)
						if err := mem.PutBlob(context.Background(), id, text); err != nil {
							return Outcome{}, err
						}
						stub := fmt.Sprintf("[cleared %d bytes, blob %s]", len(text), id)
						if err := set.Add(splice.Edit{Span: b.Content, Repl: jsonscan.AppendQuote(nil, stub)}); err != nil {
							return Outcome{}, err
						}
					}
				}
				out, err := set.Apply(body)
				if err != nil {
					return Outcome{}, err
				}
				return Outcome{Body: out, Stages: []Stage{{Name: "noop", Body: body}, {Name: "fakeclear", Edits: set.Len(), Body: out}}}, nil
			}, mem, nil
		},
	}
}

// With every rule off the pipeline forwards every body byte for byte, and
// the report shows ratios of exactly 1, no events, nothing invalid, on
// every session of the test data.
func TestAllRulesOff(t *testing.T) {
	p, err := GuardPipeline(Off(config.Defaults()))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Passes) != 0 {
		t.Fatalf("passes %v with every rule off", p.Passes)
	}
	inner := p.New
	changed := 0
	p.New = func(s *transcript.Session, proto protocol.Protocol) (DetailedRewriter, store.Store, error) {
		rw, st, err := inner(s, proto)
		return func(b []byte, _ time.Time) (Outcome, error) {
			out, err := rw(b, time.Time{})
			if !bytes.Equal(out.Body, b) {
				changed++
			}
			return out, err
		}, st, err
	}
	rep := testdataReport(t, p)
	if changed != 0 {
		t.Errorf("%d bodies changed with every rule off", changed)
	}
	measured := 0
	for _, s := range append(rep.Sessions, SessionReport{ID: "TOTAL", Summary: rep.Total}) {
		if s.Error != "" {
			t.Errorf("%s: %s", s.ID, s.Error)
		}
		if s.TokenRatio != 1 || s.CostRatio != 1 || s.BPCostRatio != 1 || s.OrigUSD != s.SentUSD || s.OrigBPUSD != s.SentBPUSD {
			t.Errorf("%s: ratios %v %v %v, money %v/%v %v/%v", s.ID, s.TokenRatio, s.CostRatio, s.BPCostRatio, s.SentUSD, s.OrigUSD, s.SentBPUSD, s.OrigBPUSD)
		}
		if s.Events != 0 || s.ReportedEvents != 0 || s.Invalid != 0 || s.FailOpen != 0 || s.Quotes.Lost != 0 || s.Quotes.Retrievable != 0 {
			t.Errorf("%s: events %d (reported %d), invalid %d, fail-open %d, quotes %+v", s.ID, s.Events, s.ReportedEvents, s.Invalid, s.FailOpen, s.Quotes)
		}
		if s.ID != "TOTAL" {
			measured += s.Requests
		}
	}
	if measured == 0 || measured != rep.Total.Requests {
		t.Errorf("%d requests measured, total says %d", measured, rep.Total.Requests)
	}
}

// The default pipeline on the test data: every session replays, every
// rewritten request is checked, and the per-pass savings add up to each
// session's saving.
func TestDefaultPipeline(t *testing.T) {
	p, err := GuardPipeline(config.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Passes) == 0 {
		t.Fatal("no passes in the default pipeline")
	}
	rep := testdataReport(t, p)
	checkSums(t, rep)
	t.Logf("tokens %.3f cost %.3f bp %.3f events %d invalid %d quotes %+v", rep.Total.TokenRatio, rep.Total.CostRatio, rep.Total.BPCostRatio, rep.Total.Events, rep.Total.Invalid, rep.Total.Quotes)
	// Each session knows the overflow line the Guard held it to, which
	// its chart draws.
	for _, s := range rep.Sessions {
		if len(s.PerRequest) == 0 {
			continue
		}
		m := model.Lookup(s.Model)
		if s.Line != m.Window-m.MaxOutput {
			t.Errorf("%s (%s): overflow line %d, want %d − %d", s.ID, s.Model, s.Line, m.Window, m.MaxOutput)
		}
		marks, err := chart.ReadMarks(SessionSVG(&s))
		if err != nil || marks.Line != s.Line {
			t.Errorf("%s: chart overflow line %d (%v), want %d", s.ID, marks.Line, err, s.Line)
		}
	}
}

// checkSums checks the report's internal arithmetic.
func checkSums(t *testing.T, rep *Report) {
	t.Helper()
	var orig, sent, reqs int
	for _, s := range rep.Sessions {
		if s.Error != "" {
			t.Errorf("%s: %s", s.ID, s.Error)
		}
		saved := 0
		for _, p := range s.Passes {
			saved += p.Saved
		}
		if len(s.Passes) > 0 && saved != s.OrigTokens-s.SentTokens {
			t.Errorf("%s: passes saved %d, the session %d", s.ID, saved, s.OrigTokens-s.SentTokens)
		}
		if q := s.Quotes; q.Kept+q.Retrievable+q.Lost != q.Quotes {
			t.Errorf("%s: quotes %+v do not add up", s.ID, q)
		}
		orig += s.OrigTokens
		sent += s.SentTokens
		reqs += len(s.PerRequest)
	}
	if orig != rep.Total.OrigTokens || sent != rep.Total.SentTokens || reqs != rep.Total.Requests || reqs != rep.Requests {
		t.Errorf("totals %d %d %d (of %d), sessions sum to %d %d %d", rep.Total.OrigTokens, rep.Total.SentTokens, rep.Total.Requests, rep.Requests, orig, sent, reqs)
	}
}

func TestFakePipelineReport(t *testing.T) {
	rep := testdataReport(t, fakePipeline())
	checkSums(t, rep)
	tot := rep.Total
	if tot.Events == 0 || tot.SentTokens >= tot.OrigTokens || tot.Invalid != 0 {
		t.Errorf("fake clearing: events %d, tokens %d -> %d, invalid %d", tot.Events, tot.OrigTokens, tot.SentTokens, tot.Invalid)
	}
	if rep.Load.Malformed == 0 || rep.Load.repairs() == 0 {
		t.Errorf("load stats %+v: the test data has malformed lines and repairs", rep.Load)
	}
	if rep.Estimator == nil || rep.Estimator.Pairs == 0 {
		t.Errorf("no estimator accuracy from sessions with usage")
	}
}

func TestRunProgress(t *testing.T) {
	var calls, last, total int
	_, err := Run(loadTestdata(t), RunOptions{Pipeline: fakePipeline(), Progress: func(d, n int) {
		if d < last {
			t.Errorf("progress went back from %d to %d", last, d)
		}
		calls++
		last, total = d, n
	}})
	if err != nil {
		t.Fatal(err)
	}
	if calls == 0 || last != total {
		t.Errorf("%d progress calls, ended at %d of %d", calls, last, total)
	}
}

func TestRunNoPipeline(t *testing.T) {
	if _, err := Run(nil, RunOptions{}); err == nil {
		t.Error("Run without a pipeline did not fail")
	}
}

func TestStageConfigs(t *testing.T) {
	cfg := config.Defaults()
	cs, ok := stageConfigs(cfg, []string{"compress", "persist", "clear"})
	if !ok || len(cs) != 2 {
		t.Fatalf("stages %d, %v", len(cs), ok)
	}
	runs := func(c config.Config) [3]bool {
		return [3]bool{c.Passes.Enabled("compress"), c.Passes.Enabled("persist"), c.Passes.Enabled("clear")}
	}
	if r := runs(cs[0]); r != [3]bool{true, false, false} {
		t.Errorf("stage 1 runs %v", r)
	}
	if r := runs(cs[1]); r != [3]bool{true, true, false} {
		t.Errorf("stage 2 runs %v", r)
	}
	if _, ok := stageConfigs(cfg, []string{"compress", "summarize"}); ok {
		t.Error("an unknown pass was staged")
	}
}

// Real sessions from the shared data (three mid-sized ones with edit
// events, a subagent among them; all 32 files with CTXGUARD_REPLAY_ALL=1,
// about 4 s; in a clone without the shared data, the repository's one
// Claude Code session): all replay, the arithmetic holds, and with every
// rule off every ratio is 1.
func TestSharedData(t *testing.T) {
	dir, full := shareddata.Sessions(t, "claude-code")
	if testing.Short() {
		t.Skip("short")
	}
	paths := []string{dir}
	if full && os.Getenv("CTXGUARD_REPLAY_ALL") == "" {
		paths = []string{
			dir + "/57bb5674-54b1-4ce6-9157-2d341cd9bfc1.jsonl",
			dir + "/ff33b5b0-cc51-4271-a3eb-545a85882e5f.jsonl",
			dir + "/agent-abc3cb6.jsonl",
		}
	}
	ss, err := transcript.Load(paths, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep := replayDefaults(t, ss)
	t.Logf("tokens %.3f cost %.3f bp %.3f events %d invalid %d quotes %+v", rep.Total.TokenRatio, rep.Total.CostRatio, rep.Total.BPCostRatio, rep.Total.Events, rep.Total.Invalid, rep.Total.Quotes)
	if rep.Total.Invalid != 0 || rep.Total.Events == 0 {
		t.Errorf("%d invalid requests, %d edit events (the sessions were chosen for having some)", rep.Total.Invalid, rep.Total.Events)
	}
	checkOff(t, ss)
}

// The main sessions of claude-code-more (Claude Code 2.1.39, whose
// transcripts redact thinking signatures and hold "\n\n" text blocks
// before thinking and tool calls, in sessions long enough for several
// trimmed runs), replayed under the defaults: no request is invalid by
// its API's rules. All three sessions as Anthropic requests, the one with
// the most trimmed runs also as Responses and Chat Completions requests
// (about 5 s of CPU in all). A regression test: all three sessions made invalid
// Anthropic requests, and dropping "\n\n" with a trimmed round made
// invalid Responses requests.
func TestSharedDataMore(t *testing.T) {
	dir := shareddata.Dir(t, "claude-code-more")
	if testing.Short() {
		t.Skip("short")
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(paths) != 3 {
		t.Fatalf("%d main transcripts in %s, want 3 (%v)", len(paths), dir, err)
	}
	ss, err := transcript.Load(paths, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var trimmed []*transcript.Session
	for _, s := range ss {
		if strings.HasPrefix(s.ID, "8463c716") {
			trimmed = append(trimmed, s)
		}
	}
	for _, tc := range []struct {
		proto    protocol.Protocol
		sessions []*transcript.Session
		min      int // requests at least
	}{
		{anthropic.Protocol, ss, 400},
		{responses.Protocol, trimmed, 150},
		{chat.Protocol, trimmed, 150},
		{gemini.Protocol, trimmed, 150},
	} {
		t.Run(tc.proto.Name(), func(t *testing.T) {
			p, err := GuardPipeline(config.Defaults())
			if err != nil {
				t.Fatal(err)
			}
			p.Protocols = As(tc.proto)
			rep, err := Run(tc.sessions, RunOptions{Pipeline: p, Build: transcript.BuildOptions{Protocol: tc.proto.Name()}})
			if err != nil {
				t.Fatal(err)
			}
			checkSums(t, rep)
			tt := rep.Total
			t.Logf("tokens %.3f cost %.3f events %d invalid %d of %d", tt.TokenRatio, tt.CostRatio, tt.Events, tt.Invalid, tt.Requests)
			if tt.Requests < tc.min || tt.Events == 0 {
				t.Fatalf("%d requests, %d events: the test checks too little", tt.Requests, tt.Events)
			}
			for _, s := range rep.Sessions {
				for _, rq := range s.PerRequest {
					if rq.Invalid != "" {
						t.Errorf("%s request %d (of %d invalid): %s", s.ID, rq.Index, s.Invalid, rq.Invalid)
						break
					}
				}
			}
		})
	}
}

// The 19 real Codex rollouts of the shared data (about 10 s; in a clone
// without it, the repository's one): every session is rebuilt as
// Responses API requests, goes through the Responses adapter and is
// priced with OpenAI's cost model; no request is invalid, the arithmetic
// holds, the original streams never break, the recorded usage reaches the
// report, tokens and cost are saved (the one session: tokens saved, cost
// never above going direct), and with every rule off every ratio is 1.
func TestSharedDataCodex(t *testing.T) {
	dir, full := shareddata.Sessions(t, "codex")
	if testing.Short() {
		t.Skip("short")
	}
	ss, err := transcript.Load([]string{dir}, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[bool]int{true: 19, false: 1}[full]; len(ss) != want {
		t.Fatalf("%d sessions in %s, want %d", len(ss), dir, want)
	}
	for _, s := range ss {
		if s.Format != transcript.Codex {
			t.Fatalf("%s loaded as %v", s.Path, s.Format)
		}
	}
	rep := replayDefaults(t, ss)
	t.Logf("tokens %.3f cost %.3f events %d invalid %d usd %.2f/%.2f quotes %+v", rep.Total.TokenRatio, rep.Total.CostRatio, rep.Total.Events, rep.Total.Invalid, rep.Total.SentUSD, rep.Total.OrigUSD, rep.Total.Quotes)
	if rep.Total.Invalid != 0 || rep.Total.OrigEvents != 0 || len(rep.Unpriced) != 0 {
		t.Errorf("invalid %d, original breaks %d, unpriced %v", rep.Total.Invalid, rep.Total.OrigEvents, rep.Unpriced)
	}
	costly := rep.Total.CostRatio >= 1 // the corpus saves
	if !full {
		costly = rep.Total.CostRatio > 1 // one session: never above going direct
	}
	if rep.Total.TokenRatio >= 1 || costly {
		t.Errorf("no saving: tokens %v cost %v", rep.Total.TokenRatio, rep.Total.CostRatio)
	}
	// The rollouts record each request's output items: quote retention
	// is measured on them.
	if q := rep.Total.Quotes; q.Quotes == 0 || q.Lost != 0 {
		t.Errorf("quotes %+v: none measured, or some lost", q)
	}
	withUsage := 0
	for _, s := range rep.Sessions {
		if s.Error != "" || s.Protocol != "responses" {
			t.Errorf("%s: protocol %q, error %s", s.ID, s.Protocol, s.Error)
		}
		for _, r := range s.PerRequest {
			if r.APIPrompt > 0 {
				withUsage++
			}
		}
	}
	if withUsage < rep.Requests*9/10 {
		t.Errorf("%d of %d requests carry the recorded usage", withUsage, rep.Requests)
	}
	checkOff(t, ss)
}

// The Codex rollouts written as Gemini requests (replay --protocol
// gemini; in a clone without the shared data, the repository's one): the
// Gemini adapter rewrites them, no request is invalid, quotes are kept,
// tokens are saved and the cost never exceeds going direct.
func TestSharedDataCodexGemini(t *testing.T) {
	dir, _ := shareddata.Sessions(t, "codex")
	if testing.Short() {
		t.Skip("short")
	}
	ss, err := transcript.Load([]string{dir}, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := GuardPipeline(config.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	p.Protocols = As(gemini.Protocol)
	rep, err := Run(ss, RunOptions{Pipeline: p, Build: transcript.BuildOptions{Protocol: transcript.ProtoGemini}})
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, rep)
	tt := rep.Total
	t.Logf("tokens %.3f cost %.3f events %d invalid %d of %d quotes %+v", tt.TokenRatio, tt.CostRatio, tt.Events, tt.Invalid, tt.Requests, tt.Quotes)
	for _, s := range rep.Sessions {
		if s.Error != "" || s.Protocol != "gemini" || s.Invalid != 0 {
			t.Errorf("%s: protocol %q, %d invalid, error %s", s.ID, s.Protocol, s.Invalid, s.Error)
		}
	}
	if tt.Requests < 50 || tt.TokenRatio >= 1 || tt.CostRatio > 1 || tt.Quotes.Lost != 0 {
		t.Errorf("%d requests, tokens %v, cost %v, %d quotes lost", tt.Requests, tt.TokenRatio, tt.CostRatio, tt.Quotes.Lost)
	}
}

// replayDefaults replays sessions through the default pipeline and checks
// the report's arithmetic.
func replayDefaults(t *testing.T, ss []*transcript.Session) *Report {
	t.Helper()
	p, err := GuardPipeline(config.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ss, RunOptions{Pipeline: p})
	if err != nil {
		t.Fatal(err)
	}
	checkSums(t, rep)
	return rep
}

// checkOff replays sessions with every rule off: every ratio must be 1.
func checkOff(t *testing.T, ss []*transcript.Session) {
	t.Helper()
	off, err := GuardPipeline(Off(config.Defaults()))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ss, RunOptions{Pipeline: off})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Sessions {
		if s.CostRatio != 1 || s.BPCostRatio != 1 || s.TokenRatio != 1 || s.Events != 0 || s.Invalid != 0 {
			t.Errorf("%s with every rule off: %v %v %v, %d events, %d invalid", s.ID, s.TokenRatio, s.CostRatio, s.BPCostRatio, s.Events, s.Invalid)
		}
	}
}

// The Claude Code and SWE-agent sessions of transcript/testdata written
// as Responses API, Chat Completions and Gemini requests go through those
// adapters: every rewrite is valid by that API's rules, and with every
// rule off every ratio is 1.
func TestRunRenderedOpenAI(t *testing.T) {
	ss, err := transcript.Load(testdataDirs, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, proto := range []protocol.Protocol{responses.Protocol, chat.Protocol, gemini.Protocol} {
		for _, cfg := range []config.Config{config.Defaults(), Off(config.Defaults())} {
			p, err := GuardPipeline(cfg)
			if err != nil {
				t.Fatal(err)
			}
			p.Protocols = As(proto)
			rep, err := Run(ss, RunOptions{Pipeline: p, Build: transcript.BuildOptions{Protocol: proto.Name()}})
			if err != nil {
				t.Fatal(err)
			}
			checkSums(t, rep)
			t.Logf("%s: tokens %.3f cost %.3f events %d invalid %d", proto.Name(), rep.Total.TokenRatio, rep.Total.CostRatio, rep.Total.Events, rep.Total.Invalid)
			for _, s := range rep.Sessions {
				if s.Error != "" || s.Protocol != proto.Name() || s.Invalid != 0 {
					t.Errorf("%s: protocol %q, %d invalid, error %s", s.ID, s.Protocol, s.Invalid, s.Error)
				}
				if !pass.Get[clearing.Config](cfg.Passes).Enabled && (s.TokenRatio != 1 || s.CostRatio != 1) {
					t.Errorf("%s with every rule off: %v %v", s.ID, s.TokenRatio, s.CostRatio)
				}
			}
		}
	}
}

// The shared sessions, Claude Code and Codex, replayed with every model's
// window at 64K (the proof of compaction; about 15 s): no request
// sent above the overflow line though hundreds of the originals are, none
// invalid, compaction and clearing events together at most one per ten
// requests, sessions compacted, every quoted line still in the request or
// retrievable, and the summarizer's calls priced in. In a clone without
// the shared data, the repository's two sessions at a 24K window, which
// puts their larger requests above the line: the same, but for the rate
// of events, a figure of the whole corpus that two short sessions
// squeezed into a small window do not meet.
func TestSharedDataSmallWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, kind := range []string{"claude-code", "codex"} {
		t.Run(kind, func(t *testing.T) {
			dir, full := shareddata.Sessions(t, kind)
			ss, err := transcript.Load([]string{dir}, transcript.Options{})
			if err != nil {
				t.Fatal(err)
			}
			window, wantLine, least := 64_000, 56_000, 100
			if !full {
				window, wantLine, least = 24_000, 21_000, 3
			}
			cfg, line := WithWindow(config.Defaults(), window, 0)
			p, err := GuardPipeline(cfg)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Run(ss, RunOptions{Pipeline: p, Window: window, Line: line})
			if err != nil {
				t.Fatal(err)
			}
			checkSums(t, rep)
			tt := rep.Total
			t.Logf("tokens %.3f cost %.3f events %d/%d summaries %d over line %d (original %d) quotes %+v",
				tt.TokenRatio, tt.CostRatio, tt.Events, tt.Requests, tt.Summaries, tt.OverLine, tt.OrigOverLine, tt.Quotes)
			if line != wantLine || tt.OrigOverLine < least {
				t.Fatalf("line %d, %d original requests above it: the test checks too little", line, tt.OrigOverLine)
			}
			if tt.OverLine != 0 || tt.Invalid != 0 || tt.FailOpen != 0 {
				t.Errorf("%d requests sent above the line, %d invalid, %d failed open", tt.OverLine, tt.Invalid, tt.FailOpen)
			}
			if full && tt.Events*10 > tt.Requests {
				t.Errorf("%d events in %d requests: more than one per ten", tt.Events, tt.Requests)
			}
			if tt.Summaries == 0 || tt.SummaryIn == 0 {
				t.Errorf("%d compactions, %d summarizer input tokens", tt.Summaries, tt.SummaryIn)
			}
			if tt.Quotes.Lost != 0 {
				t.Errorf("%d quoted lines lost", tt.Quotes.Lost)
			}
			checkRecall(t, rep)
		})
	}
}

// checkRecall checks the fact recall of a replay's compactions: every
// compaction is measured, the sessions add up to the total, no kind finds
// more than it has, the replaced spans hold requests, commands and
// identifiers, and the text report shows the figures.
func checkRecall(t *testing.T, rep *Report) {
	t.Helper()
	tt := rep.Total
	if tt.Recall == nil {
		t.Fatalf("%d compactions, no recall in the report", tt.Summaries)
	}
	t.Logf("recall: %s", recallLine(*tt.Recall))
	var sum Recall
	n := 0
	for _, s := range rep.Sessions {
		var ss Recall
		for _, sr := range s.SummaryRecall {
			ss.Add(sr.Recall)
			n++
		}
		if (s.Recall == nil) != (len(s.SummaryRecall) == 0) || s.Recall != nil && *s.Recall != ss {
			t.Errorf("%s: recall %v, its compactions add up to %v", s.Name, s.Recall, ss)
		}
		sum.Add(ss)
	}
	if n != tt.Summaries || sum != *tt.Recall {
		t.Errorf("%d compactions measured of %d; sessions add up to %v, total %v", n, tt.Summaries, sum, *tt.Recall)
	}
	for k, c := range *tt.Recall {
		if c.Found > c.Total {
			t.Errorf("%s: %d found of %d", FactKind(k), c.Found, c.Total)
		}
	}
	for _, k := range []FactKind{FactRequest, FactCommand, FactIdentifier} {
		if tt.Recall[k].Total == 0 {
			t.Errorf("no %s in the replaced spans", k)
		}
	}
	var buf bytes.Buffer
	if err := rep.WriteText(&buf, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	c := tt.Recall[FactCommand]
	for _, want := range []string{"what the agent keeps:", fmt.Sprintf("unique commands %s/%s", stub.Commas(c.Found), stub.Commas(c.Total))} {
		if !strings.Contains(squeeze(buf.String()), want) {
			t.Errorf("the text report lacks %q", want)
		}
	}
}

// The Gemini CLI sessions of transcript/testdata (real recordings of
// Gemini CLI 0.61.0) replay as Gemini requests by default: through the
// Gemini adapter bound to the session's model, priced with implicit
// caching, every rewrite valid, and with every rule off every ratio 1.
func TestRunGeminiCLI(t *testing.T) {
	ss, err := transcript.Load([]string{"../transcript/testdata/gemini-cli"}, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 2 {
		t.Fatalf("%d sessions, want the 2 Gemini CLI recordings", len(ss))
	}
	rep := replayDefaults(t, ss)
	for _, s := range rep.Sessions {
		if s.Error != "" || s.Protocol != "gemini" || s.Invalid != 0 || s.Requests != 6 || s.Model != "gemini-3.8-flash" {
			t.Errorf("%s: protocol %q, model %q, %d requests, %d invalid, error %s", s.ID, s.Protocol, s.Model, s.Requests, s.Invalid, s.Error)
		}
	}
	checkOff(t, ss)
	if cm := cacheModel(gemini.Protocol, "gemini-3.8-flash", PriceTable{}); !cm.Automatic || cm.Write != 1 || cm.Read != 0.1 {
		t.Errorf("Gemini's cost model: %+v, want automatic caching, reads 0.1x, no write premium", cm)
	}
}
