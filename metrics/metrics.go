// Package metrics exposes ctxguard's exchange records as Prometheus
// metrics.
//
// A Metrics is a record.Observer: it counts every published
// record.Exchange into its own registry (with the Go runtime and process
// collectors), and Handler serves that registry in the Prometheus
// exposition formats. Every label has a bounded set of values — the
// protocol, the model family, the pass, the outcome, a status class — so
// the number of series does not grow with sessions, models, routes or
// paths, which never become labels.
//
// Besides the records, it reads the state of ctxguard's circuit breakers
// (SetBreakers): how many are closed, open or probing, how often they
// opened and how many calls they refused, per dependency ("summarizer").
//
// The metrics and their meaning are documented in docs/observability.md's Metrics
// section (a test keeps the two in step).
package metrics

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ctxguard/ctxguard/internal/breaker"
	"github.com/ctxguard/ctxguard/record"
)

const namespace = "ctxguard"

// The label values. Each list is the whole set a label can take; the
// value for anything else is "other" (and "unknown" for a record with no
// model family).
var (
	// protocols: the protocols' names (record.Exchange.Protocol); the
	// first knownProtocols have series from the start.
	protocols = [...]string{"anthropic", "responses", "chat", "gemini", other}
	// families: model.Family's names for the providers' families.
	families = [...]string{"anthropic", "openai", "google", other, unknown}
	// passes: the pipeline's passes (their Name), which configuration
	// can only enable or disable. Any other name counts as "other".
	passes = [...]string{"compress", "digest", "persist", "thinking", "clear", "compact"}
	// statusClasses: the class of the status the client got from the
	// upstream; "none" when it got none. Any other (1xx, over 599)
	// counts as "other".
	statusClasses = [...]string{"2xx", "3xx", "4xx", "5xx", "none"}
	// failureKinds: the outcomes that are failures.
	failureKinds = [...]record.Outcome{record.FailedOpen, record.RecoveryFailed, record.Refused}
	// usageKinds: the token kinds of protocol.Usage.
	usageKinds = [...]string{"input", "cache_read", "cache_write", "output"}
	// Dependencies: the dependencies whose circuit breakers are shown
	// (SetBreakers), each with series from the start.
	Dependencies = [...]string{"summarizer"}
)

const (
	other          = "other"
	unknown        = "unknown"
	knownProtocols = 4
)

// Metrics holds ctxguard's Prometheus metrics. Observe and Handler are
// safe for concurrent use. It retains no record, only the running sums
// and histograms below; its memory is bounded by the label sets.
type Metrics struct {
	reg *prometheus.Registry

	requests      *prometheus.CounterVec // protocol, family, outcome
	events        *prometheus.CounterVec // protocol, family
	compactions   *prometheus.CounterVec // protocol, family
	promptTokens  *prometheus.CounterVec // protocol, family, stage
	failures      *prometheus.CounterVec // protocol, kind
	requestBytes  *prometheus.CounterVec // protocol, direction
	responseBytes *prometheus.CounterVec // protocol
	responses     *prometheus.CounterVec // protocol, status_class
	passEdits     *prometheus.CounterVec // pass
	passSaved     *prometheus.CounterVec // pass
	passAdded     *prometheus.CounterVec // pass
	rewrite       *prometheus.HistogramVec
	saved         *prometheus.HistogramVec
	firstByte     *prometheus.HistogramVec
	duration      *prometheus.HistogramVec

	// The children of the vectors above, cached by label index so that
	// Observe neither hashes label values nor allocates: per protocol,
	// per (protocol, family) pair, per known pass. A protocol's or a
	// pair's are created with its first record (the known protocols' and
	// the passes' in New), all at once, so a dashboard sees zeros for
	// what has not happened.
	mu      sync.Mutex // serializes creating them
	byProto [len(protocols)]atomic.Pointer[protoSeries]
	byPair  [len(protocols) * len(families)]atomic.Pointer[pairSeries]
	byPass  [len(passes)]passSeries

	// breakers read each dependency's breakers (SetBreakers).
	breakers [len(Dependencies)]atomic.Pointer[func() []breaker.Status]
}

// protoSeries are the series of one protocol.
type protoSeries struct {
	failures                  [len(failureKinds)]prometheus.Counter
	received, sent, relayed   prometheus.Counter
	status                    [len(statusClasses)]prometheus.Counter
	rewrite, saved, firstByte prometheus.Observer
	duration                  prometheus.Observer
}

