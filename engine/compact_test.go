package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/internal/shareddata"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/tools/estimator"
	"github.com/ctxguard/ctxguard/tools/transcript"

	"github.com/ctxguard/ctxguard/internal/guardtest"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/store/storetest"
	"github.com/ctxguard/ctxguard/tokens"
	"github.com/ctxguard/ctxguard/tools/prompt"
	"github.com/ctxguard/ctxguard/tools/sessiongen"
)

// smallWindow is a configuration whose model has a small window, so that
// generated sessions reach it: the line is 36K tokens.
func smallWindow() config.Config {
	cfg := config.Defaults()
	small := model.Limits{Window: 40_000, MaxOutput: 4_000, LongWindow: 40_000}
	cfg.Models.Default = small
	cfg.Models.Overrides = map[string]model.Limits{}
	for _, in := range model.Default().Models() {
		cfg.Models.Overrides[in.ID] = small
	}
	return cfg
}

// fakeSummarizer answers at once with a summary naming its input's size.
type fakeSummarizer struct {
	mu    sync.Mutex
	calls int
	keys  map[string]int
}

func (f *fakeSummarizer) Summarize(ctx context.Context, j *pass.Job) (pass.Summary, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	return pass.Summary{Text: fmt.Sprintf("1. User requests: ...\n(summary of %d bytes)", len(j.Input)), Model: "fake-small", InputTokens: len(j.Input) / 4, OutputTokens: 20}, nil
}

// generated returns generated sessions' request streams in protocol p.
func generated(t testing.TB, p protocol.Protocol, seeds int, turns int) [][][]byte {
	t.Helper()
	var out [][][]byte
	for seed := range uint64(seeds) {
		gen, err := sessiongen.Generate(rand.New(rand.NewPCG(seed, 11)), sessiongen.Options{Turns: turns, MaxResult: 8_000, Protocol: p.Name()})
		if err != nil {
			t.Fatal(err)
		}
		reqs, err := gen.Requests()
		if err != nil {
			t.Fatal(err)
		}
		var bodies [][]byte
		for _, r := range reqs {
			bodies = append(bodies, r.Body)
		}
		out = append(out, bodies)
	}
	return out
}

func TestCompactionSmoke(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.Name(), func(t *testing.T) {
			cfg := smallWindow()
			st := store.NewMemory()
			g := newEngine(t, cfg, withStore(st), withSummarizer(&fakeSummarizer{}))
			h := http.Header{"X-Claude-Code-Session-Id": {"s"}}
			for si, bodies := range generated(t, p, 2, 150) {
				compactions, events := 0, 0
				maxSent := 0
				var prev []byte
				for i, b := range bodies {
					res := g.RewriteBody(context.Background(), p, h, b)
					if res.Err != nil {
						t.Fatalf("session %d request %d: %v", si, i, res.Err)
					}
					if err := validRewrite(p, cfg, b, res.Body); err != nil {
						t.Fatalf("session %d request %d: %v", si, i, err)
					}
					if prev != nil && !extends(t, p, prev, res.Body) {
						if !res.Event {
							t.Fatalf("session %d request %d: the sent history changed without an edit event", si, i)
						}
						events++
					}
					prev = bytes.Clone(res.Body)
					if line := 36_000; tokens.Estimate(res.Body) > line {
						t.Errorf("session %d request %d: %d tokens sent, above the overflow line %d", si, i, tokens.Estimate(res.Body), line)
					}
					if strings.Contains(string(res.Body), "ctxguard compacted the first") && !strings.Contains(string(b), "ctxguard compacted") {
						compactions++
					}
					maxSent = max(maxSent, tokens.Estimate(res.Body))
					g.current().compactPass().WaitIdle()
				}
				t.Logf("session %d: %d requests, %d with a summary, %d edit events, largest sent %d tokens (original last %d)", si, len(bodies), compactions, events, maxSent, tokens.Estimate(bodies[len(bodies)-1]))
				if events > len(bodies)/10 {
					t.Errorf("session %d: %d edit events in %d requests, more than one per 10", si, events, len(bodies))
				}
			}
		})
	}
	_ = anthropic.Protocol
	_ = chat.Protocol
	_ = responses.Protocol
}

