package metrics

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"

	"github.com/ctxguard/ctxguard/internal/breaker"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
)

// scraped is one scrape, by metric family name.
type scraped map[string]*dto.MetricFamily

// scrape serves m's Handler once, as Prometheus would request it, and
// parses the text exposition.
func scrape(t testing.TB, m *Metrics) scraped {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	m.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(pmodel.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parsing the exposition: %v", err)
	}
	return fams
}

// series returns the series of family name whose labels include every
// "name=value" of match.
func (s scraped) series(name string, match ...string) []*dto.Metric {
	mf := s[name]
	if mf == nil {
		return nil
	}
	var out []*dto.Metric
	for _, m := range mf.Metric {
		if hasLabels(m, match) {
			out = append(out, m)
		}
	}
	return out
}

func hasLabels(m *dto.Metric, match []string) bool {
	for _, kv := range match {
		k, v, _ := strings.Cut(kv, "=")
		found := false
		for _, l := range m.Label {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// value sums the counters or gauges of family name matching match. It
// returns NaN when no series matches.
func (s scraped) value(name string, match ...string) float64 {
	ms := s.series(name, match...)
	if len(ms) == 0 {
		return math.NaN()
	}
	var v float64
	for _, m := range ms {
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Untyped != nil:
			v += m.Untyped.GetValue()
		}
	}
	return v
}

// histogram returns the sample count and sum of the one histogram of
// family name matching match, and its cumulative count at bucket le.
func (s scraped) histogram(t *testing.T, name string, le float64, match ...string) (count uint64, sum float64, atLE uint64) {
	t.Helper()
	ms := s.series(name, match...)
	if len(ms) != 1 || ms[0].Histogram == nil {
		t.Fatalf("%s%v: %d series, want one histogram", name, match, len(ms))
	}
	h := ms[0].Histogram
	atLE = math.MaxUint64
	for _, b := range h.Bucket {
		if b.GetUpperBound() == le {
			atLE = b.GetCumulativeCount()
		}
	}
	if atLE == math.MaxUint64 {
		t.Fatalf("%s has no bucket le=%g", name, le)
	}
	return h.GetSampleCount(), h.GetSampleSum(), atLE
}

// exchanges are records of every kind: each outcome, usage with cache
// reads and writes, passes that save and that add, a pass and a protocol
// and a family this package does not know, a refusal.
func exchanges() []*record.Exchange {
	return []*record.Exchange{
		{
			Protocol: "anthropic", Family: "anthropic", Model: "claude-sonnet-4-5", Session: "s1",
			Outcome: record.Rewritten, Event: true, Compaction: "k1",
			Passes:       []record.Pass{{Name: "clear", Edits: 3, Saved: 4000}, {Name: "compress", Edits: 2, Saved: 1000}},
			TokensBefore: 10000, TokensAfter: 6000,
			Rewrite: 2 * time.Millisecond, FirstByte: 500 * time.Millisecond, Total: 3 * time.Second,
			Status: 200, Usage: &protocol.Usage{Input: 100, CacheRead: 5000, CacheWrite: 900, Output: 300},
			BytesIn: 40000, BytesOut: 35000, BytesResp: 2000,
		},
		{
			Protocol: "responses", Family: "openai", Model: "gpt-5", Session: "s2",
			Outcome: record.Bypassed, Skipped: "bypass",
			TokensBefore: 700, TokensAfter: 700,
			Rewrite: 10 * time.Microsecond, FirstByte: time.Second, Total: 2 * time.Second,
			Status: 200, BytesIn: 500, BytesOut: 500, BytesResp: 700,
		},
		{
			Protocol: "anthropic", Family: "anthropic", Model: "claude-sonnet-4-5", Session: "s1",
			Outcome: record.FailedOpen, ErrorID: "e1",
			Passes:       []record.Pass{{Name: "compact", Edits: 1, Saved: -200}, {Name: "mystery", Edits: 1, Saved: 50}},
			TokensBefore: 8000, TokensAfter: 8000,
			Rewrite: 300 * time.Microsecond, FirstByte: 200 * time.Millisecond, Total: time.Second,
			Status: 200, Usage: &protocol.Usage{Input: 50, CacheRead: 6000, Output: 100},
			BytesIn: 30000, BytesOut: 30000, BytesResp: 1500,
		},
		{
			Protocol: "chat", Family: "", Session: "s3",
			Outcome: record.Refused, ErrorID: "e2",
			Total: time.Millisecond, Status: 413, BytesIn: 1 << 20,
		},
		{
			Protocol: "chat", Family: "mistral", Model: "mistral-large", Session: "s4",
			Outcome: record.RecoveryFailed, Reason: "the compacted retry got status 529", Event: true,
			Passes:       []record.Pass{{Name: "compact", Edits: 1, Saved: 90000}},
			TokensBefore: 120000, TokensAfter: 20000,
			Rewrite: 40 * time.Millisecond, FirstByte: 3 * time.Second, Total: 9 * time.Second,
			Status: 529, BytesIn: 400000, BytesOut: 80000, BytesResp: 300,
		},
		{
			Protocol: "bedrock", Family: "google", Session: "s5",
			Outcome: record.Unchanged, TokensBefore: 50, TokensAfter: 50,
			Rewrite: 100 * time.Microsecond, Total: 5 * time.Second,
			Status: 0,
		},
	}
}

func observed(xs []*record.Exchange) *Metrics {
	m := New()
	for _, x := range xs {
		m.Observe(x)
	}
	return m
}

func TestObserve(t *testing.T) {
	xs := exchanges()
	s := scrape(t, observed(xs))
	a0, r1, a2, c3, c4, g5 := xs[0], xs[1], xs[2], xs[3], xs[4], xs[5]
	ratio := func(us ...*protocol.Usage) float64 {
		var read, prompt int
		for _, u := range us {
			read += u.CacheRead
			prompt += u.PromptTokens()
		}
		return float64(read) / float64(prompt)
	}
	for _, tc := range []struct {
		name  string
		match []string
		want  float64
	}{
		{"ctxguard_requests_total", nil, float64(len(xs))},
		{"ctxguard_requests_total", []string{"protocol=anthropic", "family=anthropic", "outcome=rewritten"}, 1},
		{"ctxguard_requests_total", []string{"protocol=anthropic", "family=anthropic", "outcome=failed_open"}, 1},
		{"ctxguard_requests_total", []string{"protocol=anthropic", "family=anthropic", "outcome=bypassed"}, 0},
		{"ctxguard_requests_total", []string{"protocol=responses", "family=openai", "outcome=bypassed"}, 1},
		{"ctxguard_requests_total", []string{"protocol=chat", "family=unknown", "outcome=refused"}, 1},
		{"ctxguard_requests_total", []string{"protocol=chat", "family=other", "outcome=recovery_failed"}, 1},
		{"ctxguard_requests_total", []string{"protocol=chat", "family=other", "outcome=recovered"}, 0},
		{"ctxguard_requests_total", []string{"protocol=other", "family=google", "outcome=unchanged"}, 1},
		{"ctxguard_edit_events_total", nil, 2},
		{"ctxguard_edit_events_total", []string{"protocol=anthropic", "family=anthropic"}, 1},
		{"ctxguard_edit_events_total", []string{"protocol=chat", "family=other"}, 1},
		{"ctxguard_compactions_total", nil, 1},
		{"ctxguard_compactions_total", []string{"protocol=anthropic", "family=anthropic"}, 1},
		{"ctxguard_failures_total", []string{"protocol=anthropic", "kind=failed_open"}, 1},
		{"ctxguard_failures_total", []string{"protocol=chat", "kind=refused"}, 1},
		{"ctxguard_failures_total", []string{"protocol=chat", "kind=recovery_failed"}, 1},
		{"ctxguard_failures_total", nil, 3},
		{"ctxguard_pass_edits_total", []string{"pass=clear"}, 3},
		{"ctxguard_pass_edits_total", []string{"pass=compact"}, 2},
		{"ctxguard_pass_edits_total", []string{"pass=other"}, 1},
		{"ctxguard_pass_edits_total", []string{"pass=digest"}, 0},
		{"ctxguard_pass_saved_bytes_total", []string{"pass=clear"}, 4000},
		{"ctxguard_pass_saved_bytes_total", []string{"pass=compress"}, 1000},
		{"ctxguard_pass_saved_bytes_total", []string{"pass=compact"}, 90000},
		{"ctxguard_pass_saved_bytes_total", []string{"pass=other"}, 50},
		{"ctxguard_pass_added_bytes_total", []string{"pass=compact"}, 200},
		{"ctxguard_pass_added_bytes_total", nil, 200},
		{"ctxguard_request_bytes_total", []string{"protocol=anthropic", "direction=received"}, float64(a0.BytesIn + a2.BytesIn)},
		{"ctxguard_request_bytes_total", []string{"protocol=anthropic", "direction=sent"}, float64(a0.BytesOut + a2.BytesOut)},
		{"ctxguard_request_bytes_total", []string{"protocol=chat", "direction=received"}, float64(c3.BytesIn + c4.BytesIn)},
		{"ctxguard_request_bytes_total", []string{"protocol=chat", "direction=sent"}, float64(c4.BytesOut)},
		{"ctxguard_response_bytes_total", []string{"protocol=responses"}, float64(r1.BytesResp)},
		{"ctxguard_response_bytes_total", nil, float64(a0.BytesResp + r1.BytesResp + a2.BytesResp + c4.BytesResp)},
		{"ctxguard_prompt_tokens_total", []string{"protocol=anthropic", "family=anthropic", "stage=before"}, float64(a0.TokensBefore + a2.TokensBefore)},
		{"ctxguard_prompt_tokens_total", []string{"protocol=anthropic", "family=anthropic", "stage=after"}, float64(a0.TokensAfter + a2.TokensAfter)},
		{"ctxguard_prompt_tokens_total", []string{"stage=after"}, float64(a0.TokensAfter + r1.TokensAfter + a2.TokensAfter + c4.TokensAfter + g5.TokensAfter)},
		{"ctxguard_upstream_tokens_total", []string{"protocol=anthropic", "family=anthropic", "kind=input"}, float64(a0.Usage.Input + a2.Usage.Input)},
		{"ctxguard_upstream_tokens_total", []string{"protocol=anthropic", "family=anthropic", "kind=cache_read"}, float64(a0.Usage.CacheRead + a2.Usage.CacheRead)},
		{"ctxguard_upstream_tokens_total", []string{"protocol=anthropic", "family=anthropic", "kind=cache_write"}, float64(a0.Usage.CacheWrite)},
		{"ctxguard_upstream_tokens_total", []string{"protocol=anthropic", "family=anthropic", "kind=output"}, float64(a0.Usage.Output + a2.Usage.Output)},
		{"ctxguard_upstream_tokens_total", []string{"protocol=responses"}, 0},
		{"ctxguard_upstream_cache_hit_ratio", []string{"protocol=anthropic", "family=anthropic"}, ratio(a0.Usage, a2.Usage)},
		{"ctxguard_upstream_responses_total", []string{"protocol=anthropic", "status_class=2xx"}, 2},
		{"ctxguard_upstream_responses_total", []string{"protocol=responses", "status_class=2xx"}, 1},
		{"ctxguard_upstream_responses_total", []string{"protocol=chat", "status_class=5xx"}, 1},
		{"ctxguard_upstream_responses_total", []string{"protocol=chat", "status_class=4xx"}, 0}, // the 413 was ctxguard's own
		{"ctxguard_upstream_responses_total", []string{"protocol=other", "status_class=none"}, 1},
	} {
		if got := s.value(tc.name, tc.match...); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.match, got, tc.want)
		}
	}
	// No usage: no ratio (0 would claim the cache was never read).
	if ms := s.series("ctxguard_upstream_cache_hit_ratio", "protocol=responses"); len(ms) != 0 {
		t.Errorf("a cache hit ratio without usage: %v", ms)
	}

	seconds := func(ds ...time.Duration) float64 {
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return sum.Seconds()
	}
	const eps = 1e-9
	for _, tc := range []struct {
		name     string
		protocol string
		le       float64
		count    uint64
		sum      float64
		atLE     uint64
	}{
		// The refusal is in the duration only.
		{"ctxguard_request_duration_seconds", "chat", 0.1, 2, seconds(c3.Total, c4.Total), 1},
		{"ctxguard_rewrite_duration_seconds", "chat", 0.05, 1, seconds(c4.Rewrite), 1},
		{"ctxguard_rewrite_duration_seconds", "anthropic", 0.001, 2, seconds(a0.Rewrite, a2.Rewrite), 1},
		{"ctxguard_rewrite_duration_seconds", "responses", 50e-6, 1, seconds(r1.Rewrite), 1},
		{"ctxguard_upstream_first_byte_seconds", "anthropic", 0.25, 2, seconds(a0.FirstByte, a2.FirstByte), 1},
		// No answer headers: no first byte.
		{"ctxguard_upstream_first_byte_seconds", "other", 0.05, 0, 0, 0},
		{"ctxguard_saved_tokens", "anthropic", 0, 2, float64(a0.Saved()), 1},
		{"ctxguard_saved_tokens", "chat", 100e3, 1, float64(c4.Saved()), 1},
		{"ctxguard_saved_tokens", "responses", 0, 1, 0, 1},
	} {
		count, sum, atLE := s.histogram(t, tc.name, tc.le, "protocol="+tc.protocol)
		if count != tc.count || math.Abs(sum-tc.sum) > eps || atLE != tc.atLE {
			t.Errorf("%s{protocol=%s}: count %d, sum %g, le=%g %d; want %d, %g, %d", tc.name, tc.protocol, count, sum, tc.le, atLE, tc.count, tc.sum, tc.atLE)
		}
	}
}

