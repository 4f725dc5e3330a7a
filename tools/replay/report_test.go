package replay

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/store"
)

var update = flag.Bool("update", false, "rewrite golden files")

// Hand-computed fixture.
//
// Every text in these bodies is a run of one lowercase letter, so its
// estimate can be worked out by hand from the estimator's byte weights
// (tokens package doc; held to 1/128 token): a letter weighs 33/128, each
// of the two quote characters of the JSON string 57/128, and the sum is
// rounded to the nearest token. A text block (or a plain string content)
// is billed as its JSON string alone (measure.go). So a run of n letters
// is round((114 + 33n)/128) tokens:
//
//	n = 384: 12786/128 =  99.9 -> 100    n =  35: 1269/128 =  9.9 -> 10
//	n = 772: 25590/128 = 199.9 -> 200    n =  74: 2556/128 = 20.0 -> 20
//	n = 190:  6384/128 =  49.9 ->  50
//
// If the estimator's weights change, these figures must be recomputed.
const (
	nA, tA = 384, 100 // user, first turn
	nB, tB = 190, 50  // assistant
	nC, tC = 772, 200 // user: a big tool output, say
	nD, tD = 35, 10   // assistant
	nE, tE = 74, 20   // user
	nZ, tZ = 35, 10   // what the fake pipeline leaves of C
	nY, tY = 190, 50  // C after the fake pipeline's first pass
)

func run(c byte, n int) string { return strings.Repeat(string(c), n) }

// msg renders a message; marked gives it the moving cache marker (a text
// block array), otherwise its content is a plain string.
func msg(role, text string, marked bool) string {
	if marked {
		return `{"role":"` + role + `","content":[{"type":"text","text":"` + text + `","cache_control":{"type":"ephemeral"}}]}`
	}
	return `{"role":"` + role + `","content":"` + text + `"}`
}

func body(msgs ...string) []byte {
	return []byte(`{"model":"claude-opus-4-5","max_tokens":1000,"messages":[` + strings.Join(msgs, ",") + `]}`)
}

