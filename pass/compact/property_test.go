package compact

// Property tests: the compaction pass keeps its contract on whole
// generated sessions (tools/sessiongen) written in each protocol
// (Anthropic Messages, OpenAI Responses, OpenAI Chat Completions, Gemini), under
// summarizers that answer, fail, answer nothing usable or never answer in
// time, and stores that fail. Every request of a session goes through one
// long-lived pass (a process that saw the session's earlier requests) and
// then through a fresh pass on the same store (a restarted process, or a
// second instance), and the tests check, per request:
//
//  1. the same bytes, headers and notes from the fresh process;
//  2. validity by the protocol's own rules (validate.Rewrite with
//     compaction and the thinking setting allowed, responses and chat
//     ValidateRewrite);
//  3. never above the overflow line (window − max output), estimated on
//     the whole body sent;
//  4. the summary message names the blobs that hold, oldest first, the
//     summarized messages word for word (AppendTranscript of the span),
//     Result.Blobs lists exactly those, and after it come the span's
//     system and developer messages and the client's messages from the
//     span's end on, byte for byte;
//  5. the "edit-event" note and the compaction note are set exactly on the
//     request that carries a compaction for the first time;
//
// and between consecutive requests of a session where the client's
// request N+1 extends its request N:
//
//  6. stickiness: the request sent N+1 extends the request sent N (the
//     prompt cache's view for Anthropic; every message but the client's
//     last byte for byte for OpenAI's) unless N+1 carries a compaction
//     for the first time;
//  7. a compaction stays: the messages summarized only grow, and while
//     they do not, the summary is the same text; a summary record, once
//     stored, is never replaced (the store checks every write).
//
// With a failing store each request either fails open (the client's body
// unchanged, the failure reported by the pipeline as the pass's) or
// passes checks 1-4.
//
// `go test` runs a few sessions per protocol and configuration, within
// seconds; CTXGUARD_PROPERTY_LONG=1 runs many more, and longer ones.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/gemini"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
	"github.com/ctxguard/ctxguard/tools/prompt"
	"github.com/ctxguard/ctxguard/tools/sessiongen"
	"github.com/ctxguard/ctxguard/tools/transcript"
	"github.com/ctxguard/ctxguard/tools/validate"
)

func longRun() bool { return os.Getenv("CTXGUARD_PROPERTY_LONG") != "" }

// wire is one protocol the properties are checked in.
type wire struct {
	name  string // transcript.BuildOptions.Protocol
	proto protocol.Protocol
	valid func(orig, sent []byte) error
}

var wires = []wire{
	{transcript.ProtoAnthropic, anthropic.Protocol, func(orig, sent []byte) error {
		return validate.Rewrite(orig, sent, validate.Options{AllowCompaction: true, AllowTopLevel: []string{"thinking"}})
	}},
	{transcript.ProtoResponses, responses.Protocol, responses.ValidateRewrite},
	{transcript.ProtoChat, chat.Protocol, chat.ValidateRewrite},
	{transcript.ProtoGemini, gemini.Protocol, gemini.ValidateRewrite},
}

// propSummarizer is a model whose behaviour a configuration sets:
// "answer" writes a short summary naming the span (deterministic),
// "fail" errs, "empty" answers no text, "long" answers far over any
// budget, "block" never answers before its context ends.
//
// Its answers are held back while a request is checked (hold, then
// release): what a request sends depends on the summaries the store holds
// when it asks, so a background summary must not land between the
// long-lived process's run of a request and the fresh process's.
type propSummarizer struct {
	mode  string
	mu    sync.Mutex
	calls int
	gate  chan struct{} // closed: answers go
}

func newPropSummarizer(mode string) *propSummarizer {
	s := &propSummarizer{mode: mode, gate: make(chan struct{})}
	close(s.gate)
	return s
}

// hold keeps the answers back until release.
func (s *propSummarizer) hold() {
	s.mu.Lock()
	s.gate = make(chan struct{})
	s.mu.Unlock()
}

func (s *propSummarizer) release() {
	s.mu.Lock()
	close(s.gate)
	s.mu.Unlock()
}