// ctlSummarizer is a summarizer whose behaviour a test sets: "fast"
// answers at once, "block" waits for release (or the job's end), "fail"
// errs, "garbage" answers with no text.
type ctlSummarizer struct {
	mode    string
	release chan struct{}
	mu      sync.Mutex
	calls   int
}

func (f *ctlSummarizer) Summarize(ctx context.Context, j *pass.Job) (pass.Summary, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	switch f.mode {
	case "block":
		select {
		case <-f.release:
		case <-ctx.Done():
			return pass.Summary{}, ctx.Err()
		}
	case "fail":
		return pass.Summary{}, fmt.Errorf("upstream said 500")
	case "garbage":
		return pass.Summary{Model: "fake-small"}, nil
	}
	return pass.Summary{Text: fmt.Sprintf("LLM SUMMARY of %d bytes", len(j.Input)), Model: "fake-small", InputTokens: len(j.Input) / 4, OutputTokens: 20}, nil
}

func (f *ctlSummarizer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// summaryOf returns the compaction summary a sent body carries: "llm",
// "extractive" or "" for none.
func summaryOf(body []byte) string {
	s := string(body)
	switch {
	case !strings.Contains(s, "ctxguard compacted the first"):
		return ""
	case strings.Contains(s, "LLM SUMMARY of"):
		return "llm"
	}
	return "extractive"
}

// compactionStream is a generated Claude Code session long enough to be
// compacted several times under smallWindow.
func compactionStream(t testing.TB) [][]byte {
	return generated(t, anthropic.Protocol, 1, 300)[0]
}

var oneSession = guardtest.SessionHeader(0)

// TestCompactionReadyInTime: with the summary written before the session
// reaches swap, every compaction carries the model's summary, one call
// per span, and no extractive one.
func TestCompactionReadyInTime(t *testing.T) {
	sum := &ctlSummarizer{mode: "fast"}
	st := store.NewMemory()
	g := newEngine(t, smallWindow(), withStore(st), withSummarizer(sum))
	seen := map[string]bool{}
	for i, b := range compactionStream(t) {
		res := g.RewriteBody(context.Background(), anthropic.Protocol, oneSession, b)
		switch summaryOf(res.Body) {
		case "extractive":
			t.Fatalf("request %d: an extractive summary although the model's was ready", i)
		case "llm":
			seen[summaryText(res.Body)] = true
		}
		g.current().compactPass().WaitIdle()
	}
	if len(seen) < 2 {
		t.Fatalf("%d distinct summaries: the session was not compacted twice", len(seen))
	}
	// One call per span: each summary sent, and perhaps one prepared for
	// a span the session ended before swapping in.
	if n := sum.count(); n != len(seen) && n != len(seen)+1 {
		t.Errorf("%d summarizer calls for %d summaries: a span was summarized twice", n, len(seen))
	}
}

// summaryText returns the summary message's text as sent.
func summaryText(body []byte) string {
	s := string(body)
	i := strings.Index(s, "ctxguard compacted the first")
	j := strings.Index(s[i:], "</summary>")
	return s[i : i+j]
}

// TestCompactionLateThenWait: a summary still being written when the
// session reaches the overflow line is waited for.
func TestCompactionLateThenWait(t *testing.T) {
	sum := &ctlSummarizer{mode: "block", release: make(chan struct{})}
	cfg := smallWindow()
	pass.Update(&cfg.Passes, func(s *compact.Config) { s.Wait = time.Minute })
	g := newEngine(t, cfg, withStore(store.NewMemory()), withSummarizer(sum))
	waited := false
	for i, b := range compactionStream(t) {
		done := make(chan Result, 1)
		go func() { done <- g.RewriteBody(context.Background(), anthropic.Protocol, oneSession, b) }()
		var res Result
		select {
		case res = <-done:
		case <-time.After(200 * time.Millisecond):
			// Waiting for the summary: let it land.
			waited = true
			close(sum.release)
			res = <-done
		}
		if k := summaryOf(res.Body); k != "" {
			if k != "llm" {
				t.Fatalf("request %d: %s summary, want the model's", i, k)
			}
			break
		}
	}
	if !waited {
		t.Fatal("no request waited for the summary")
	}
}

// TestCompactionFallback: when the model's summary is late beyond wait,
// fails or answers garbage, the request at the overflow line carries the
// extractive summary, and later requests keep it (a summary that lands
// afterwards never replaces it).
func TestCompactionFallback(t *testing.T) {
	for _, mode := range []string{"block", "fail", "garbage"} {
		t.Run(mode, func(t *testing.T) {
			sum := &ctlSummarizer{mode: mode, release: make(chan struct{})}
			cfg := smallWindow()
			pass.Update(&cfg.Passes, func(s *compact.Config) { s.Wait = 50 * time.Millisecond })
			g := newEngine(t, cfg, withStore(store.NewMemory()), withSummarizer(sum))
			var first string
			after := 0
			for i, b := range compactionStream(t) {
				res := g.RewriteBody(context.Background(), anthropic.Protocol, oneSession, b)
				if res.Err != nil {
					t.Fatalf("request %d: %v", i, res.Err)
				}
				k := summaryOf(res.Body)
				if first == "" && k != "" {
					if k != "extractive" {
						t.Fatalf("request %d: %s summary, want the extractive one", i, k)
					}
					first = summaryText(res.Body)
					if mode == "block" {
						close(sum.release) // the model's summary lands now, too late
						g.current().compactPass().WaitIdle()
					}
					continue
				}
				if first != "" && k != "" && strings.Contains(string(res.Body), first) {
					after++
				}
			}
			if first == "" || after == 0 {
				t.Fatalf("extractive summary %v, kept by %d later requests", first != "", after)
			}
		})
	}
}

// TestCompactionConcurrent: requests of one session arriving at once share
// one summary call.
func TestCompactionConcurrent(t *testing.T) {
	bodies := compactionStream(t)
	// Find a request that starts a summary on its own.
	k := -1
	for i, b := range bodies {
		sum := &ctlSummarizer{mode: "fast"}
		g := newEngine(t, smallWindow(), withStore(store.NewMemory()), withSummarizer(sum))
		g.RewriteBody(context.Background(), anthropic.Protocol, oneSession, b)
		g.current().compactPass().WaitIdle()
		if sum.count() > 0 {
			k = i
			break
		}
	}
	if k < 0 {
		t.Fatal("no request starts a summary")
	}
	fresh := &ctlSummarizer{mode: "block", release: make(chan struct{})}
	g2 := newEngine(t, smallWindow(), withStore(store.NewMemory()), withSummarizer(fresh))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := http.Header{"X-Claude-Code-Session-Id": {fmt.Sprint("s", w%2)}}
			g2.RewriteBody(context.Background(), anthropic.Protocol, h, bodies[k])
		}()
	}
	wg.Wait()
	close(fresh.release)
	g2.current().compactPass().WaitIdle()
	if n := fresh.count(); n != 1 {
		t.Fatalf("%d summarizer calls for one span", n)
	}
}