// pairSeries are the series of one (protocol, family) pair, and its
// upstream usage, which the usage collector exposes.
type pairSeries struct {
	requests             []prometheus.Counter // by record.Outcomes
	events, compactions  prometheus.Counter
	before, after        prometheus.Counter
	input, read, written atomic.Uint64
	output               atomic.Uint64
}

// passSeries are the series of one pass.
type passSeries struct {
	edits, saved, added prometheus.Counter
}

// New returns Metrics with every metric registered in a registry of its
// own (never prometheus.DefaultRegisterer), with the Go runtime and
// process collectors.
func New() *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: name, Help: help, Buckets: buckets}, []string{"protocol"})
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: counter("requests_total",
			"Requests ctxguard handled, by what happened to their body.", "protocol", "family", "outcome"),
		events: counter("edit_events_total",
			"Requests whose history before the newest turn ctxguard changed (the prompt cache is written again from there).", "protocol", "family"),
		compactions: counter("compactions_total",
			"Requests that carried a compaction for the first time.", "protocol", "family"),
		promptTokens: counter("prompt_tokens_total",
			"Estimated prompt tokens, as the client sent them (stage=before) and as ctxguard sent them upstream (stage=after).", "protocol", "family", "stage"),
		failures: counter("failures_total",
			"Requests that failed open (sent upstream untouched after a pass failed), whose overflow recovery failed, or that ctxguard refused with an error answer.", "protocol", "kind"),
		requestBytes: counter("request_bytes_total",
			"Request body bytes received from clients (decoded) and sent upstream.", "protocol", "direction"),
		responseBytes: counter("response_bytes_total",
			"Answer body bytes relayed to clients.", "protocol"),
		responses: counter("upstream_responses_total",
			"Answers from the upstream, by the class of their status; none: no answer reached the client.", "protocol", "status_class"),
		passEdits: counter("pass_edits_total",
			"Edits each pass made.", "pass"),
		passSaved: counter("pass_saved_bytes_total",
			"Bytes each pass removed from requests (requests where it removed more than it added).", "pass"),
		passAdded: counter("pass_added_bytes_total",
			"Bytes each pass added to requests (requests where it added more than it removed).", "pass"),
		rewrite: histogram("rewrite_duration_seconds",
			"Time ctxguard added to a request sent upstream: decoding and rewriting its body.",
			[]float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1}),
		saved: histogram("saved_tokens",
			"Estimated prompt tokens ctxguard removed from a request sent upstream.",
			[]float64{0, 100, 300, 1e3, 3e3, 10e3, 30e3, 100e3, 300e3, 1e6}),
		firstByte: histogram("upstream_first_byte_seconds",
			"Time from a request's arrival to the upstream's answer headers.",
			[]float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120, 300}),
		duration: histogram("request_duration_seconds",
			"Time from a request's arrival to the end of its answer.",
			[]float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}),
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.events, m.compactions, m.promptTokens, m.failures,
		m.requestBytes, m.responseBytes, m.responses,
		m.passEdits, m.passSaved, m.passAdded,
		m.rewrite, m.saved, m.firstByte, m.duration,
		usageCollector{m},
		breakerCollector{m},
	)
	for i, name := range passes {
		m.byPass[i] = passSeries{
			edits: m.passEdits.WithLabelValues(name),
			saved: m.passSaved.WithLabelValues(name),
			added: m.passAdded.WithLabelValues(name),
		}
	}
	for p := range knownProtocols {
		m.proto(p)
	}
	return m
}

// Handler returns the handler that serves the metrics. A collector that
// fails does not fail the scrape: the rest is served, and the failure is
// counted in promhttp_metric_handler_errors_total.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg,
	})
}