// fixture returns the 3-request stream and the fake rewriter: it passes
// requests 1 and 2 through, and in request 3 shrinks C in two passes,
// "shrink" (C -> Y, 50 tokens) and "clear" (Y -> Z, 10 tokens).
func fixture() ([]Request, DetailedRewriter) {
	A, B, C, D, E := run('a', nA), run('b', nB), run('c', nC), run('d', nD), run('e', nE)
	stream := []Request{
		{Body: body(msg("user", A, true)), Model: "claude-opus-4-5"},
		{Body: body(msg("user", A, false), msg("assistant", B, false), msg("user", C, true)), Model: "claude-opus-4-5"},
		{Body: body(msg("user", A, false), msg("assistant", B, false), msg("user", C, false), msg("assistant", D, false), msg("user", E, true)), Model: "claude-opus-4-5"},
	}
	rw := func(b []byte, _ time.Time) (Outcome, error) {
		if !bytes.Contains(b, []byte(D)) {
			return Outcome{Body: b, Stages: []Stage{{Name: "shrink", Body: b}, {Name: "clear", Body: b}}}, nil
		}
		y := bytes.Replace(b, []byte(C), []byte(run('y', nY)), 1)
		z := bytes.Replace(b, []byte(C), []byte(run('z', nZ)), 1)
		return Outcome{Body: z, Reported: true, Stages: []Stage{{Name: "shrink", Edits: 1, Body: y}, {Name: "clear", Edits: 1, Body: z}}}, nil
	}
	return stream, rw
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestHandComputedFixture(t *testing.T) {
	stream, rw := fixture()
	st, err := Measure("fixture", stream, rw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Worked by hand. Segments: A | A B C | A B C D E (a message's first
	// block carries its role; the marker is not part of the bytes).
	type want struct {
		orig, sent             int
		origCost, sentCost     float64
		origBP, sentBP         float64
		origRead, sentRead     int
		origBPRead, sentBPRead int
		event                  bool
		shrink, clear          int
	}
	wants := []want{
		// Request 1: nothing cached: 100 tokens written at 1.25.
		{orig: tA, sent: tA, origCost: 125, sentCost: 125, origBP: 125, sentBP: 125},
		// Request 2: A (100) is request 1 again, read at 0.1; B + C (250)
		// written: 10 + 312.5. Breakpoint model: C's marker looks back to
		// A, whose prefix request 1's marker cached: the same.
		{orig: 350, sent: 350, origCost: 322.5, sentCost: 322.5, origBP: 322.5, sentBP: 322.5,
			origRead: 100, sentRead: 100, origBPRead: 100, sentBPRead: 100},
		// Request 3, original: A B C (350) read, D E (30) written: 35 +
		// 37.5 = 72.5, in both models (E's marker reaches C's entry).
		// Sent: A B D E and Z instead of C = 190 tokens. Prefix model: A
		// and B shared (150), and of Z's 65 bytes ("\x00user:" 6,
		// `{"type":"text","text":` 22, the string 37) the first 29 equal
		// C's: 10*29/65 = 4 (integer) tokens more: 154 read, 36 written:
		// 15.4 + 45 = 60.4. Breakpoint model: the only cached prefix E's
		// marker reaches is A (request 1's), 100 read, 90 written: 10 +
		// 112.5 = 122.5. Not an extension of request 2: an edit event.
		// Passes: shrink 380 -> 230 (150), clear 230 -> 190 (40).
		{orig: 380, sent: 190, origCost: 72.5, sentCost: 60.4, origBP: 72.5, sentBP: 122.5,
			origRead: 350, sentRead: 154, origBPRead: 350, sentBPRead: 100, event: true, shrink: 150, clear: 40},
	}
	if len(st.Requests) != len(wants) {
		t.Fatalf("%d requests measured, want %d", len(st.Requests), len(wants))
	}
	for i, w := range wants {
		r := st.Requests[i]
		if r.OrigTokens != w.orig || r.SentTokens != w.sent {
			t.Errorf("request %d: tokens %d -> %d, want %d -> %d", i+1, r.OrigTokens, r.SentTokens, w.orig, w.sent)
		}
		if !near(r.OrigCost, w.origCost) || !near(r.SentCost, w.sentCost) {
			t.Errorf("request %d: cost %v -> %v, want %v -> %v", i+1, r.OrigCost, r.SentCost, w.origCost, w.sentCost)
		}
		if !near(r.OrigBPCost, w.origBP) || !near(r.SentBPCost, w.sentBP) {
			t.Errorf("request %d: breakpoint cost %v -> %v, want %v -> %v", i+1, r.OrigBPCost, r.SentBPCost, w.origBP, w.sentBP)
		}
		if r.OrigRead != w.origRead || r.SentRead != w.sentRead || r.OrigBPRead != w.origBPRead || r.SentBPRead != w.sentBPRead {
			t.Errorf("request %d: reads %d %d %d %d, want %d %d %d %d", i+1, r.OrigRead, r.SentRead, r.OrigBPRead, r.SentBPRead,
				w.origRead, w.sentRead, w.origBPRead, w.sentBPRead)
		}
		if r.Event != w.event || r.Reported != w.event {
			t.Errorf("request %d: event %v (reported %v), want %v", i+1, r.Event, r.Reported, w.event)
		}
		if len(r.Passes) != 2 || r.Passes[0].Saved != w.shrink || r.Passes[1].Saved != w.clear {
			t.Errorf("request %d: passes %+v, want shrink %d, clear %d", i+1, r.Passes, w.shrink, w.clear)
		}
	}
	tot := st.Totals()
	if tot.Requests != 3 || tot.OrigTokens != 830 || tot.SentTokens != 640 || tot.PeakOrig != 380 || tot.PeakSent != 350 {
		t.Errorf("totals %+v", tot)
	}
	if !near(tot.OrigCost, 520) || !near(tot.SentCost, 507.9) || !near(tot.OrigBPCost, 520) || !near(tot.SentBPCost, 570) {
		t.Errorf("total costs %v %v %v %v, want 520 507.9 520 570", tot.OrigCost, tot.SentCost, tot.OrigBPCost, tot.SentBPCost)
	}
	if tot.Events != 1 || tot.OrigEvents != 0 || tot.Reported != 1 || tot.Invalid != 0 {
		t.Errorf("events %d, original %d, reported %d, invalid %d; want 1 0 1 0", tot.Events, tot.OrigEvents, tot.Reported, tot.Invalid)
	}
	if len(tot.Passes) != 2 || tot.Passes[0] != (PassTokens{"shrink", 1, 150}) || tot.Passes[1] != (PassTokens{"clear", 1, 40}) {
		t.Errorf("pass totals %+v", tot.Passes)
	}

	// Money at claude-opus-4-5's rates ($6.25 write, $0.50 read per MTok).
	// Prefix model: original reads 0+100+350 = 450, writes 100+250+30 =
	// 380: 225 + 2375 = 2600 µ$; sent reads 254, writes 386: 127 +
	// 2412.5. Breakpoint model: original as above; sent reads 200, writes
	// 440: 100 + 2750.
	var sr SessionReport
	unpriced, used := map[string]bool{}, PriceTable{}
	sr.fill(st, stream, nil, DefaultPrices(), unpriced, used)
	s := sr.Summary
	if !near(s.OrigUSD, 2600e-6) || !near(s.SentUSD, 2539.5e-6) || !near(s.OrigBPUSD, 2600e-6) || !near(s.SentBPUSD, 2850e-6) {
		t.Errorf("money %v %v %v %v, want 0.0026 0.0025395 0.0026 0.00285", s.OrigUSD, s.SentUSD, s.OrigBPUSD, s.SentBPUSD)
	}
	if s.TokenRatio != 640.0/830 || s.CostRatio != 507.9/520 || s.BPCostRatio != 570.0/520 {
		t.Errorf("ratios %v %v %v", s.TokenRatio, s.CostRatio, s.BPCostRatio)
	}
	if len(unpriced) != 0 || len(used) != 1 {
		t.Errorf("unpriced %v, used %v", unpriced, used)
	}
}

// The breakpoint model looks back at most 20 block boundaries from a
// marker: request 1 caches A at its marker; request 2 adds k blocks of 10
// tokens after A and marks the last. With k = 20 the marker's lookback
// reaches A (blocks 20..0), with k = 21 it stops one short.
func TestBreakpointLookback(t *testing.T) {
	for _, k := range []int{20, 21} {
		A, D := run('a', nA), run('d', nD)
		blocks := []string{`{"type":"text","text":"` + A + `"}`}
		for i := 0; i < k; i++ {
			b := `{"type":"text","text":"` + D + `"`
			if i == k-1 {
				b += `,"cache_control":{"type":"ephemeral"}`
			}
			blocks = append(blocks, b+"}")
		}
		stream := []Request{
			{Body: body(msg("user", A, true))},
			{Body: body(`{"role":"user","content":[` + strings.Join(blocks, ",") + `]}`)},
		}
		st, err := Session("lookback", stream, func(b []byte) ([]byte, error) { return b, nil }, Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := st.Requests[1]
		total := float64(tA + k*tD)
		wantBP := 0.1*tA + 1.25*(total-tA) // A read
		if k == 21 {
			wantBP = 1.25 * total // nothing read
		}
		if r.OrigTokens != tA+k*tD || !near(r.OrigCost, 0.1*tA+1.25*(total-tA)) || !near(r.OrigBPCost, wantBP) {
			t.Errorf("k=%d: tokens %d cost %v bp %v, want %v %v %v", k, r.OrigTokens, r.OrigCost, r.OrigBPCost, total, 0.1*tA+1.25*(total-tA), wantBP)
		}
	}
}

func TestReportJSONGolden(t *testing.T) {
	rep := testdataReport(t, fakePipeline())
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.golden.json", buf.Bytes())
	// It decodes back to the same report.
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Total.Requests != rep.Total.Requests || len(back.Sessions) != len(rep.Sessions) || back.Version != ReportVersion {
		t.Errorf("round trip: %+v", back.Total)
	}
}

func TestWriteText(t *testing.T) {
	rep := testdataReport(t, fakePipeline())
	var buf bytes.Buffer
	if err := rep.WriteText(&buf, TextOptions{Requests: true}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"passes: noop, fakeclear",
		"TOTAL",
		"tokens saved by pass",
		"cache-aware cost:",
		"edit events:",
		"quote retention:",
		"malformed lines skipped",
		"repaired:",
		"token estimate vs API usage",
		"EDIT EVENT",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}

func TestProgressBar(t *testing.T) {
	var buf bytes.Buffer
	p := &ProgressBar{W: &buf, Width: 10}
	p.Update(5, 10)
	p.Update(6, 10) // within 100 ms: not drawn
	p.Update(10, 10)
	p.Done()
	want := "\rreplaying [#####-----]  50% 5/10 requests" + "\rreplaying [##########] 100% 10/10 requests" + "\r\x1b[K"
	if buf.String() != want {
		t.Errorf("got %q\nwant %q", buf.String(), want)
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./replay -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (go test ./replay -update rewrites it); first difference at byte %d", path, firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// The JSON of three hand-made sessions: the cost fixture, the quote
// fixture with its quoted lines stubbed away (per-request quotes, lost
// quote examples), and a compaction (its quote retrievable from the
// compaction's blob, its summary's fact recall).
func TestFixtureJSONGolden(t *testing.T) {
	r := threeSessionReport(t)
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, "fixture.golden.json", buf.Bytes())
}

// The text report of the three hand-made sessions says what the agent
// keeps: the summary's recall by kind, per session and per compaction,
// the missed facts, and why quoted lines left the request.
func TestWriteTextRecall(t *testing.T) {
	r := threeSessionReport(t)
	var buf bytes.Buffer
	if err := r.WriteText(&buf, TextOptions{Requests: true}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"not in the request: 1 cleared in place (0 retrievable), 1 replaced by a compaction (1 retrievable)\n",
		"what the agent keeps: facts of the messages 1 compaction replaced, found in the summary\n",
		"  the user's requests                                    1/1  100.0%\n",
		"  files read, created, edited, deleted                   0/1    0.0%\n",
		"  unique commands                                        0/0  100.0%\n",
		"  compacted, 1 compaction: requests 1/1, files 0/1, searches 0/0, commands 0/0, failures 0/0, errors 0/0, identifiers 0/0\n",
		"  missed files: compacted request 2: \"/p.go\"\n",
		"  summary of request 2 (3 messages, 57 tokens) keeps requests 1/1, files 0/1,",
		"    missed files: \"/p.go\"\n",
	} {
		// Lines as they read, whatever the column widths.
		if !strings.Contains(squeeze(out), squeeze(want)) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}

// squeeze turns every run of spaces into one.
func squeeze(s string) string {
	for strings.Contains(s, "  ") {
		s = strings.ReplaceAll(s, "  ", " ")
	}
	return s
}

// threeSessionReport is the report of the cost fixture, the quote fixture
// and the compaction fixture.
func threeSessionReport(t *testing.T) *Report {
	t.Helper()
	r := fixtureReport(t)
	st, err := Measure("quotes", quoteStream(answerText("The bug is in `func computeTotalPrice(items []Item) int {` here.")), stubber(nil, false), Options{})
	if err != nil {
		t.Fatal(err)
	}
	sr := SessionReport{ID: "quote-session", Name: "quotes", PerRequest: []RequestReport{}}
	unpriced, used := map[string]bool{}, PriceTable{}
	sr.fill(st, nil, nil, DefaultPrices(), unpriced, used)
	r.Sessions = append(r.Sessions, sr)
	// A compaction whose summary keeps the request but not the file.
	mem := store.NewMemory()
	st, err = Measure("compacted", compactionStream("- // totals are computed in cents, never floats"), compactor(mem, true, "look at prices the user typed this very line as well"), Options{Store: mem})
	if err != nil {
		t.Fatal(err)
	}
	sr = SessionReport{ID: "compacted-session", Name: "compacted", PerRequest: []RequestReport{}}
	sr.fill(st, nil, nil, DefaultPrices(), unpriced, used)
	r.Sessions = append(r.Sessions, sr)
	r.finish(nil, unpriced, used)
	wantQuotes := QuoteStats{Quotes: 2, Lost: 1, Cleared: 1, Retrievable: 1, Compacted: 1, CompactedRetrievable: 1}
	if r.Total.Quotes != wantQuotes || len(r.Unpriced) != 1 || r.Unpriced[0] != "(no model)" {
		t.Errorf("quotes %+v, unpriced %q", r.Total.Quotes, r.Unpriced)
	}
	if rc := r.Total.Recall; rc == nil || rc[FactRequest] != (FactCount{Found: 1, Total: 1}) || rc[FactFile] != (FactCount{Total: 1}) || rc.Facts() != 2 {
		t.Errorf("recall %v", rc)
	}
	return r
}