// TestCompactionRestartSameBytes: a second Guard on the same store (a
// restart, or another instance) sends exactly the bytes the first sent,
// without calling a summarizer again.
func TestCompactionRestartSameBytes(t *testing.T) {
	st := store.NewMemory()
	a := newEngine(t, smallWindow(), withStore(st), withSummarizer(&ctlSummarizer{mode: "fast"}))
	bodies := compactionStream(t)
	var sent [][]byte
	compacted := 0
	for _, b := range bodies {
		res := a.RewriteBody(context.Background(), anthropic.Protocol, oneSession, b)
		sent = append(sent, bytes.Clone(res.Body))
		if summaryOf(res.Body) != "" {
			compacted++
		}
		a.current().compactPass().WaitIdle()
	}
	if compacted == 0 {
		t.Fatal("nothing was compacted")
	}
	other := &ctlSummarizer{mode: "fail"}
	b := newEngine(t, smallWindow(), withStore(st), withSummarizer(other))
	for i, body := range bodies {
		res := b.RewriteBody(context.Background(), anthropic.Protocol, oneSession, body)
		if !bytes.Equal(res.Body, sent[i]) {
			t.Fatalf("request %d: the second Guard sent other bytes", i)
		}
	}
	if other.count() != 0 {
		t.Fatalf("the second Guard asked a summarizer %d times", other.count())
	}
}