// Observe counts x. It implements record.Observer: it does not modify or
// keep x, and once x's protocol and family have been seen it takes no
// lock and does not allocate (a pass, outcome or status outside the known
// sets costs a label lookup).
func (m *Metrics) Observe(x *record.Exchange) {
	if x == nil {
		return
	}
	pi, fi := index(protocols[:], x.Protocol), familyIndex(x.Family)
	p, f := m.proto(pi), m.pair(pi, fi)

	if o := slices.Index(record.Outcomes, x.Outcome); o >= 0 {
		f.requests[o].Inc()
	} else {
		m.requests.WithLabelValues(protocols[pi], families[fi], other).Inc()
	}
	for i, k := range failureKinds {
		if x.Outcome == k {
			p.failures[i].Inc()
		}
	}
	if x.Event {
		f.events.Inc()
	}
	if x.Compaction != "" {
		f.compactions.Inc()
	}
	addInt(f.before, int64(x.TokensBefore))
	addInt(f.after, int64(x.TokensAfter))
	addInt(p.received, x.BytesIn)
	addInt(p.sent, x.BytesOut)
	addInt(p.relayed, x.BytesResp)
	if u := x.Usage; u != nil {
		f.input.Add(uint64(max(u.Input, 0)))
		f.read.Add(uint64(max(u.CacheRead, 0)))
		f.written.Add(uint64(max(u.CacheWrite, 0)))
		f.output.Add(uint64(max(u.Output, 0)))
	}
	for _, ps := range x.Passes {
		m.observePass(ps)
	}

	p.duration.Observe(x.Total.Seconds())
	if x.Outcome == record.Refused {
		// ctxguard answered itself: nothing went upstream, and the status
		// is its own.
		return
	}
	p.rewrite.Observe(x.Rewrite.Seconds())
	p.saved.Observe(float64(max(x.Saved(), 0)))
	if x.FirstByte > 0 {
		p.firstByte.Observe(x.FirstByte.Seconds())
	}
	if c := statusClass(x.Status); c >= 0 {
		p.status[c].Inc()
	} else {
		m.responses.WithLabelValues(protocols[pi], other).Inc()
	}
}

// observePass counts what one pass did.
func (m *Metrics) observePass(ps record.Pass) {
	var s passSeries
	if i := slices.Index(passes[:], ps.Name); i >= 0 {
		s = m.byPass[i]
	} else {
		s = passSeries{m.passEdits.WithLabelValues(other), m.passSaved.WithLabelValues(other), m.passAdded.WithLabelValues(other)}
	}
	addInt(s.edits, int64(ps.Edits))
	if ps.Saved > 0 {
		s.saved.Add(float64(ps.Saved))
	} else {
		addInt(s.added, -int64(ps.Saved))
	}
}

// proto returns protocol i's series, creating them the first time.
func (m *Metrics) proto(i int) *protoSeries {
	if s := m.byProto[i].Load(); s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.byProto[i].Load(); s != nil {
		return s
	}
	name := protocols[i]
	s := &protoSeries{
		received:  m.requestBytes.WithLabelValues(name, "received"),
		sent:      m.requestBytes.WithLabelValues(name, "sent"),
		relayed:   m.responseBytes.WithLabelValues(name),
		rewrite:   m.rewrite.WithLabelValues(name),
		saved:     m.saved.WithLabelValues(name),
		firstByte: m.firstByte.WithLabelValues(name),
		duration:  m.duration.WithLabelValues(name),
	}
	for k, kind := range failureKinds {
		s.failures[k] = m.failures.WithLabelValues(name, string(kind))
	}
	for c, class := range statusClasses {
		s.status[c] = m.responses.WithLabelValues(name, class)
	}
	m.byProto[i].Store(s)
	return s
}

// pair returns the series of protocol p and family f, creating them the
// first time.
func (m *Metrics) pair(p, f int) *pairSeries {
	cell := &m.byPair[p*len(families)+f]
	if s := cell.Load(); s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := cell.Load(); s != nil {
		return s
	}
	proto, family := protocols[p], families[f]
	s := &pairSeries{
		requests:    make([]prometheus.Counter, len(record.Outcomes)),
		events:      m.events.WithLabelValues(proto, family),
		compactions: m.compactions.WithLabelValues(proto, family),
		before:      m.promptTokens.WithLabelValues(proto, family, "before"),
		after:       m.promptTokens.WithLabelValues(proto, family, "after"),
	}
	for o, outcome := range record.Outcomes {
		s.requests[o] = m.requests.WithLabelValues(proto, family, string(outcome))
	}
	cell.Store(s)
	return s
}

// usageCollector exposes the upstream's usage of every (protocol, family)
// pair seen: the token counters, and the cache hit ratio computed from
// them.
type usageCollector struct{ m *Metrics }

var (
	usageDesc = prometheus.NewDesc(namespace+"_upstream_tokens_total",
		"Tokens the upstream reported in its answers' usage: input (neither read from nor written to the prompt cache), cache_read, cache_write, output.",
		[]string{"protocol", "family", "kind"}, nil)
	ratioDesc = prometheus.NewDesc(namespace+"_upstream_cache_hit_ratio",
		"Share of the prompt tokens the upstream reported that it read from its prompt cache, since start: cache_read / (input + cache_read + cache_write).",
		[]string{"protocol", "family"}, nil)
)