// TestZeros checks that a fresh Metrics exposes the known protocols'
// series at zero, and a pair's every outcome from its first record.
func TestZeros(t *testing.T) {
	m := New()
	s := scrape(t, m)
	for _, p := range []string{"anthropic", "responses", "chat", "gemini"} {
		for _, tc := range [][]string{
			{"ctxguard_failures_total", "kind=refused"},
			{"ctxguard_upstream_responses_total", "status_class=5xx"},
			{"ctxguard_request_bytes_total", "direction=sent"},
		} {
			if got := s.value(tc[0], append(tc[1:], "protocol="+p)...); got != 0 {
				t.Errorf("%s{protocol=%s}: %v, want 0", tc[0], p, got)
			}
		}
	}
	if n := len(s.series("ctxguard_failures_total", "protocol=other")); n != 0 {
		t.Errorf("protocol=other has %d series before any record of it", n)
	}
	if n := len(s.series("ctxguard_requests_total")); n != 0 {
		t.Errorf("%d requests_total series before any record", n)
	}
	m.Observe(&record.Exchange{Protocol: "chat", Family: "openai", Outcome: record.Bypassed})
	s = scrape(t, m)
	if n, want := len(s.series("ctxguard_requests_total", "protocol=chat", "family=openai")), len(record.Outcomes); n != want {
		t.Errorf("after one record: %d requests_total series, want one per outcome (%d)", n, want)
	}
	if got := s.value("ctxguard_requests_total", "outcome=refused"); got != 0 {
		t.Errorf("refused: %v, want 0", got)
	}
}