// TestCompactionFleet: two Guards on one store (two instances behind a
// round-robin balancer) take a session's requests in turn. While one asks
// a model for a span's summary, the other does not ask again (it watches
// the store for the summary under the first one's lease), and once the
// summary lands both send it: every span is summarized once, by one of
// them.
func TestCompactionFleet(t *testing.T) {
	st := store.NewMemory()
	release := make(chan struct{})
	sa := &ctlSummarizer{mode: "block", release: release}
	sb := &ctlSummarizer{mode: "block", release: release}
	cfg := smallWindow()
	pass.Update(&cfg.Passes, func(s *compact.Config) { s.Wait = time.Minute })
	guards := []*Engine{
		newEngine(t, cfg, withStore(st), withSummarizer(sa)),
		newEngine(t, cfg, withStore(st), withSummarizer(sb)),
	}
	calls := func() int { return sa.count() + sb.count() }
	seen := map[string]bool{}
	blocked := -1 // the request at which a summary call first blocked
	for i, b := range compactionStream(t) {
		g := guards[i%2]
		done := make(chan Result, 1)
		go func() { done <- g.RewriteBody(context.Background(), anthropic.Protocol, oneSession, b) }()
		var res Result
		select {
		case res = <-done:
		case <-time.After(time.Minute):
			t.Fatalf("request %d: no answer in a minute", i)
		}
		if summaryOf(res.Body) == "llm" {
			seen[summaryText(res.Body)] = true
		}
		switch {
		case blocked < 0 && calls() > 0:
			blocked = i
		case blocked >= 0 && i == blocked+3:
			// Three more requests, both Guards, while the first call
			// is held: nobody asked again.
			if n := calls(); n != 1 {
				t.Fatalf("%d summarizer calls while the first was being written: a span was summarized twice", n)
			}
			close(release)
			for _, g := range guards {
				g.current().compactPass().WaitIdle()
			}
		}
		if blocked >= 0 && i > blocked+3 {
			for _, g := range guards {
				g.current().compactPass().WaitIdle()
			}
		}
	}
	if blocked < 0 || len(seen) < 2 {
		t.Fatalf("first summary call at request %d, %d summaries sent: the session was not compacted twice", blocked, len(seen))
	}
	if n := calls(); n != len(seen) && n != len(seen)+1 {
		t.Errorf("%d summarizer calls for %d summaries sent: a span was summarized twice", n, len(seen))
	}
}

// BenchmarkCompactionSwap compares the request that swaps a prepared
// summary in with the request before it, which does not: both on a Guard
// that has seen the session's previous request (the incremental path) and
// whose store holds the summary. The bound: at most 5 ms more.
func BenchmarkCompactionSwap(b *testing.B) {
	bodies := compactionStream(b)
	st := store.NewMemory()
	g := newEngine(b, smallWindow(), withStore(st), withSummarizer(&ctlSummarizer{mode: "fast"}))
	k := -1
	for i, body := range bodies {
		if res := g.RewriteBody(context.Background(), anthropic.Protocol, oneSession, body); res.Compaction != "" {
			k = i
			break
		}
		g.current().compactPass().WaitIdle()
	}
	if k < 2 {
		b.Fatal("no request swapped a summary in")
	}
	for _, tc := range []struct {
		name string
		at   int
	}{{"before", k - 1}, {"swap", k}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bodies[tc.at])))
			for b.Loop() {
				b.StopTimer()
				g := newEngine(b, smallWindow(), withStore(st), withSummarizer(&ctlSummarizer{mode: "fast"}))
				g.RewriteBody(context.Background(), anthropic.Protocol, oneSession, bodies[tc.at-1])
				b.StartTimer()
				res := g.RewriteBody(context.Background(), anthropic.Protocol, oneSession, bodies[tc.at])
				if (res.Compaction != "") != (tc.name == "swap") {
					b.Fatalf("request %d: compaction %q", tc.at, res.Compaction)
				}
			}
		})
	}
}