// Describe implements prometheus.Collector.
func (usageCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- usageDesc
	ch <- ratioDesc
}

// Collect implements prometheus.Collector. The four sums of a pair are
// read one after the other, not as one snapshot: a scrape during an
// Observe may see part of its usage.
func (c usageCollector) Collect(ch chan<- prometheus.Metric) {
	for i := range c.m.byPair {
		s := c.m.byPair[i].Load()
		if s == nil {
			continue
		}
		proto, family := protocols[i/len(families)], families[i%len(families)]
		input, read, written, output := s.input.Load(), s.read.Load(), s.written.Load(), s.output.Load()
		for k, v := range [...]uint64{input, read, written, output} {
			ch <- prometheus.MustNewConstMetric(usageDesc, prometheus.CounterValue, float64(v), proto, family, usageKinds[k])
		}
		if prompt := input + read + written; prompt > 0 {
			ch <- prometheus.MustNewConstMetric(ratioDesc, prometheus.GaugeValue, float64(read)/float64(prompt), proto, family)
		}
	}
}

// SetBreakers makes the breaker metrics of dependency (one of
// Dependencies; others are ignored) read f at every scrape: the state of
// each of its breakers (the summarizer has one per upstream and model).
// f must be safe for concurrent use and quick.
func (m *Metrics) SetBreakers(dependency string, f func() []breaker.Status) {
	if i := slices.Index(Dependencies[:], dependency); i >= 0 {
		m.breakers[i].Store(&f)
	}
}

// breakerCollector exposes the circuit breakers' states.
type breakerCollector struct{ m *Metrics }

var (
	breakersDesc = prometheus.NewDesc(namespace+"_breakers",
		"Circuit breakers of a dependency (the summarizer: one per upstream and model) in each state: closed (calls are made), open (calls fail at once), probing (one call checks whether it is back).",
		[]string{"dependency", "state"}, nil)
	tripsDesc = prometheus.NewDesc(namespace+"_breaker_trips_total",
		"Times a dependency's circuit breakers opened after a failure or a timeout.",
		[]string{"dependency"}, nil)
	refusedDesc = prometheus.NewDesc(namespace+"_breaker_refused_total",
		"Calls to a dependency its open circuit breakers refused at once (for the summarizer: summaries that went extractive without a call).",
		[]string{"dependency"}, nil)
)

// Describe implements prometheus.Collector.
func (breakerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- breakersDesc
	ch <- tripsDesc
	ch <- refusedDesc
}

// Collect implements prometheus.Collector.
func (c breakerCollector) Collect(ch chan<- prometheus.Metric) {
	for i, dep := range Dependencies {
		var states [len(breaker.States)]int
		var trips, refused uint64
		if f := c.m.breakers[i].Load(); f != nil {
			for _, st := range (*f)() {
				if int(st.State) < len(states) {
					states[st.State]++
				}
				trips += st.Trips
				refused += st.Refused
			}
		}
		for _, s := range breaker.States {
			ch <- prometheus.MustNewConstMetric(breakersDesc, prometheus.GaugeValue, float64(states[s]), dep, s.String())
		}
		ch <- prometheus.MustNewConstMetric(tripsDesc, prometheus.CounterValue, float64(trips), dep)
		ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(refused), dep)
	}
}

// addInt adds n to c when it is positive (a counter never goes down).
func addInt(c prometheus.Counter, n int64) {
	if n > 0 {
		c.Add(float64(n))
	}
}

// index returns the index of v in list, which ends with "other", or of
// "other" when v is not in it.
func index(list []string, v string) int {
	if i := slices.Index(list, v); i >= 0 {
		return i
	}
	return len(list) - 1
}

// familyIndex returns the index in families of a record's Family.
func familyIndex(f string) int {
	if f == "" {
		return slices.Index(families[:], unknown)
	}
	return index(families[:len(families)-1], f)
}

// statusClass returns the index in statusClasses of status, or -1 for a
// status outside them (1xx, or over 599).
func statusClass(status int) int {
	switch {
	case status == 0:
		return len(statusClasses) - 1
	case status >= 200 && status < 600:
		return status/100 - 2
	}
	return -1
}