// TestBoundedLabels feeds records whose session, model, route, path,
// family, pass and protocol are all new, and checks that no series is
// added for them and that none of them becomes a label value.
func TestBoundedLabels(t *testing.T) {
	m := New()
	fed := map[string]bool{}
	feed := func(i int) {
		x := &record.Exchange{
			Protocol: fmt.Sprintf("proto-%d", i), Family: fmt.Sprintf("family-%d", i),
			Model: fmt.Sprintf("model-%d", i), ModelID: fmt.Sprintf("model-id-%d", i),
			Session: fmt.Sprintf("session-%d", i), Route: fmt.Sprintf("route-%d", i),
			Path: fmt.Sprintf("/v1/path-%d", i), Client: fmt.Sprintf("client-%d", i),
			Outcome: record.Outcomes[i%len(record.Outcomes)], Compaction: fmt.Sprintf("key-%d", i),
			Passes:       []record.Pass{{Name: fmt.Sprintf("pass-%d", i), Edits: 1, Saved: i - 500}},
			TokensBefore: i, Status: 100 + i,
			Usage: &protocol.Usage{Input: i, CacheRead: i},
		}
		for _, v := range []string{x.Protocol, x.Family, x.Model, x.ModelID, x.Session, x.Route, x.Path, x.Client, x.Compaction, x.Passes[0].Name} {
			fed[v] = true
		}
		m.Observe(x)
	}
	count := func() int {
		n := 0
		for name, mf := range scrape(t, m) {
			if strings.HasPrefix(name, namespace+"_") {
				n += len(mf.Metric)
			}
		}
		return n
	}
	// Status 100+i covers every class within the first 500 records.
	for i := range 500 {
		feed(i)
	}
	base := count()
	for i := 500; i < 1000; i++ {
		feed(i)
	}
	if n := count(); n != base {
		t.Errorf("%d series after 500 records, %d after 1000", base, n)
	}
	for name, mf := range scrape(t, m) {
		for _, s := range mf.Metric {
			for _, l := range s.Label {
				if fed[l.GetValue()] {
					t.Errorf("%s has label %s=%q, a value from a record", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
	// The bound itself: every label value comes from this package's sets.
	allowed := map[string]bool{"received": true, "sent": true, "before": true, "after": true, other: true, unknown: true}
	for _, set := range [][]string{protocols[:], families[:], passes[:], statusClasses[:], usageKinds[:]} {
		for _, v := range set {
			allowed[v] = true
		}
	}
	for _, o := range record.Outcomes {
		allowed[string(o)] = true
	}
	for _, d := range Dependencies {
		allowed[d] = true
	}
	for _, st := range breaker.States {
		allowed[st.String()] = true
	}
	for name, mf := range scrape(t, m) {
		if !strings.HasPrefix(name, namespace+"_") {
			continue
		}
		for _, s := range mf.Metric {
			for _, l := range s.Label {
				if l.GetName() != "le" && !allowed[l.GetValue()] {
					t.Errorf("%s: label %s=%q is outside the bounded sets", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// TestLint runs promlint over everything the handler serves.
func TestLint(t *testing.T) {
	m := observed(exchanges())
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	if len(mfs) < 20 {
		t.Errorf("only %d metric families linted", len(mfs))
	}
}

// TestRuntimeCollectors checks that the Go and process collectors are
// registered (the process one exposes nothing on some systems).
func TestRuntimeCollectors(t *testing.T) {
	s := scrape(t, New())
	if s["go_goroutines"] == nil {
		t.Error("no go_goroutines")
	}
	if runtime.GOOS == "linux" && s["process_start_time_seconds"] == nil {
		t.Error("no process_start_time_seconds")
	}
}

// TestConcurrent observes from many goroutines while scraping (run with
// -race) and checks that nothing is lost.
func TestConcurrent(t *testing.T) {
	m := New()
	xs := exchanges()
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				for _, x := range xs {
					m.Observe(x)
				}
			}
		})
	}
	wg.Go(func() {
		for range 5 {
			rec := httptest.NewRecorder()
			m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("GET /metrics during Observe: %d", rec.Code)
			}
		}
	})
	wg.Wait()
	s := scrape(t, m)
	if got, want := s.value("ctxguard_requests_total"), float64(workers*rounds*len(xs)); got != want {
		t.Errorf("requests_total = %v, want %v", got, want)
	}
	want := float64(workers*rounds) * float64(xs[0].Usage.CacheRead+xs[2].Usage.CacheRead)
	if got := s.value("ctxguard_upstream_tokens_total", "kind=cache_read"); got != want {
		t.Errorf("cache_read tokens = %v, want %v", got, want)
	}
}

func BenchmarkObserve(b *testing.B) {
	m := New()
	xs := exchanges()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		m.Observe(xs[i%len(xs)])
	}
}

// TestBreakers: the breaker metrics count a dependency's breakers by
// state, and sum their trips and refusals, as SetBreakers' function
// reports them at each scrape; before it is set, and for a dependency
// that is not known, they are zeros.
func TestBreakers(t *testing.T) {
	m := New()
	value := func(s scraped, name string, match ...string) float64 {
		t.Helper()
		ss := s.series(name, match...)
		if len(ss) != 1 {
			t.Fatalf("%s %v: %d series", name, match, len(ss))
		}
		if g := ss[0].GetGauge(); g != nil {
			return g.GetValue()
		}
		return ss[0].GetCounter().GetValue()
	}
	s := scrape(t, m)
	for _, st := range breaker.States {
		if v := value(s, "ctxguard_breakers", "dependency=summarizer", "state="+st.String()); v != 0 {
			t.Errorf("%s: %v before SetBreakers", st, v)
		}
	}
	var mu sync.Mutex
	states := []breaker.Status{
		{State: breaker.Closed, Trips: 2, Refused: 30},
		{State: breaker.Open, Fails: 3, Trips: 1, Refused: 12},
		{State: breaker.Open, Fails: 1, Trips: 1},
		{State: breaker.Probing, Fails: 2, Trips: 4, Refused: 1},
	}
	m.SetBreakers("summarizer", func() []breaker.Status { mu.Lock(); defer mu.Unlock(); return states })
	m.SetBreakers("not-a-dependency", func() []breaker.Status { t.Error("an unknown dependency was read"); return nil })
	s = scrape(t, m)
	for _, tc := range []struct {
		name  string
		match []string
		want  float64
	}{
		{"ctxguard_breakers", []string{"state=closed"}, 1},
		{"ctxguard_breakers", []string{"state=open"}, 2},
		{"ctxguard_breakers", []string{"state=probing"}, 1},
		{"ctxguard_breaker_trips_total", nil, 8},
		{"ctxguard_breaker_refused_total", nil, 43},
	} {
		if got := value(s, tc.name, append(tc.match, "dependency=summarizer")...); got != tc.want {
			t.Errorf("%s %v = %v, want %v", tc.name, tc.match, got, tc.want)
		}
	}
	mu.Lock()
	states = states[:1]
	mu.Unlock()
	if got := value(scrape(t, m), "ctxguard_breakers", "dependency=summarizer", "state=open"); got != 0 {
		t.Errorf("open breakers %v after they closed: the scrape does not read the state afresh", got)
	}
}