// extends reports whether sent body b extends sent body a as the prompt
// cache sees them (tools/prompt), in protocol p.
func extends(t *testing.T, p protocol.Protocol, a, b []byte) bool {
	t.Helper()
	ca, err := p.Parse(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := p.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	_, ok := prompt.Shared(prompt.FromConversation(ca), prompt.FromConversation(cb))
	return ok
}

// TestRecoverLearnsAndCompacts: after the upstream refuses a request as
// too long, Recover learns the model's limit from the error, returns the
// same request compacted (extractive, no waiting), and later requests of
// the session (and of a restarted Guard on the same store) are compacted
// under the learned limit too.
func TestRecoverLearnsAndCompacts(t *testing.T) {
	cfg := config.Defaults() // a 200K window: nothing is compacted on its own
	pass.Update(&cfg.Passes, func(s *compact.Config) { s.Wait = 100 * time.Millisecond })
	st := store.NewMemory()
	g := newEngine(t, cfg, withStore(st), withSummarizer(&ctlSummarizer{mode: "block", release: make(chan struct{})}))
	bodies := compactionStream(t)
	k := len(bodies) * 2 / 3
	req := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	req.Header = guardtest.SessionHeader(1)
	out := g.Rewrite(context.Background(), req, anthropic.Protocol, bodies[k])
	if out.Recover == nil {
		t.Fatal("no Recover on a rewritten request")
	}
	sent := tokens.Estimate(bodies[k])
	if out.Body != nil {
		sent = tokens.Estimate(out.Body)
	}
	if summaryOf(out.Body) != "" {
		t.Fatal("compacted before any overflow")
	}
	// The API counted twice what ctxguard estimated, over a limit of 1.5×.
	retry, err := out.Recover(context.Background(), protocol.Overflow{Tokens: 2 * sent, Limit: 3 * sent / 2})
	if err != nil {
		t.Fatalf("Recover found nothing to do: %v", err)
	}
	body := retry.Body
	if summaryOf(body) != "extractive" {
		t.Fatalf("retry carries summary %q, want the extractive one (no waiting)", summaryOf(body))
	}
	if got := tokens.Estimate(body); got >= sent*3/4 {
		t.Errorf("retry estimated at %d tokens; the learned line is %d", got, sent*3/4)
	}
	if err := validRewrite(anthropic.Protocol, cfg, bodies[k], body); err != nil {
		t.Fatal(err)
	}
	if out.Record.TokensAfter != sent {
		t.Errorf("before the retry is sent, the record has %d tokens sent, want the first body's %d", out.Record.TokensAfter, sent)
	}
	retry.Sent()
	if out.Record.TokensAfter != tokens.Estimate(body) {
		t.Errorf("the record has %d tokens sent, want the retry's %d", out.Record.TokensAfter, tokens.Estimate(body))
	}
	if h := out.RespHeader.Get("X-Ctxguard-Tokens-After"); h != strconv.Itoa(tokens.Estimate(body)) {
		t.Errorf("X-Ctxguard-Tokens-After %s, want the retry's %d", h, tokens.Estimate(body))
	}
	retry.Release()
	// The next request, on this Guard and on a restarted one, is
	// compacted as the retry was.
	next := g.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(1), bodies[k+1])
	g2 := newEngine(t, cfg, withStore(st), withSummarizer(&ctlSummarizer{mode: "block", release: make(chan struct{})}))
	again := g2.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(1), bodies[k+1])
	if summaryOf(next.Body) == "" || !bytes.Equal(next.Body, again.Body) {
		t.Fatalf("after the lesson: summary %q, restarted Guard same bytes %v", summaryOf(next.Body), bytes.Equal(next.Body, again.Body))
	}
}