func (s *propSummarizer) Summarize(ctx context.Context, j *pass.Job) (pass.Summary, error) {
	s.mu.Lock()
	s.calls++
	gate := s.gate
	s.mu.Unlock()
	select {
	case <-gate:
	case <-ctx.Done():
		return pass.Summary{}, ctx.Err()
	}
	switch s.mode {
	case "fail":
		return pass.Summary{}, errors.New("the model said 529 overloaded")
	case "empty":
		return pass.Summary{Text: " \n", Model: "small"}, nil
	case "long":
		return pass.Summary{Text: strings.Repeat("All of it, at length. ", j.MaxTokens), Model: "small"}, nil
	case "block":
		<-ctx.Done()
		return pass.Summary{}, ctx.Err()
	}
	return pass.Summary{Text: fmt.Sprintf("MODEL SUMMARY of %d bytes: the user asked for work, it was done.", len(j.Input)), Model: "small", InputTokens: len(j.Input) / 4, OutputTokens: 20}, nil
}

func (s *propSummarizer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// propConfig is one configuration the properties are checked under.
type propConfig struct {
	name string
	cfg  Config
	env  pipeline.Env
	sum  string // propSummarizer's mode; "" for no summarizer
	// failStore makes one store operation in every few fail.
	failStore bool
	// cold, if not 0, makes every cold-th request one that found the
	// prompt cache cold (pipeline.Env.Cold).
	cold int
}

// smallEnv is a model whose window generated sessions outgrow several
// times: the overflow line is 26,000 tokens (prepare 15,600, swap
// 19,500), 6,000 newest tokens protected, a 3,250-token summary.
var smallEnv = pipeline.Env{Window: 30_000, MaxOutput: 4_000}

func propConfigs() []propConfig {
	// A request at the overflow line waits for a summary being written
	// for a millisecond: answers are held while a request is checked
	// (propSummarizer), so it takes the extractive summary.
	// TestWaitAtLine checks the wait.
	cfg := Defaults()
	cfg.Wait = time.Millisecond
	tokensCfg := cfg
	tokensCfg.Prepare, tokensCfg.Swap = model.Tokens(8_000), model.Tokens(12_000)
	tokensCfg.Protect, tokensCfg.SummaryBudget = model.Tokens(3_000), model.Tokens(1_500)
	binding := smallEnv
	binding.Binding = true
	return []propConfig{
		{name: "extractive", cfg: cfg, env: smallEnv},
		{name: "model", cfg: cfg, env: smallEnv, sum: "answer"},
		{name: "model-fails", cfg: cfg, env: smallEnv, sum: "fail"},
		{name: "model-empty", cfg: cfg, env: smallEnv, sum: "empty"},
		{name: "model-too-long", cfg: cfg, env: smallEnv, sum: "long"},
		{name: "model-late", cfg: cfg, env: smallEnv, sum: "block"},
		{name: "tokens-binding", cfg: tokensCfg, env: binding, sum: "answer"},
		{name: "tokens-extractive", cfg: tokensCfg, env: smallEnv},
		{name: "extractive-cold", cfg: cfg, env: smallEnv, cold: 4},
		{name: "model-cold", cfg: cfg, env: smallEnv, sum: "answer", cold: 4},
	}
}

// onceStore is a store that checks that compaction records and
// activations are written once and never replaced, and can fail one
// operation in every few (deterministically, by a counter).
type onceStore struct {
	*store.Memory
	t     testing.TB
	where *string // the request being checked, for messages
	fail  bool

	mu      sync.Mutex
	n       int
	written map[string]string
}

var errStoreDown = errors.New("store down")

// failNow reports whether this operation fails: one in seven, when set.
func (s *onceStore) failNow() bool {
	if !s.fail {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return s.n%7 == 3
}

func (s *onceStore) Get(ctx context.Context, key string) ([]byte, error) {
	if s.failNow() {
		return nil, errStoreDown
	}
	return s.Memory.Get(ctx, key)
}

func (s *onceStore) PutBlob(ctx context.Context, id string, data []byte) error {
	if s.failNow() {
		return errStoreDown
	}
	return s.Memory.PutBlob(ctx, id, data)
}

func (s *onceStore) Put(ctx context.Context, key string, val []byte) error {
	if s.failNow() {
		return errStoreDown
	}
	s.check(key, val)
	return s.Memory.Put(ctx, key, val)
}

func (s *onceStore) PutIfAbsent(ctx context.Context, key string, val []byte) ([]byte, bool, error) {
	if s.failNow() {
		return nil, false, errStoreDown
	}
	cur, stored, err := s.Memory.PutIfAbsent(ctx, key, val)
	if stored {
		s.check(key, val)
	}
	return cur, stored, err
}

// check records a write of a decision and reports one that replaces an
// earlier decision with another value. Leases change by design.
func (s *onceStore) check(key string, val []byte) {
	if !strings.HasPrefix(key, "compact/") || strings.HasSuffix(key, "/lease") {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.written == nil {
		s.written = map[string]string{}
	}
	if old, ok := s.written[key]; ok && old != string(val) {
		s.t.Errorf("%s: decision %s replaced:\n%.300s\nby\n%.300s", *s.where, key, old, val)
	}
	s.written[key] = string(val)
}

// propStats counts what a check covered.
type propStats struct {
	sessions, requests, compared, compactions, failedOpen int
	model, extractive                                     int // compactions whose summary is a model's / extractive
	coldSwaps                                             int // compactions at a cold request below swap
	peak                                                  float64
}

func (s *propStats) add(o propStats) {
	s.sessions += o.sessions
	s.requests += o.requests
	s.compared += o.compared
	s.compactions += o.compactions
	s.failedOpen += o.failedOpen
	s.model += o.model
	s.extractive += o.extractive
	s.coldSwaps += o.coldSwaps
	s.peak = max(s.peak, o.peak)
}

func (s propStats) String() string {
	return fmt.Sprintf("%d sessions, %d requests (%d compared with the previous), %d compactions (%d with a model's summary, %d extractive, %d at a cold request below swap), %d failed open, largest request sent %.0f%% of the overflow line",
		s.sessions, s.requests, s.compared, s.compactions, s.model, s.extractive, s.coldSwaps, s.failedOpen, 100*s.peak)
}

// sent is what one request produced, for the next to be checked against.
type sent struct {
	orig, body []byte
	origC      *conversation.Conversation
	sentC      *conversation.Conversation
	summary    string // the summary message's text, "" for none
	count      int    // messages it summarizes
	event      bool   // it carries a compaction for the first time
}

// generatedIn returns the request stream of a generated session written
// in protocol w.
func generatedIn(t testing.TB, w wire, seed uint64, opt sessiongen.Options) [][]byte {
	t.Helper()
	opt.Protocol = w.name
	s, err := sessiongen.Generate(rand.New(rand.NewPCG(seed, 7)), opt)
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := s.Requests()
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, 0, len(reqs))
	for _, rq := range reqs {
		if rq.Reset {
			out = out[:0] // a new history: keep the stream that follows it
		}
		out = append(out, rq.Body)
	}
	return out
}

// checkStream runs a session's requests through pc and checks every
// property. It reports failures on t and returns what it covered.
func checkStream(t testing.TB, w wire, pc propConfig, name string, reqs [][]byte) propStats {
	t.Helper()
	st := propStats{sessions: 1}
	var where string
	ost := &onceStore{Memory: store.NewMemory(), t: t, where: &where, fail: pc.failStore}
	var sum pass.Summarizer
	var model *propSummarizer
	if pc.sum != "" {
		model = newPropSummarizer(pc.sum)
		sum = model
	}
	long, err := New(pc.cfg, Options{Blobs: &store.Blobs{Store: ost, BaseURL: propBaseURL}, Summarizer: sum})
	if err != nil {
		t.Fatal(err)
	}
	defer long.Close()
	lim := pc.cfg.resolve(pc.env.Window, pc.env.MaxOutput)
	memo := map[string]any{}
	var prev *sent
	var cold []int // the requests that found the cache cold, by message count
	for k, orig := range reqs {
		where = fmt.Sprintf("%s [%s] request %d", name, pc.name, k)
		origC, err := w.proto.Parse(orig)
		if err != nil {
			t.Fatalf("%s: the original does not parse: %v", where, err)
		}
		isCold := pc.cold > 0 && k%pc.cold == pc.cold-1
		if isCold {
			cold = append(cold, len(origC.Messages))
		}
		stable := 0
		if prev != nil {
			stable = w.proto.Stable(prev.origC, orig)
		}
		env := pc.env
		env.Protocol = w.proto.Name()
		env.Cold = slices.Clone(cold)
		if model != nil {
			model.hold()
		}
		res := pipeline.New(nil, long).Run(&pipeline.Request{Conv: origC, Env: &env, Memo: memo, Stable: stable})
		var cur *sent
		if res.Err == nil {
			cur = checkRequest(t, w, pc, where, lim, orig, origC, res, ost, env)
		}
		if model != nil {
			model.release()
			if pc.sum != "block" {
				long.WaitIdle() // a model's summary is in the store before the next request
			}
		}
		st.requests++
		if res.Err != nil {
			if !pc.failStore {
				t.Errorf("%s: the pass failed: %v", where, res.Err)
				return st
			}
			if !bytes.Equal(res.Body, orig) || res.FailedIn != "compact" {
				t.Errorf("%s: a failure (%v in %q) did not send the original", where, res.Err, res.FailedIn)
				return st
			}
			st.failedOpen++
			prev = nil // the client's history went out whole: nothing to compare with
			continue
		}
		if cur == nil {
			return st
		}
		if cur.event {
			st.compactions++
			if isCold && tokens.Estimate(orig) < lim.swap {
				st.coldSwaps++
			}
			if strings.Contains(cur.summary, "MODEL SUMMARY of") {
				st.model++
			} else {
				st.extractive++
			}
		}
		st.peak = max(st.peak, float64(tokens.Estimate(cur.body))/float64(lim.line))
		if prev != nil {
			st.compared++
			checkSticky(t, w, pc, where, prev, cur)
		}
		if t.Failed() {
			return st
		}
		prev = cur
	}
	if model != nil && pc.sum != "answer" && st.compactions > 0 && model.count() == 0 {
		t.Errorf("%s: compactions without asking the model", name)
	}
	return st
}

const propBaseURL = "http://127.0.0.1:8787"

// checkRequest checks properties 1-5 of one request and returns what it
// sent, or nil after a failure.
func checkRequest(t testing.TB, w wire, pc propConfig, where string, lim limits, orig []byte, origC *conversation.Conversation, res pipeline.Result, st *onceStore, env pipeline.Env) *sent {
	t.Helper()
	// 1. A fresh process on the same store.
	var sum pass.Summarizer
	if pc.sum != "" {
		sum = newPropSummarizer(pc.sum)
	}
	fresh, err := New(pc.cfg, Options{Blobs: &store.Blobs{Store: st.Memory, BaseURL: propBaseURL}, Summarizer: sum})
	if err != nil {
		t.Fatal(err)
	}
	// The same environment: the engine gives a fresh process the same
	// stored cold requests.
	again := pipeline.New(nil, fresh).Run(&pipeline.Request{Conv: origC, Env: &env})
	fresh.Close()
	if again.Err != nil {
		t.Errorf("%s: a fresh process failed: %v", where, again.Err)
		return nil
	}
	if !bytes.Equal(res.Body, again.Body) {
		t.Errorf("%s: a fresh process on the same store sends other bytes: %s", where, firstDiff(res.Body, again.Body))
		return nil
	}
	if !slices.Equal(res.Headers, again.Headers) || !slices.Equal(res.Notes, again.Notes) {
		t.Errorf("%s: headers %v / %v, notes %v / %v", where, res.Headers, again.Headers, res.Notes, again.Notes)
	}
	// 2. Valid.
	if err := w.valid(orig, res.Body); err != nil {
		t.Errorf("%s: invalid rewrite: %v", where, err)
		return nil
	}
	sentC, err := w.proto.Parse(res.Body)
	if err != nil {
		t.Errorf("%s: the rewrite does not parse: %v", where, err)
		return nil
	}
	cur := &sent{orig: orig, body: res.Body, origC: origC, sentC: sentC}
	// 3. Under the line.
	if n := tokens.Estimate(res.Body); n > lim.line {
		t.Errorf("%s: %d tokens sent, above the overflow line %d", where, n, lim.line)
	}
	// 4. The summary, its blobs, and what follows it.
	first := firstUser(origC)
	var blobs []string
	if first >= 0 && first < len(sentC.Messages) {
		cur.summary, cur.count, blobs = summaryOf(sentC, &sentC.Messages[first])
	}
	if cur.summary == "" {
		if !bytes.Equal(res.Body, orig) {
			t.Errorf("%s: changed without a compaction: %s", where, firstDiff(orig, res.Body))
		}
	} else {
		checkCompacted(t, where, cur, first, blobs, res.Blobs, st)
	}
	// 5. The notes.
	cur.event = slices.Contains(res.Notes, "edit-event")
	var key string
	for _, n := range res.Notes {
		if k, ok := strings.CutPrefix(n, NotePrefix); ok {
			key = k
		}
	}
	if cur.event != (key != "") || cur.event && cur.summary == "" {
		t.Errorf("%s: notes %v on a request with a summary of %d messages", where, res.Notes, cur.count)
	}
	if key != "" {
		if rec, err := ReadRecord(context.Background(), st.Memory, key); err != nil || rec.Text != cur.summary {
			t.Errorf("%s: the noted record %s is not the summary sent (%v)", where, key, err)
		}
	}
	return cur
}

var (
	noteRE = regexp.MustCompile(`^` + regexp.QuoteMeta(conversation.CompactionNote) + `(\d+) messages of this conversation into the summary below`)
	blobRE = regexp.MustCompile(`blob ([a-z]{13})\b`)
)

// summaryOf returns the text of message m when it is a compaction
// summary, the number of messages it stands for, and the blobs its note
// names; "" when it is not one.
func summaryOf(c *conversation.Conversation, m *conversation.Message) (text string, count int, blobs []string) {
	if len(m.Blocks) != 1 || m.Blocks[0].Kind != conversation.Text {
		return "", 0, nil
	}
	text = c.String(m.Blocks[0].Text)
	sm := noteRE.FindStringSubmatch(text)
	if sm == nil {
		return "", 0, nil
	}
	count, _ = strconv.Atoi(sm[1])
	note, _, _ := strings.Cut(text, "\n")
	for _, b := range blobRE.FindAllStringSubmatch(note, -1) {
		blobs = append(blobs, b[1])
	}
	return text, count, blobs
}

// checkCompacted checks property 4 of a request that carries a summary.
func checkCompacted(t testing.TB, where string, cur *sent, first int, blobs, resBlobs []string, st *onceStore) {
	t.Helper()
	o, s := cur.origC, cur.sentC
	end := first + cur.count
	if cur.count <= 0 || end >= len(o.Messages) || o.Messages[end].Role != conversation.RoleAssistant {
		t.Errorf("%s: the summary stands for %d messages from %d of %d: not a span ending before an assistant message", where, cur.count, first, len(o.Messages))
		return
	}
	// What follows the summary: the span's instructions, then the
	// client's messages from its end on.
	want := []string{}
	for i := first + 1; i < len(o.Messages); i++ {
		if i >= end || keepsRole(o.Messages[i].Role) {
			want = append(want, string(o.Bytes(o.Messages[i].Span)))
		}
	}
	got := []string{}
	for i := first + 1; i < len(s.Messages); i++ {
		got = append(got, string(s.Bytes(s.Messages[i].Span)))
	}
	if !slices.Equal(want, got) {
		t.Errorf("%s: the messages after the summary are not the client's from message %d on", where, end)
	}
	if !bytes.Equal(cur.body[:s.Messages[first].Span.Start], cur.orig[:o.Messages[first].Span.Start]) {
		t.Errorf("%s: the bytes before the summary changed", where)
	}
	if d := slices.Compare(blobs, resBlobs); d != 0 {
		t.Errorf("%s: the note names blobs %v, Result.Blobs %v", where, blobs, resBlobs)
	}
	if strings.Contains(cur.summary, "The originals could not be kept.") {
		if !st.fail {
			t.Errorf("%s: the originals were not kept", where)
		}
		return
	}
	// The blobs hold the summarized messages, oldest first.
	var all []byte
	for _, id := range blobs {
		rc, err := st.Memory.OpenBlob(context.Background(), id)
		if err != nil {
			t.Errorf("%s: blob %s: %v", where, id, err)
			return
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		all = append(all, b...)
	}
	tr, err := o.AppendTranscript(nil, first, end-1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(all, tr) && !st.fail {
		t.Errorf("%s: the blobs %v do not hold messages [%d, %d) word for word: %s", where, blobs, first, end, firstDiff(tr, all))
	}
}

// checkSticky checks properties 6 and 7 between two consecutive requests.
func checkSticky(t testing.TB, w wire, pc propConfig, where string, prev, cur *sent) {
	t.Helper()
	if !clientExtends(w, prev.orig, cur.orig, prev.origC, cur.origC) {
		return
	}
	// 7. A compaction stays.
	switch {
	case cur.count < prev.count:
		t.Errorf("%s: the summary stands for %d messages, the previous one for %d", where, cur.count, prev.count)
	case cur.count == prev.count && cur.summary != prev.summary:
		t.Errorf("%s: the summary changed without a new compaction", where)
	case cur.count > prev.count && !cur.event:
		t.Errorf("%s: the summary grew from %d to %d messages without an edit event", where, prev.count, cur.count)
	}
	// 6. Sticky between compactions.
	if cur.event {
		return
	}
	if !clientExtends(w, prev.body, cur.body, prev.sentC, cur.sentC) {
		t.Errorf("%s: the request sent does not extend the previous one, and no compaction happened: %s", where, firstDiff(prev.body, cur.body))
	}
}

// clientExtends reports whether request b is request a plus appended
// turns: by the prompt cache's view for Anthropic (the moving marker and
// the client's re-encoding of its last message ignored), else every
// message of a but the last byte for byte in b, and everything before
// the messages the same.
func clientExtends(w wire, a, b []byte, ac, bc *conversation.Conversation) bool {
	if w.proto == anthropic.Protocol {
		ok, err := prompt.Extends(a, b)
		return err == nil && ok
	}
	if len(bc.Messages) < len(ac.Messages) || !bytes.Equal(a[:ac.List.Start], b[:bc.List.Start]) {
		return false
	}
	for i := 0; i < len(ac.Messages)-1; i++ {
		if !bytes.Equal(ac.Bytes(ac.Messages[i].Span), bc.Bytes(bc.Messages[i].Span)) {
			return false
		}
	}
	return true
}

// firstDiff describes where a and b first differ.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(i-80, 0)
	return fmt.Sprintf("at byte %d of %d/%d: %q vs %q", i, len(a), len(b), a[from:min(i+80, len(a))], b[from:min(i+80, len(b))])
}

// propSessions is how many generated sessions each protocol is checked
// on, per configuration, and their options.
func propSessions() (int, sessiongen.Options) {
	if longRun() {
		return 12, sessiongen.Options{Turns: 160, MaxResult: 8_000}
	}
	return 1, sessiongen.Options{Turns: 90, MaxResult: 6_000}
}

// TestProperties checks every property on generated sessions in every
// protocol under every configuration.
func TestProperties(t *testing.T) {
	t.Parallel()
	n, opt := propSessions()
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			var total propStats
			for _, pc := range propConfigs() {
				var cs propStats
				for seed := range uint64(n) {
					reqs := generatedIn(t, w, seed, opt)
					cs.add(checkStream(t, w, pc, fmt.Sprintf("%s seed %d", w.name, seed), reqs))
					if t.Failed() {
						return
					}
				}
				t.Logf("%s: %v", pc.name, cs)
				if cs.compactions == 0 {
					t.Errorf("%s: no compaction: the sessions test nothing", pc.name)
				}
				if (pc.cold > 0) != (cs.coldSwaps > 0) {
					t.Errorf("%s: %d compactions at a cold request below swap", pc.name, cs.coldSwaps)
				}
				if pc.sum == "answer" && cs.model == 0 || pc.sum != "answer" && cs.model > 0 {
					t.Errorf("%s: %d compactions carry a model's summary", pc.name, cs.model)
				}
				total.add(cs)
			}
			t.Logf("total: %v", total)
		})
	}
}

// TestPropertiesFailingStore: with a store that fails one operation in
// seven, every request fails open or passes checks 1-4.
func TestPropertiesFailingStore(t *testing.T) {
	t.Parallel()
	n, opt := propSessions()
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			var total propStats
			for _, pc := range propConfigs()[:2] {
				pc.name += "-failing-store"
				pc.failStore = true
				for seed := range uint64(n) {
					total.add(checkStream(t, w, pc, fmt.Sprintf("%s seed %d", w.name, seed), generatedIn(t, w, seed, opt)))
					if t.Failed() {
						return
					}
				}
			}
			t.Logf("%v", total)
			if total.failedOpen == 0 || total.compactions == 0 {
				t.Errorf("%d requests failed open, %d compactions: the store's failures test nothing", total.failedOpen, total.compactions)
			}
		})
	}
}
