package clearing

// Property tests: the proof that the clearing pass keeps its contract on
// whole sessions, generated (tools/sessiongen) and real
// (tools/transcript/testdata). Every request of a session goes through
//
//   - a fresh pass with an empty store (a new process: a restart, or a
//     second instance), and
//   - one long-lived pass and store that saw the session's earlier
//     requests,
//
// and the tests check, per request:
//
//  1. reproducibility: both give identical bytes, betas and notes;
//  2. validity: validate.Rewrite accepts the rewrite (thinking removal,
//     input edits, cache markers and the "thinking" setting allowed);
//  3. at most 4 cache_control markers;
//  4. the latest assistant message's thinking blocks are untouched, and
//     every thinking block still sent is byte-identical to one the client
//     sent (no signature on altered thinking);
//  5. every stub names a blob that the store (the fresh one included)
//     holds with the original content: a result's text, an input field's
//     value, a trimmed run's messages; and the pipeline's Result.Blobs
//     lists exactly the blobs the stubs name;
//  6. every event of the plan frees at least clear_at_least tokens from a
//     request over the trigger, and the "edit-event" note is set exactly
//     on the requests where the plan has an event;
//
// and between consecutive requests of a session where request N+1 is
// request N plus appended turns (same model, system and tools; the client
// re-encoding its last message):
//
//  7. stickiness: the rewritten request N+1 extends the rewritten request N
//     (the normalization of prompt.Extends: cache_control
//     members and the client's string re-encoding of a message ignored) unless
//     the plan has an edit event at N+1; and, unless there is an event at
//     N+1, byte for byte from the messages array up to the message the
//     client re-encoded (when ctxguard's own spare marker moved, which it
//     does one request after each event to follow the latest event's
//     boundary, with cache_control members removed); everything after
//     the messages array is byte-identical when the client's was; and at
//     an event, the tokens the rewrite saves grow by about the plan's
//     "freed" (measured with the estimator on the bodies);
//  8. monotonicity: the plan of request N is the start of the plan of
//     request N+1 (its events replayed identically), the clear and
//     thinking boundaries never move back, and what was cleared stays
//     cleared with the same bytes (a stubbed result or input keeps its
//     stub, a removed thinking block stays removed).
//
// `go test` runs a sample sized to stay within a few seconds;
// CTXGUARD_PROPERTY_LONG=1 runs many more generated sessions, and
// CTXGUARD_SESSIONS=<dir> adds the Claude Code transcripts in dir.
//
// Violations these tests found have a minimal reproduction each, kept as
// regression tests: TestMarkerCostReplay (a moving marker changed a
// block's price), TestInputFreed (the plan over-counted cleared inputs),
// TestFrameChange (a changed system or tool list changed the plan),
// TestTrimValid and TestTrimFirstStub (trimming); and in package
// validate, TestRewriteTrimRepeatedText (the validator misaligned a
// trimmed run; found by protocols_property_test.go, which runs these
// checks over Anthropic, Responses and Chat Completions requests).