// TestMarginCoversEstimator: the margin compaction keeps below the
// overflow line is at least the estimator's measured underestimate on the
// growth of the shared real sessions (against the usage their API
// reported). An overestimate (Codex: +15%) makes compaction early, never
// late. tokens.TestOverflowMargin derives the margin in full (held-out
// halves, single sessions, absolute size).
func TestMarginCoversEstimator(t *testing.T) {
	if compact.Margin != tokens.OverflowMargin {
		t.Errorf("compact.Margin %v is not tokens.OverflowMargin %v", compact.Margin, tokens.OverflowMargin)
	}
	for _, kind := range []string{"claude-code", "codex"} {
		ss, err := transcript.Load([]string{shareddata.Dir(t, kind)}, transcript.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rep := estimator.Accuracy(ss, estimator.AccuracyOptions{})
		agg := rep.Estimate.Growth.Aggregate
		t.Logf("%s: aggregate growth error %+.1f%% over %d pairs; margin %.0f%%", kind, 100*agg, rep.Pairs, 100*compact.Margin)
		if rep.Pairs < 100 {
			t.Fatalf("%s: %d pairs: the test measures too little", kind, rep.Pairs)
		}
		if -agg > compact.Margin {
			t.Errorf("%s: the estimator is short by %+.1f%%, more than the margin %.0f%%", kind, 100*agg, 100*compact.Margin)
		}
	}
}

// TestClientCompactionPassesThrough: Claude Code's own compaction request
// goes upstream untouched, and the short history the client starts after
// it is rewritten exactly as a fresh Guard rewrites it.
func TestClientCompactionPassesThrough(t *testing.T) {
	cfg := smallWindow()
	g := newEngine(t, cfg, withStore(store.NewMemory()), withSummarizer(&ctlSummarizer{mode: "fast"}))
	bodies := compactionStream(t)
	h := guardtest.SessionHeader(5)
	for _, b := range bodies[:120] {
		g.RewriteBody(context.Background(), anthropic.Protocol, h, b)
		g.current().compactPass().WaitIdle()
	}
	// The client's compaction request: the history so far, then its prompt.
	last := bodies[119]
	c, err := anthropic.Parse(last)
	if err != nil {
		t.Fatal(err)
	}
	end := c.List.End - 1 // the closing bracket
	compactReq := append(append(bytes.Clone(last[:end]), `,{"role":"user","content":[{"type":"text","text":"Your task is to create a detailed summary of the conversation so far, paying close attention to the user's explicit requests."}]}`...), last[end:]...)
	res := g.RewriteBody(context.Background(), anthropic.Protocol, h, compactReq)
	if res.Skipped != "client compaction" || !bytes.Equal(res.Body, compactReq) {
		t.Fatalf("the client's compaction was %q, changed %v", res.Skipped, !bytes.Equal(res.Body, compactReq))
	}
	// After it: a short history that starts with the client's summary.
	after := []byte(`{"model":"claude-opus-4-5","max_tokens":1000,"messages":[{"role":"user","content":"This session is being continued from a previous conversation. Summary: ..."},{"role":"assistant","content":"Continuing."},{"role":"user","content":"go on"}]}`)
	got := g.RewriteBody(context.Background(), anthropic.Protocol, h, after)
	want := newEngine(t, cfg, withStore(store.NewMemory())).RewriteBody(context.Background(), anthropic.Protocol, h, after)
	if got.Err != nil || !bytes.Equal(got.Body, want.Body) || got.Compaction != "" {
		t.Fatalf("after the client's compaction: err %v, same as a fresh Guard %v, compaction %q", got.Err, bytes.Equal(got.Body, want.Body), got.Compaction)
	}
}

// getCounter counts a store's Get calls.
type getCounter struct {
	store.Store
	mu   sync.Mutex
	gets int
}

func (c *getCounter) Get(ctx context.Context, key string) ([]byte, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Store.Get(ctx, key)
}

func (c *getCounter) take() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.gets
	c.gets = 0
	return n
}