import (
	"context"
	"github.com/ctxguard/ctxguard/tools/prompt"

	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
	"github.com/ctxguard/ctxguard/tools/sessiongen"
	"github.com/ctxguard/ctxguard/tools/transcript"
	"github.com/ctxguard/ctxguard/tools/validate"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const propBaseURL = "http://127.0.0.1:8787"

// extends reports whether request b extends request a as the prompt
// cache sees them (prompt.Extends).
func extends(a, b []byte) (bool, error) { return prompt.Extends(a, b) }

// segmentsExtend reports whether prompt b starts with all of prompt a.
func segmentsExtend(a, b *prompt.Prompt) bool {
	_, ok := prompt.Shared(a, b)
	return ok
}

// propConfig is one configuration the properties are checked under.
type propConfig struct {
	name string
	cfg  Config
	env  pipeline.Env
}

// validateOptions are the changes the configuration may make.
func (pc propConfig) validateOptions() validate.Options {
	o := validateOpts
	o.AllowMessageRemoval = pc.cfg.Trim.Enabled
	o.AllowRoundTrimming = pc.cfg.Trim.Enabled
	return o
}

// smallConfig has thresholds that short generated sessions cross.
func smallConfig() Config {
	c := Defaults()
	c.Trigger = model.Tokens(3000)
	c.KeepTokens = model.Tokens(1000)
	c.KeepUses = 2
	c.ClearAtLeast = model.Tokens(1000)
	c.Payback = 0
	return c
}

// propConfigs are the configurations every session is checked under.
func propConfigs() []propConfig {
	def := propConfig{name: "defaults", cfg: Defaults()}

	small := propConfig{name: "small", cfg: smallConfig()}

	payback := propConfig{name: "small-payback", cfg: smallConfig()}
	payback.cfg.Trigger = model.Tokens(5000)
	payback.cfg.KeepTokens = model.Tokens(2000)
	payback.cfg.KeepUses = 3
	payback.cfg.ClearAtLeast = model.Tokens(2000)
	payback.cfg.Payback = 10

	tiny := propConfig{name: "tiny-selective", cfg: smallConfig()}
	tiny.cfg.Trigger = model.Tokens(1500)
	tiny.cfg.KeepTokens = model.Tokens(0)
	tiny.cfg.KeepUses = 0
	tiny.cfg.ClearAtLeast = model.Tokens(200)
	tiny.cfg.MinTokens = 0
	tiny.cfg.Tools = []string{"Bash", "Read", "Grep", "WebFetch", "mcp__*"}
	tiny.cfg.ExcludeTools = []string{"mcp__github__*"}
	tiny.cfg.ClearInputs = []string{"Write", "Edit"}
	tiny.cfg.Thinking = false
	tiny.cfg.CacheMarker = false

	frac := propConfig{name: "fraction-binding", cfg: smallConfig(), env: pipeline.Env{Window: 400_000, MaxOutput: 64_000, Binding: true}}
	frac.cfg.Trigger = model.Fraction(0.01)       // 4000
	frac.cfg.KeepTokens = model.Fraction(0.004)   // 1600
	frac.cfg.ClearAtLeast = model.Fraction(0.003) // 1200

	binding := propConfig{name: "defaults-binding", cfg: Defaults(), env: pipeline.Env{Binding: true}}

	return append([]propConfig{def, small, payback, tiny, frac, binding}, readsConfigs()...)
}

// readsConfigs keep file reads past the clear boundary within budgets
// that generated sessions fill: the reads rule with and without the
// payback rule (which keeps a read an earlier event kept until clearing
// it repays), and with trimming.
func readsConfigs() []propConfig {
	reads := propConfig{name: "small-reads", cfg: smallConfig()}
	reads.cfg.Reads = Reads{Tools: []string{"Read"}, KeepTokens: model.Tokens(1500)}
	reads.cfg.KeepTokens = model.Tokens(0)

	paid := propConfig{name: "small-reads-payback", cfg: reads.cfg}
	paid.cfg.Payback = 10
	paid.cfg.Trigger = model.Tokens(5000)
	paid.cfg.ClearAtLeast = model.Tokens(1500)

	trim := propConfig{name: "small-reads-trim", cfg: reads.cfg}
	trim.cfg.Reads.KeepTokens = model.Tokens(3000)
	trim.cfg.Trim = Trim{Enabled: true, KeepRounds: 1}
	return []propConfig{reads, paid, trim}
}

// trimConfig is smallConfig with tool-round trimming on.
func trimConfig() propConfig {
	pc := propConfig{name: "small-trim", cfg: smallConfig()}
	pc.cfg.Trim = Trim{Enabled: true, KeepRounds: 2}
	return pc
}

// streamReq is one request of a session's stream.
type streamReq struct {
	body  []byte
	reset bool // the client's history restarted: not compared with the previous
}

// propStats counts what a check covered.
type propStats struct {
	sessions, requests, events, markerMoves, compared int
	// stubs: rewritten results and inputs checked against their blobs;
	// dropped: results no longer sent (trimmed rounds), summed over the
	// requests.
	stubs, dropped   int
	eventsPerRequest map[int]int // events at a request -> requests
	// measured/planned: at the events with a previous request, the
	// growth of the tokens the rewrite saves over the plan's freed.
	measured, planned int
	minRatio          float64
	// keptReads: file reads the plans kept past their clear boundary and
	// the rewrites sent whole, summed over the requests; releasedReads:
	// reads an event kept and a later event cleared, over the sessions.
	keptReads, releasedReads int
}

func (s *propStats) add(o propStats) {
	s.sessions += o.sessions
	s.requests += o.requests
	s.events += o.events
	s.markerMoves += o.markerMoves
	s.compared += o.compared
	s.stubs += o.stubs
	s.dropped += o.dropped
	if s.eventsPerRequest == nil {
		s.eventsPerRequest = map[int]int{}
	}
	for k, v := range o.eventsPerRequest {
		s.eventsPerRequest[k] += v
	}
	s.measured += o.measured
	s.planned += o.planned
	s.keptReads += o.keptReads
	s.releasedReads += o.releasedReads
	if o.planned > 0 && (s.minRatio == 0 || o.minRatio < s.minRatio) {
		s.minRatio = o.minRatio
	}
}

func (s propStats) String() string {
	ratio := 0.0
	if s.planned > 0 {
		ratio = float64(s.measured) / float64(s.planned)
	}
	return fmt.Sprintf("%d sessions, %d requests (%d compared with the previous), %d edit events, %d spare-marker moves, events per request %v, freed at events measured/planned %.3f (lowest %.3f), %d stubs checked, %d results dropped, %d reads kept, %d released",
		s.sessions, s.requests, s.compared, s.events, s.markerMoves, s.eventsPerRequest, ratio, s.minRatio, s.stubs, s.dropped, s.keptReads, s.releasedReads)
}

// requested is what one request produced and what the next is checked
// against.
type requested struct {
	orig, sent []byte
	origC      *conversation.Conversation
	sentC      *conversation.Conversation
	// The prompts as the cache sees them (see extends).
	origSegs, sentSegs *prompt.Prompt
	pl                 plan
	a                  *analysis // what the plan was made from
	saved              int       // tokens the rewrite saves (estimated on the bodies)
	// stubbed maps a tool id to the bytes its result content (or input)
	// was sent as, for the results and inputs ctxguard rewrote.
	stubResults, stubInputs map[string][]byte
	// dropped holds tool ids no longer sent at all (trimmed rounds).
	dropped map[string]bool
	// removedThinking holds the thinking blocks (raw bytes) not sent.
	removedThinking map[string]bool
}

// checkStream runs a session's requests through pc and checks every
// property. It reports failures on t and returns what it covered.
func checkStream(t testing.TB, pc propConfig, name string, reqs []streamReq) propStats {
	t.Helper()
	return checkWireStream(t, anthropicWire, pc, name, reqs)
}

// checkWireStream is checkStream for the requests of a protocol
// (protocols_property_test.go).
func checkWireStream(t testing.TB, w wire, pc propConfig, name string, reqs []streamReq) propStats {
	t.Helper()
	st := propStats{sessions: 1, eventsPerRequest: map[int]int{}}
	longStore := store.NewMemory()
	long, err := New(pc.cfg, &store.Blobs{Store: longStore, BaseURL: propBaseURL})
	if err != nil {
		t.Fatal(err)
	}
	longPipe := pipeline.New(nil, long)
	cache := map[string]any{}
	var prev *requested
	for k, rq := range reqs {
		where := fmt.Sprintf("%s [%s] request %d", name, pc.name, k)
		cur, ok := checkRequest(t, w, pc, where, rq.body, longPipe, long, longStore, cache)
		if !ok {
			return st
		}
		st.requests++
		st.stubs += len(cur.stubResults) + len(cur.stubInputs)
		st.dropped += len(cur.dropped)
		if n := len(cur.pl.kept); n > 0 {
			st.keptReads += len(cur.pl.kept[n-1])
		}
		n := 0
		for _, e := range cur.pl.events {
			if e.at == len(cur.origC.Messages) {
				n++
			}
		}
		st.eventsPerRequest[n]++
		st.events += n
		if prev != nil && !rq.reset {
			compared, moved := checkSticky(t, pc, where, prev, cur, n > 0)
			if compared {
				st.compared++
			}
			if compared && n > 0 {
				e := cur.pl.events[len(cur.pl.events)-1]
				got := cur.saved - prev.saved
				// The planner prices every stub at stubTokens; the first
				// one, with the explanation, is longer, and the estimator
				// is not exactly additive.
				slack := 100
				if got < e.freed*9/10-slack {
					t.Errorf("%s: the event freed %d tokens by the plan, but the rewrite saves only %d more than before", where, e.freed, got)
				}
				st.measured += got
				st.planned += e.freed
				if r := float64(got) / float64(e.freed); st.minRatio == 0 || r < st.minRatio {
					st.minRatio = r
				}
			}
			if moved {
				st.markerMoves++
			}
		}
		if t.Failed() {
			return st
		}
		prev = cur
	}
	if prev != nil {
		for k := 1; k < len(prev.pl.kept); k++ {
			for _, i := range prev.pl.kept[k-1] {
				if !prev.pl.keeps(k, i) {
					st.releasedReads++
				}
			}
		}
	}
	return st
}

// checkRequest checks properties 1-6 of one request.
//
// cache holds decoded originals across the requests of one stream.
func checkRequest(t testing.TB, w wire, pc propConfig, where string, orig []byte, longPipe *pipeline.Pipeline, long *Pass, longStore *store.Memory, cache map[string]any) (*requested, bool) {
	t.Helper()
	origC, err := w.proto.Parse(orig)
	if err != nil {
		t.Errorf("%s: the original does not parse: %v", where, err)
		return nil, false
	}
	// A fresh process: a new pass and an empty store.
	freshStore := store.NewMemory()
	fresh, err := New(pc.cfg, &store.Blobs{Store: freshStore, BaseURL: propBaseURL})
	if err != nil {
		t.Fatal(err)
	}
	env := pc.env
	res := pipeline.New(nil, fresh).Run(&pipeline.Request{Conv: origC, Env: &env})
	if res.Err != nil {
		t.Errorf("%s: the pass failed: %v", where, res.Err)
		return nil, false
	}
	env2 := pc.env
	resLong := longPipe.Run(&pipeline.Request{Conv: origC, Env: &env2})
	if resLong.Err != nil {
		t.Errorf("%s: the long-lived pass failed: %v", where, resLong.Err)
		return nil, false
	}
	// 1. Reproducible from the request alone.
	if !bytes.Equal(res.Body, resLong.Body) {
		t.Errorf("%s: a fresh process and a long-lived one differ: %s", where, firstDiff(res.Body, resLong.Body))
		return nil, false
	}
	if !slices.Equal(res.Headers, resLong.Headers) || !slices.Equal(res.Notes, resLong.Notes) {
		t.Errorf("%s: headers %v / %v, notes %v / %v", where, res.Headers, resLong.Headers, res.Notes, resLong.Notes)
	}
	sent := res.Body
	// 2. Valid.
	if err := w.valid(pc, orig, sent); err != nil {
		t.Errorf("%s: invalid rewrite: %v", where, err)
		return nil, false
	}
	sentC, err := w.proto.Parse(sent)
	if err != nil {
		t.Errorf("%s: the rewrite does not parse: %v", where, err)
		return nil, false
	}
	// 3. Markers.
	if sentC.CacheMarkers > 4 {
		t.Errorf("%s: %d cache_control markers", where, sentC.CacheMarkers)
	}
	cur := &requested{orig: orig, sent: sent, origC: origC, sentC: sentC, saved: tokens.Estimate(orig) - tokens.Estimate(sent)}
	// 4. Thinking.
	checkThinking(t, where, cur)
	// 5. Stubs and blobs, in both stores.
	cur.stubResults, cur.stubInputs, cur.dropped = checkStubs(t, where, cur, freshStore, cache)
	checkStubs(t, where, cur, longStore, cache)
	// 5b. The result lists exactly the blobs the body names (so the
	// caller keeps those alive), from a fresh pass and a memoizing one.
	named := blobsNamed(orig, sent)
	if d := cmp.Diff(named, res.Blobs, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); d != "" {
		t.Errorf("%s: Result.Blobs is not what the body names (-named +Blobs):\n%s", where, d)
	}
	if d := cmp.Diff(named, resLong.Blobs, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); d != "" {
		t.Errorf("%s: the long-lived pass's Result.Blobs is not what the body names (-named +Blobs):\n%s", where, d)
	}
	if w.proto == anthropic.Protocol {
		if cur.origSegs, err = prompt.Parse(orig); err != nil {
			t.Fatal(err)
		}
		if cur.sentSegs, err = prompt.Parse(sent); err != nil {
			t.Fatal(err)
		}
	}
	// 6. The plan.
	cur.a, cur.pl = analyzed(t, long, origC, &env)
	checkKeptReads(t, where, cur)
	lim := long.limits(&env)
	for _, e := range cur.pl.events {
		if e.freed < lim.clearAtLeast || e.freed <= 0 {
			t.Errorf("%s: event %+v frees less than clear_at_least %d", where, e, lim.clearAtLeast)
		}
		if e.before <= lim.trigger {
			t.Errorf("%s: event %+v in a request not over the trigger %d", where, e, lim.trigger)
		}
	}
	here := len(cur.pl.events) > 0 && cur.pl.events[len(cur.pl.events)-1].at == len(origC.Messages)
	if noted := slices.Contains(res.Notes, "edit-event"); noted != here {
		t.Errorf("%s: note edit-event %v, plan event here %v", where, noted, here)
	}
	if pc.cfg.Enabled && len(cur.pl.events) == 0 && !bytes.Equal(orig, sent) && !pc.env.Binding {
		t.Errorf("%s: rewritten without any event: %s", where, firstDiff(orig, sent))
	}
	return cur, !t.Failed()
}

// checkKeptReads checks the file reads the plan keeps: each event keeps
// only reads before its boundary that an earlier event kept or that lie
// in its own new region (what was cleared stays cleared), and every read
// the latest event kept is sent whole, with the content the client sent.
func checkKeptReads(t testing.TB, where string, cur *requested) {
	t.Helper()
	a, pl := cur.a, cur.pl
	for k, e := range pl.events {
		from := 0
		if k > 0 {
			from = pl.events[k-1].clearTo
		}
		for _, i := range pl.kept[k] {
			r := a.reads[i]
			if r.msg >= e.clearTo {
				t.Errorf("%s: event %d keeps read %d at message %d, at or past its boundary %d", where, k, i, r.msg, e.clearTo)
			}
			if r.msg < from && !pl.keeps(k-1, i) {
				t.Errorf("%s: event %d keeps read %d (message %d), which an earlier event cleared", where, k, i, r.msg)
			}
		}
	}
	if len(pl.kept) == 0 {
		return
	}
	sent := map[string][]byte{} // tool id -> result content as sent
	for _, m := range cur.sentC.Messages {
		for _, b := range m.Blocks {
			if b.Kind == conversation.ToolResult {
				sent[cur.sentC.String(b.ID)] = cur.sentC.Bytes(b.Content)
			}
		}
	}
	for _, i := range pl.kept[len(pl.kept)-1] {
		it := a.items[a.reads[i].item]
		b := &cur.origC.Messages[it.msg].Blocks[it.blk]
		id := cur.origC.String(b.ID)
		got, ok := sent[id]
		if !ok {
			t.Errorf("%s: the kept read %s (message %d) is not sent", where, id, it.msg)
		} else if !bytes.Equal(got, cur.origC.Bytes(b.Content)) {
			t.Errorf("%s: the kept read %s (message %d) is sent as %.200s", where, id, it.msg, got)
		}
	}
}

// blobsNamed returns the distinct blob ids that sent names ("blob <id>")
// and orig does not, sorted.
func blobsNamed(orig, sent []byte) []string {
	var ids []string
	for _, m := range blobRef.FindAllSubmatch(sent, -1) {
		if !bytes.Contains(orig, m[0]) {
			ids = append(ids, string(m[1]))
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// planFor returns the plan the pass makes for a request.
func planFor(t testing.TB, p *Pass, c *conversation.Conversation, env *pipeline.Env) plan {
	t.Helper()
	_, pl := analyzed(t, p, c, env)
	return pl
}

// analyzed returns what the pass measures of a request and its plan.
func analyzed(t testing.TB, p *Pass, c *conversation.Conversation, env *pipeline.Env) (*analysis, plan) {
	t.Helper()
	a, err := p.analyze(&pipeline.Request{Conv: c, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	_, pl := p.plan(a, env)
	return a, pl
}

// thinkingBlocks returns the raw thinking and redacted_thinking blocks of
// message mi.
func thinkingBlocks(c *conversation.Conversation, mi int) []string {
	var out []string
	for _, b := range c.Messages[mi].Blocks {
		if b.Kind == conversation.Thinking || b.Kind == conversation.RedactedThinking {
			out = append(out, string(c.Bytes(b.Span)))
		}
	}
	return out
}

func checkThinking(t testing.TB, where string, cur *requested) {
	t.Helper()
	o, s := cur.origC, cur.sentC
	if lo, ls := o.LastAssistant(), s.LastAssistant(); lo >= 0 {
		if ls < 0 || !slices.Equal(thinkingBlocks(o, lo), thinkingBlocks(s, ls)) {
			t.Errorf("%s: the latest assistant message's thinking changed", where)
		}
	}
	all := map[string]bool{}
	for mi := range o.Messages {
		for _, b := range thinkingBlocks(o, mi) {
			all[b] = true
		}
	}
	sent := map[string]bool{}
	for mi := range s.Messages {
		for _, b := range thinkingBlocks(s, mi) {
			sent[b] = true
			if !all[b] {
				t.Errorf("%s: message %d sends a thinking block the client did not send: %.200s", where, mi, b)
			}
		}
	}
	cur.removedThinking = map[string]bool{}
	for b := range all {
		if !sent[b] {
			cur.removedThinking[b] = true
		}
	}
}

var blobRef = regexp.MustCompile(`blob ([a-z]{13})\b`)

// checkStubs checks that every rewritten tool result and tool input names
// a blob st holds with the original content, and every blob reference the
// rewrite added resolves. It returns the rewritten results and inputs by
// tool id, and the ids no longer sent.
func checkStubs(t testing.TB, where string, cur *requested, st store.Store, cache map[string]any) (results, inputs map[string][]byte, dropped map[string]bool) {
	t.Helper()
	o, s := cur.origC, cur.sentC
	results, inputs, dropped = map[string][]byte{}, map[string][]byte{}, map[string]bool{}
	type loc struct{ mi, bi int }
	origResults, origCalls := map[string]loc{}, map[string]loc{}
	for mi, m := range o.Messages {
		for bi, b := range m.Blocks {
			switch b.Kind {
			case conversation.ToolResult:
				origResults[o.String(b.ID)] = loc{mi, bi}
			case conversation.ToolCall:
				origCalls[o.String(b.ID)] = loc{mi, bi}
			}
		}
	}
	seen := map[string]bool{}
	blob := func(id string) ([]byte, bool) {
		rc, err := st.OpenBlob(context.Background(), id)
		if err != nil {
			return nil, false
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		return b, err == nil
	}
	oneBlob := func(what, stub string, want []byte) {
		refs := blobRef.FindAllStringSubmatch(stub, -1)
		if len(refs) != 1 {
			t.Errorf("%s: %s stub names %d blobs: %q", where, what, len(refs), stub)
			return
		}
		got, ok := blob(refs[0][1])
		if !ok {
			t.Errorf("%s: %s stub names blob %s, which the store does not hold", where, what, refs[0][1])
			return
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %s blob %s holds %d bytes, not the original %d: %s", where, what, refs[0][1], len(got), len(want), firstDiff(want, got))
		}
	}
	for mi, m := range s.Messages {
		for _, b := range m.Blocks {
			switch b.Kind {
			case conversation.ToolResult:
				id := s.String(b.ID)
				seen[id] = true
				l, ok := origResults[id]
				if !ok {
					t.Errorf("%s: message %d answers %s, which the client did not answer", where, mi, id)
					continue
				}
				ob := &o.Messages[l.mi].Blocks[l.bi]
				if bytes.Equal(s.Bytes(b.Content), o.Bytes(ob.Content)) {
					continue
				}
				results[id] = bytes.Clone(s.Bytes(b.Content))
				stub := s.String(b.Content)
				if stub == "" {
					t.Errorf("%s: rewritten result %s is not a string: %.200s", where, id, s.Bytes(b.Content))
					continue
				}
				key := "r" + string(o.Bytes(ob.Content))
				want, ok := cache[key].([]byte)
				if !ok {
					want = originalResult(t, o, ob)
					cache[key] = want
				}
				oneBlob("result "+id, stub, want)
			case conversation.ToolCall:
				id := s.String(b.ID)
				seen[id] = true
				l, ok := origCalls[id]
				if !ok {
					t.Errorf("%s: message %d calls %s, which the client did not send", where, mi, id)
					continue
				}
				ob := &o.Messages[l.mi].Blocks[l.bi]
				if bytes.Equal(s.Bytes(b.Input), o.Bytes(ob.Input)) {
					continue
				}
				inputs[id] = bytes.Clone(s.Bytes(b.Input))
				oin, sin := inputJSON(o, ob), inputJSON(s, &b)
				var free string
				if !ob.InputEncoded && json.Unmarshal(oin, &free) == nil {
					// Free-form text (a custom tool's input) is cleared
					// whole.
					oneBlob("input "+id, s.String(b.Input), []byte(free))
					continue
				}
				var sm map[string]json.RawMessage
				key := "i" + string(oin)
				om, ok := cache[key].(map[string]json.RawMessage)
				if !ok {
					if err := json.Unmarshal(oin, &om); err != nil {
						t.Fatalf("%s: input of %s: %v", where, id, err)
					}
					cache[key] = om
				}
				if json.Unmarshal(sin, &sm) != nil || len(om) != len(sm) {
					t.Errorf("%s: input of %s rewritten to another shape: %.300s", where, id, s.Bytes(b.Input))
					continue
				}
				for k, ov := range om {
					sv, ok := sm[k]
					if !ok {
						t.Errorf("%s: input of %s lost field %q", where, id, k)
						continue
					}
					if bytes.Equal(ov, sv) {
						continue
					}
					var stub string
					if json.Unmarshal(sv, &stub) != nil {
						t.Errorf("%s: input field %s.%s rewritten to a non-string", where, id, k)
						continue
					}
					want := []byte(ov)
					var str string
					if json.Unmarshal(ov, &str) == nil {
						want = []byte(str)
					}
					oneBlob("input "+id+"."+k, stub, want)
				}
			}
		}
	}
	for id := range origResults {
		if !seen[id] {
			dropped[id] = true
		}
	}
	// Every blob reference the rewrite added resolves (trim notes among
	// them).
	inOrig := map[string]bool{}
	for _, m := range blobRef.FindAllSubmatch(cur.orig, -1) {
		inOrig[string(m[1])] = true
	}
	for _, m := range blobRef.FindAllSubmatch(cur.sent, -1) {
		if id := string(m[1]); !inOrig[id] && !st.HasBlob(context.Background(), id) {
			t.Errorf("%s: the rewrite names blob %s, which the store does not hold", where, id)
		}
		inOrig[string(m[1])] = true // checked
	}
	return results, inputs, dropped
}

// originalResult is what a cleared result's blob must hold: the text of a
// string result; for an array, each text part's text and the raw JSON of
// any other part, one per line.
func originalResult(t testing.TB, c *conversation.Conversation, b *conversation.Block) []byte {
	raw := c.Bytes(b.Content)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []byte(s)
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil {
		t.Fatalf("result content %.100s: %v", raw, err)
	}
	var out []byte
	for i, p := range parts {
		if i > 0 {
			out = append(out, '\n')
		}
		var tp struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		// (Responses tool outputs hold input_text parts.)
		if json.Unmarshal(p, &tp) == nil && (tp.Type == "text" || tp.Type == "input_text") && tp.Text != nil {
			out = append(out, *tp.Text...)
			continue
		}
		out = append(out, p...)
	}
	return out
}

// checkSticky checks properties 7 and 8 between consecutive requests. It
// reports whether the pair was compared (the client's own stream extends)
// and whether ctxguard's spare marker moved.
func checkSticky(t testing.TB, pc propConfig, where string, prev, cur *requested, here bool) (compared, markerMoved bool) {
	t.Helper()
	if !clientExtends(prev, cur) || !sameFrame(prev.origC, cur.origC) {
		// The client itself broke the prefix (a compaction, a rewind) or
		// changed the model, system or tools: the request is not the
		// previous one plus appended turns, and the cache starts over
		// anyway. (The plan must not shrink: TestFrameChange.)
		return false, false
	}
	// 8. Monotone plan: the previous request's plan replays identically.
	pp, cp := prev.pl, cur.pl
	decision := func(e event) event { return event{at: e.at, clearTo: e.clearTo, thinkTo: e.thinkTo, freed: e.freed} }
	if len(cp.events) < len(pp.events) ||
		!slices.Equal(slices.Collect(mapSeq(pp.events, decision)), slices.Collect(mapSeq(cp.events[:len(pp.events)], decision))) {
		t.Errorf("%s: the plan of the previous request is not replayed: before %+v, now %+v", where, pp.events, cp.events)
	} else if !slices.Equal(pp.events, cp.events[:len(pp.events)]) {
		// With the same system, tools and settings, even the sizes the
		// replay computes are the same.
		t.Errorf("%s: the plan of the previous request is replayed with other sizes: before %+v, now %+v", where, pp.events, cp.events)
	}
	if len(cp.kept) < len(pp.kept) || !slices.EqualFunc(pp.kept, cp.kept[:len(pp.kept)], slices.Equal) {
		t.Errorf("%s: the reads the previous request's plan kept are not replayed: before %v, now %v", where, pp.kept, cp.kept)
	}
	if cp.clearTo < pp.clearTo || cp.thinkTo < pp.thinkTo {
		t.Errorf("%s: boundaries moved back from (%d,%d) to (%d,%d)", where, pp.clearTo, pp.thinkTo, cp.clearTo, cp.thinkTo)
	}
	for id, was := range prev.stubResults {
		if now, ok := cur.stubResults[id]; ok && !bytes.Equal(now, was) || !ok && !cur.dropped[id] {
			t.Errorf("%s: the cleared result %s changed (event here: %v): was %.200s, now %.200s", where, id, here, was, now)
		}
	}
	for id, was := range prev.stubInputs {
		if now, ok := cur.stubInputs[id]; ok && !bytes.Equal(now, was) || !ok && !cur.dropped[id] {
			t.Errorf("%s: the cleared input %s changed (event here: %v): was %.200s, now %.200s", where, id, here, was, now)
		}
	}
	for id := range prev.dropped {
		if !cur.dropped[id] {
			t.Errorf("%s: the dropped round of %s came back", where, id)
		}
	}
	for b := range prev.removedThinking {
		if !cur.removedThinking[b] {
			t.Errorf("%s: a removed thinking block came back: %.200s", where, b)
		}
	}
	// 7. Sticky.
	if prev.sentSegs != nil && !segmentsExtend(prev.sentSegs, cur.sentSegs) && !here {
		t.Errorf("%s: the rewrite does not extend the previous rewrite, and the plan has no event here (events %+v): %s",
			where, cur.pl.events, firstDiff(prev.sent, cur.sent))
	}
	// Byte for byte up to the first message the client itself re-sent
	// differently (the one that carried its moving marker).
	pm, po, co := prev.sentC.Messages, prev.origC.Messages, cur.origC.Messages
	same := 0
	for same < len(po) && same < len(co) && bytes.Equal(prev.origC.Bytes(po[same].Span), cur.origC.Bytes(co[same].Span)) {
		same++
	}
	// The rewrite keeps the messages from there on (the newest ones) one
	// for one, so count them from the end: trimming may have merged
	// older ones.
	// (When the client re-sent every message as it was, through the last
	// one: the array's closing bracket is where the next turns go.)
	upto := prev.sentC.List.End
	if len(pm) > 0 {
		upto = pm[len(pm)-1].Span.End
	}
	if i := len(pm) - (len(po) - same); same < len(po) && i >= 0 {
		upto = pm[i].Span.Start
	}
	markerMoved = markerBoundary(pp, len(prev.origC.Messages)) != markerBoundary(cp, len(cur.origC.Messages))
	// (From the messages on: the client may switch models.)
	was, now := prev.sent[prev.sentC.List.Start:upto], cur.sent[cur.sentC.List.Start:]
	if markerMoved {
		// Where ctxguard's spare marker moved, compare without markers
		// (inside the messages the client's own sits on its last message
		// only, past upto).
		was, now = withoutMarkers(was), withoutMarkers(now)
	}
	if !here && !bytes.HasPrefix(now, was) {
		t.Errorf("%s: the rewrite changed bytes of the previous request's messages without an event: %s", where, firstDiff(was, now))
	}
	// So is everything before them (compared is only set when the
	// client's was the same).
	if !here && !bytes.Equal(prev.sent[:prev.sentC.List.Start], cur.sent[:cur.sentC.List.Start]) {
		t.Errorf("%s: the request before the messages changed without an event: %s", where, firstDiff(prev.sent[:prev.sentC.List.Start], cur.sent[:cur.sentC.List.Start]))
	}
	// Everything after the messages is the client's (plus the binding
	// setting, which never changes within a session).
	if bytes.Equal(tail(prev.origC), tail(cur.origC)) && !bytes.Equal(tail(prev.sentC), tail(cur.sentC)) {
		t.Errorf("%s: the request outside the messages changed: %s", where, firstDiff(tail(prev.sentC), tail(cur.sentC)))
	}
	return true, markerMoved && !here
}

// withoutMarkers removes every cache_control member of the form the
// clients in these tests send.
func withoutMarkers(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte(`,"cache_control":{"type":"ephemeral"}`), nil)
	return bytes.ReplaceAll(b, []byte(`,"cache_control":{"type":"ephemeral","ttl":"1h"}`), nil)
}

// sameFrame reports whether two requests agree outside their messages.
func sameFrame(a, b *conversation.Conversation) bool {
	return bytes.Equal(a.Body[:a.List.Start], b.Body[:b.List.Start]) && bytes.Equal(tail(a), tail(b))
}

func mapSeq[T, U any](s []T, f func(T) U) func(func(U) bool) {
	return func(yield func(U) bool) {
		for _, x := range s {
			if !yield(f(x)) {
				return
			}
		}
	}
}

// tail is the body after the messages array.
func tail(c *conversation.Conversation) []byte { return c.Body[c.List.End:] }

// firstDiff describes where a and b first differ.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(a) && i == len(b) {
		return "identical"
	}
	lo := max(0, i-120)
	return fmt.Sprintf("first difference at byte %d of %d/%d:\n  had %q\n  got %q", i, len(a), len(b), a[lo:min(len(a), i+160)], b[lo:min(len(b), i+160)])
}

// generated returns the request stream of a generated session.
func generated(t testing.TB, r *rand.Rand, opt sessiongen.Options) []streamReq {
	t.Helper()
	s, err := sessiongen.Generate(r, opt)
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := s.Requests()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]streamReq, len(reqs))
	for i, rq := range reqs {
		out[i] = streamReq{body: rq.Body, reset: rq.Reset}
	}
	return out
}

// realStreams loads the Claude Code transcripts under dir as request
// streams, by session ID, written in protocol proto ("" for Anthropic's,
// as Claude Code sent them).
func realStreams(t testing.TB, dir, proto string) map[string][]streamReq {
	t.Helper()
	ss, err := transcript.Load([]string{dir}, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]streamReq{}
	for _, s := range ss {
		b, err := transcript.NewBuilder(s, transcript.BuildOptions{Protocol: proto})
		if err != nil {
			t.Fatal(err)
		}
		var reqs []streamReq
		for k := 0; k < b.Len(); k++ {
			rq, err := b.Request(k)
			if err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, streamReq{body: rq.Body, reset: rq.Reset})
		}
		if len(reqs) > 0 {
			out[s.ID] = reqs
		}
	}
	return out
}

func longRun() bool { return os.Getenv("CTXGUARD_PROPERTY_LONG") != "" }

// TestPropertiesGenerated checks every property on generated sessions of
// 4 to 40 requests under every configuration.
func TestPropertiesGenerated(t *testing.T) {
	t.Parallel()
	n := 24
	if longRun() {
		n = 400
	}
	var total propStats
	for _, pc := range propConfigs() {
		var st propStats
		for seed := range uint64(n) {
			opt := sessiongen.Options{MaxResult: 30_000}
			reqs := generated(t, rand.New(rand.NewPCG(seed, 1)), opt)
			st.add(checkStream(t, pc, fmt.Sprintf("generated seed %d", seed), reqs))
			if t.Failed() {
				return
			}
		}
		t.Logf("%s: %v", pc.name, st)
		total.add(st)
	}
	t.Logf("total: %v", total)
	if total.events == 0 {
		t.Error("no edit event in any session: the thresholds test nothing")
	}
}

// TestPropertiesLongSessions checks the shipped defaults on long sessions
// with Claude Code's full-size profile, where the defaults fire events.
func TestPropertiesLongSessions(t *testing.T) {
	t.Parallel()
	n := 2
	if longRun() {
		n = 30
	}
	var total propStats
	for i, pc := range []propConfig{propConfigs()[0], propConfigs()[5]} {
		for seed := uint64(i); seed < uint64(n); seed += 2 {
			opt := sessiongen.Options{Turns: 90 + int(seed%3)*30, MaxResult: 60_000, FullProfile: true}
			reqs := generated(t, rand.New(rand.NewPCG(seed, 2)), opt)
			total.add(checkStream(t, pc, fmt.Sprintf("long seed %d", seed), reqs))
			if t.Failed() {
				return
			}
		}
	}
	t.Logf("%v", total)
	if total.events == 0 {
		t.Error("the defaults fired no event in long sessions")
	}
}

// TestPropertiesReal checks every property on the real Claude Code
// sessions in tools/transcript/testdata (and in $CTXGUARD_SESSIONS).
func TestPropertiesReal(t *testing.T) {
	dirs := []string{"../../tools/transcript/testdata/claude-code"}
	if d := os.Getenv("CTXGUARD_SESSIONS"); d != "" {
		dirs = append(dirs, d)
	}
	var total propStats
	for _, dir := range dirs {
		streams := realStreams(t, dir, "")
		ids := make([]string, 0, len(streams))
		for id := range streams {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, pc := range propConfigs() {
			for _, id := range ids {
				total.add(checkStream(t, pc, id, streams[id]))
				if t.Failed() {
					return
				}
			}
		}
	}
	t.Logf("%v", total)
}

// TestPropertiesTrim checks the properties with tool-round trimming on.
func TestPropertiesTrim(t *testing.T) {
	{
		var st propStats
		pc := trimConfig()
		for seed := range uint64(24) {
			reqs := generated(t, rand.New(rand.NewPCG(seed, 1)), sessiongen.Options{MaxResult: 30_000})
			st.add(checkStream(t, pc, fmt.Sprintf("generated seed %d", seed), reqs))
			if t.Failed() {
				return
			}
		}
		t.Logf("%v", st)
	}
}

// TestExtendsNormalization: the stickiness check ignores what the client
// itself changes between requests and nothing else.
func TestExtendsNormalization(t *testing.T) {
	reqs := generated(t, rand.New(rand.NewPCG(3, 3)), sessiongen.Options{Turns: 8, MaxResult: 2000})
	for k := 1; k < len(reqs); k++ {
		if ext, err := extends(reqs[k-1].body, reqs[k].body); err != nil || !ext {
			t.Fatalf("request %d does not extend request %d: %v", k, k-1, err)
		}
	}
	last := reqs[len(reqs)-1].body
	// Change one letter of a string tool result: still valid JSON, so
	// only the comparison can tell.
	c, err := anthropic.Parse(last)
	if err != nil {
		t.Fatal(err)
	}
	at := -1
	for _, m := range c.Messages {
		for _, b := range m.Blocks {
			if b.Kind != conversation.ToolResult || b.Content.Len() < 3 || last[b.Content.Start] != '"' {
				continue
			}
			if ch := last[b.Content.Start+1]; 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' {
				at = b.Content.Start + 1
			}
		}
	}
	if at < 0 {
		t.Fatal("the generated session has no string tool result starting with a letter: choose another seed")
	}
	edited := bytes.Clone(last)
	edited[at] ^= 0x20 // the letter's other case
	if ext, err := extends(last, edited); err != nil || ext {
		t.Errorf("a changed result: extends %v, %v; want false, nil", ext, err)
	}
	if !bytes.Contains(last, []byte(`,"cache_control":{"type":"ephemeral"}`)) {
		t.Fatal("the generated request has no cache marker to remove: choose another seed")
	}
	if ext, err := extends(last, bytes.Replace(last, []byte(`,"cache_control":{"type":"ephemeral"}`), nil, -1)); err != nil || !ext {
		t.Errorf("removing markers: extends %v, %v; want true, nil", ext, err)
	}
}

// checkFuzzInput checks every property on a generated session and a
// configuration, both steered by data (the fuzz target, FuzzClear in
// fuzz_test.go, calls it), trimming and prompts ending with an image
// included.
func checkFuzzInput(t *testing.T, data []byte) {
	r := rand.New(sessiongen.NewSource(data))
	pc := fuzzConfig(r, true)
	opt := sessiongen.Options{Turns: 2 + r.IntN(30), MaxResult: 500 << r.IntN(7), TrailingImages: r.IntN(2) == 0}
	reqs := generated(t, r, opt)
	checkStream(t, pc, fmt.Sprintf("fuzz %+v %+v", pc, opt), reqs)
}

// fuzzConfig draws a configuration.
func fuzzConfig(r *rand.Rand, trim bool) propConfig {
	// Log-uniform, so small thresholds (many events in a short session)
	// are as common as large ones.
	amount := func(maxTokens int) model.Amount {
		if r.IntN(8) == 0 {
			return model.Fraction(float64(1+r.IntN(1000)) / 20000) // up to 5% of the window
		}
		return model.Tokens(int(math.Exp(r.Float64()*math.Log(float64(maxTokens+1)))) - 1)
	}
	c := Defaults()
	c.Trigger = amount(20_000)
	c.KeepTokens = amount(6_000)
	c.KeepUses = r.IntN(6)
	c.ClearAtLeast = amount(6_000)
	c.Payback = []int{0, 0, 1, 3, 10}[r.IntN(5)]
	c.MinTokens = []int{0, 1, 40, 200}[r.IntN(4)]
	c.Tools = [][]string{{"*"}, {"*"}, {"Bash", "Read"}, {"mcp__*", "WebFetch", "Grep"}}[r.IntN(4)]
	c.ExcludeTools = [][]string{nil, nil, {"Read"}, {"mcp__playwright__*"}}[r.IntN(4)]
	c.ClearInputs = [][]string{{"*"}, nil, {"Write", "Edit"}, {"Bash"}}[r.IntN(4)]
	c.Thinking = r.IntN(4) > 0
	c.CacheMarker = r.IntN(4) > 0
	if trim && r.IntN(3) == 0 {
		c.Trim = Trim{Enabled: true, KeepRounds: r.IntN(6)}
	}
	env := pipeline.Env{Window: []int{0, 200_000, 1_000_000}[r.IntN(3)], Binding: r.IntN(3) == 0}
	// Drawn last, so the inputs kept in testdata/fuzz draw what they drew
	// before the rule existed.
	c.Reads = Reads{
		Tools:      [][]string{nil, {"Read"}, {"Read", "Bash"}, {"*"}}[r.IntN(4)],
		Commands:   [][]string{nil, {"cat", "sed -n"}}[r.IntN(2)],
		KeepTokens: amount(6_000),
	}
	return propConfig{name: "fuzz", cfg: c, env: env}
}

// markerCostRequests returns two consecutive requests of a session as a
// client sends them: the first ends with a user message whose last block,
// an image, carries the client's moving cache marker; the second re-sends
// that message without the marker and appends a short answer and prompt.
func markerCostRequests() (a, b []byte) {
	big := strings.Repeat("output line with some words in it\n", 60)
	img := `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="}`
	history := `{"role":"user","content":"start"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"make"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":` + q(big) + `}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"Bash","input":{"command":"make test"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":` + q(big) + `}]},` +
		`{"role":"assistant","content":[{"type":"text","text":"Done."}]},`
	frame := func(msgs string) []byte {
		return []byte(`{"model":"claude-opus-4-5","messages":[` + msgs + `],"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],"max_tokens":1024,"stream":true}`)
	}
	a = frame(history + `{"role":"user","content":[{"type":"text","text":"look at this"},` + img + `,"cache_control":{"type":"ephemeral"}}]}`)
	b = frame(history + `{"role":"user","content":[{"type":"text","text":"look at this"},` + img + `}]},` +
		`{"role":"assistant","content":[{"type":"text","text":"ok"}]},{"role":"user","content":[{"type":"text","text":"go","cache_control":{"type":"ephemeral"}}]}`)
	return a, b
}

// TestMarkerCostReplay is the minimal reproduction of a violation the
// property tests found (now fixed). analyze prices an image, document or unknown
// block by its whole object, cache_control member included. The client's
// moving marker sits on the last block of its last message, and one
// request later that message is re-sent without it: so when the last
// block is not text or a tool result, the message costs about 11 tokens
// less in the next request than in the request that ended with it. The
// planner replays the earlier requests with the later request's costs, so
// a request just over the trigger fires an event that the next request's
// replay does not see: there the event never happened, the cleared
// results come back (the rewrite of request 2 does not start with the
// rewrite of request 1), and no event is recorded at request 2. (When
// request 2 is itself over the trigger it fires the event again: two
// cache breaks for one.)
func TestMarkerCostReplay(t *testing.T) {
	a, b := markerCostRequests()
	cfg := smallConfig()
	cfg.KeepUses, cfg.KeepTokens, cfg.ClearAtLeast = 1, model.Tokens(0), model.Tokens(100)
	cfg.Thinking, cfg.CacheMarker = false, false
	size := func(body []byte) int {
		p, _ := New(cfg, &store.Blobs{Store: store.NewMemory()})
		c, err := anthropic.Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		an, err := p.analyze(&pipeline.Request{Conv: c})
		if err != nil {
			t.Fatal(err)
		}
		return newPlanner(an.base, an.costs).size(len(c.Messages), 0, 0)
	}
	// Request 1 is just over the trigger; request 2, priced without the
	// marker, is not.
	cfg.Trigger = model.Tokens(size(a) - 1)
	// The moving marker must not change how request 1 is replayed.
	checkStream(t, propConfig{name: "marker-cost", cfg: cfg}, "two requests", []streamReq{{body: a}, {body: b}})
}

// TestMarkerCostGenerated checks generated sessions whose prompts may
// end with a pasted image (as SDK clients send them), the case of
// TestMarkerCostReplay.
func TestMarkerCostGenerated(t *testing.T) {
	{
		for seed := range uint64(24) {
			for _, pc := range propConfigs()[1:4] {
				reqs := generated(t, rand.New(rand.NewPCG(seed, 1)), sessiongen.Options{MaxResult: 30_000, TrailingImages: true})
				checkStream(t, pc, fmt.Sprintf("generated seed %d", seed), reqs)
				if t.Failed() {
					return
				}
			}
		}
	}
}

// trimRequests is a session for tool-round trimming: a huge result, then
// small ones, each call after a short text. The first event (request 0,
// two rounds) clears the huge
// result inside the newest KeepRounds rounds, so it is stubbed, not
// dropped, and its stub is the session's first, with the explanation;
// the second event (request 6) drops a run of the small rounds.
func trimRequests() (Config, []streamReq) {
	huge := strings.Repeat("output line with some words in it\n", 240)
	small := strings.Repeat("output line with some words in it\n", 36)
	cfg := smallConfig()
	cfg.Trigger, cfg.KeepTokens, cfg.KeepUses, cfg.ClearAtLeast = model.Tokens(1000), model.Tokens(0), 1, model.Tokens(1500)
	cfg.Thinking, cfg.CacheMarker = false, false
	cfg.Trim = Trim{Enabled: true, KeepRounds: 2}
	rounds := []round{{"Bash", `{"command":"a"}`, huge, ""}}
	var reqs []streamReq
	for range 7 {
		rounds = append(rounds, round{"Bash", `{"command":"b"}`, small, ""})
		// Each assistant message says something before its call.
		body := bytes.ReplaceAll(build(`{"type":"disabled"}`, rounds), []byte(`{"role":"assistant","content":[`),
			[]byte(`{"role":"assistant","content":[{"type":"text","text":"Running it."},`))
		reqs = append(reqs, streamReq{body: body})
	}
	return cfg, reqs
}

// TestTrimFirstStub: with trimming on, the first stub of a session keeps
// its explanation when a later event drops a run (it once lost it, which
// rewrote bytes before the old clear boundary).
func TestTrimFirstStub(t *testing.T) {
	cfg, reqs := trimRequests()
	result := func(body []byte) string {
		p, err := New(cfg, &store.Blobs{Store: store.NewMemory(), BaseURL: propBaseURL})
		if err != nil {
			t.Fatal(err)
		}
		c, err := anthropic.Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		res := pipeline.New(nil, p).Run(&pipeline.Request{Conv: c})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		s, err := anthropic.Parse(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return s.String(s.Messages[2].Blocks[0].Content) // the huge result
	}
	before, after := result(reqs[5].body), result(reqs[6].body)
	if !strings.HasPrefix(before, "[ctxguard clears old tool output") {
		t.Fatalf("the reproduction needs the huge result stubbed, with the explanation, before the second event: %.100q", before)
	}
	if after != before {
		t.Errorf("the first stub changed at the second event:\nwas %q\nnow %q", before, after)
	}
}

// TestTrimValid: what trimming leaves in place of a run passes
// validate.Rewrite with AllowMessageRemoval and AllowRoundTrimming.
func TestTrimValid(t *testing.T) {
	cfg, reqs := trimRequests()
	p, err := New(cfg, &store.Blobs{Store: store.NewMemory(), BaseURL: propBaseURL})
	if err != nil {
		t.Fatal(err)
	}
	c, err := anthropic.Parse(reqs[6].body)
	if err != nil {
		t.Fatal(err)
	}
	if a, pl := analyzed(t, p, c, nil); len(p.trimRuns(c, a, pl)) == 0 {
		t.Fatal("the reproduction needs a dropped run")
	}
	res := pipeline.New(nil, p).Run(&pipeline.Request{Conv: c})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	{
		if err := validate.Rewrite(reqs[6].body, res.Body, propConfig{cfg: cfg}.validateOptions()); err != nil {
			t.Error(err)
		}
	}
}

// inputRequests is a session of Edit calls whose inputs are each worth
// clearing by the planner's measure (over MinTokens) but hold no field of
// inputFieldMin bytes, and one Bash result.
func inputRequests() (Config, []streamReq) {
	cfg := smallConfig()
	cfg.Trigger, cfg.KeepTokens, cfg.KeepUses, cfg.ClearAtLeast = model.Tokens(100), model.Tokens(0), 1, model.Tokens(300)
	cfg.Thinking, cfg.CacheMarker, cfg.MinTokens = false, false, 40
	code := strings.Repeat("x := y + 1\n", 15) // 165 bytes: under inputFieldMin
	edit := `{"file_path":"/src/main.go","old_string":` + q(code) + `,"new_string":` + q(code+"// done\n") + `}`
	rounds := []round{{"Bash", `{"command":"make"}`, strings.Repeat("output line with some words in it\n", 14), ""}}
	var reqs []streamReq
	for range 6 {
		rounds = append(rounds, round{"Edit", edit, "The file /src/main.go has been updated.", ""})
		reqs = append(reqs, streamReq{body: build(`{"type":"disabled"}`, rounds)})
	}
	return cfg, reqs
}

// TestInputFreed: a regression test. The planner once counted a cleared
// tool input as replaced whole by one stub, while inputStub replaces only
// its large fields and keeps the others, so events fired with less than
// clear_at_least actually freed. Inputs with only small fields are not
// clearable now, and the others are priced field by field.
func TestInputFreed(t *testing.T) {
	cfg, reqs := inputRequests()
	{
		checkStream(t, propConfig{name: "inputs", cfg: cfg}, "Edit session", reqs)
	}
}

// TestFrameChange: the planner's base (everything outside the
// messages: model, system, tools) is part of the sizes it replays the
// earlier requests with. When the client changes it mid-session (an MCP
// server disconnects and its tools go, the system prompt changes, /model
// switches to a model with a shorter name), the replay prices the earlier
// requests differently and can lose the events they had: the cleared
// region shrinks and the cleared results come back, and stay until the
// request grows over the trigger again. The change breaks the cache by
// itself, so the first request after it costs nothing extra; the requests
// after it carry the stale results in full. Here request 2 drops a 1.5K
// token tool and appends a turn, and request 1's event is gone.
func TestFrameChange(t *testing.T) {
	big := strings.Repeat("output line with some words in it\n", 60)
	rounds := []round{{"Bash", `{"command":"a"}`, big, ""}, {"Bash", `{"command":"b"}`, big, ""}, {"Bash", `{"command":"c"}`, "ok", ""}}
	tool := `,"tools":[{"name":"mcp__docs__search","description":` + q(strings.Repeat("Searches the documentation. ", 200)) + `,"input_schema":{"type":"object"}}]}`
	a := bytes.Replace(build(`{"type":"disabled"}`, rounds), []byte(`,"stream":true}`), []byte(`,"stream":true`+tool), 1)
	b := build(`{"type":"disabled"}`, append(rounds, round{"Bash", `{"command":"d"}`, "ok", ""}))
	cfg := smallConfig()
	cfg.KeepUses, cfg.KeepTokens, cfg.ClearAtLeast = 1, model.Tokens(0), model.Tokens(100)
	cfg.Thinking, cfg.CacheMarker = false, false
	p, err := New(cfg, &store.Blobs{Store: store.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	size := func(body []byte) int {
		c, err := anthropic.Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		an, err := p.analyze(&pipeline.Request{Conv: c})
		if err != nil {
			t.Fatal(err)
		}
		return newPlanner(an.base, an.costs).size(len(c.Messages), 0, 0)
	}
	cfg.Trigger = model.Tokens(size(a) - 1) // request 1 is just over it
	pa, pb := planOf(t, cfg, a), planOf(t, cfg, b)
	if len(pa.events) == 0 {
		t.Fatalf("the test needs an event at request 1: %+v", pa.events)
	}
	// Dropping a tool (the frame) must not undo the clearing.
	if pb.clearTo < pa.clearTo {
		t.Errorf("the cleared region shrank from %d to %d messages: events %+v, then %+v", pa.clearTo, pb.clearTo, pa.events, pb.events)
	}
}