// TestCompactionReadsStoreOnce: while a span's summary is missing (the
// model fails), a request asks the store for it once, not at every step
// of its replay: on a shared store every read is a round trip.
func TestCompactionReadsStoreOnce(t *testing.T) {
	st := &getCounter{Store: store.NewMemory()}
	cfg := smallWindow()
	pass.Update(&cfg.Passes, func(s *compact.Config) { s.Wait = 0 })
	g := newEngine(t, cfg, withStore(st), withSummarizer(&ctlSummarizer{mode: "fail"}))
	most, compacted := 0, 0
	for i, b := range compactionStream(t) {
		st.take()
		res := g.RewriteBody(context.Background(), anthropic.Protocol, oneSession, b)
		if res.Err != nil {
			t.Fatalf("request %d: %v", i, res.Err)
		}
		if summaryOf(res.Body) != "" {
			compacted++
		}
		most = max(most, st.take())
	}
	if compacted == 0 {
		t.Fatal("nothing was compacted")
	}
	if most > 3 {
		t.Errorf("a request read the store %d times", most)
	}
}

// pifFailing is a store whose PutIfAbsent fails while fail is set.
type pifFailing struct {
	store.Store
	fail bool
}

func (s *pifFailing) PutIfAbsent(ctx context.Context, key string, val []byte) ([]byte, bool, error) {
	if s.fail {
		return nil, false, fmt.Errorf("connection refused")
	}
	return s.Store.PutIfAbsent(ctx, key, val)
}

// TestLearnedLimitsShared: two instances on one store agree on what an
// overflow taught: a lesson one stores is read by the other (within
// limitRefresh), and an instance that could not store its own lesson
// uses it alone, and still reads the lesson another stores under that
// number.
func TestLearnedLimitsShared(t *testing.T) {
	ctx := context.Background()
	clk := storetest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	mem := store.NewMemory()
	down := &pifFailing{Store: mem, fail: true}
	a := newEngine(t, smallWindow(), withStore(mem), withClock(clk.Now))
	b := newEngine(t, smallWindow(), withStore(down), withClock(clk.Now))
	info := model.Info{ID: "claude-sonnet-4-5", Window: 40_000, MaxOutput: 4_000}
	over := protocol.Overflow{Tokens: 40_000, Limit: 30_000}

	b.limits.learn(ctx, b, info, over, 36_000) // not stored: b's alone
	wb := b.limits.window(ctx, b, info.ID)
	if wb == 0 || wb >= info.Window {
		t.Fatalf("b learned window %d", wb)
	}
	if w := a.limits.window(ctx, a, info.ID); w != 0 {
		t.Fatalf("a sees window %d, though b could not store its lesson", w)
	}
	a.limits.learn(ctx, a, info, protocol.Overflow{Tokens: 40_000, Limit: 20_000}, 36_000) // lesson 1
	wa := a.limits.window(ctx, a, info.ID)
	if wa == 0 || wa == wb {
		t.Fatalf("a learned window %d (b's %d)", wa, wb)
	}
	clk.Advance(limitRefresh)
	if w := b.limits.window(ctx, b, info.ID); w != wa {
		t.Errorf("after limitRefresh b uses window %d, want a's stored lesson %d", w, wa)
	}
}

// compactPass returns the compaction pass s runs, or nil.
func (s *compiled) compactPass() *compact.Pass {
	for _, p := range s.built.Passes() {
		if cp, ok := p.(*compact.Pass); ok {
			return cp
		}
	}
	return nil
}
