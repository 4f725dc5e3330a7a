package ctxguard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	pmodel "github.com/prometheus/common/model"

	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/guardtest"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
)

// syncBuffer is a bytes.Buffer safe for a logger and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestRecords runs a generated session (with edit events) through the
// proxy, plus a bypassed, an invalid and an oversized request, and checks
// that every exchange is recorded once with what the client saw, and that
// the statistics, the session statistics, the JSON log and the Prometheus
// metrics all agree with the records.
func TestRecords(t *testing.T) {
	const key = "sk-ant-api03-RECORDSKEY"
	up := anthropictest.NewServer(anthropictest.Options{})
	t.Cleanup(up.Close)
	cfg := blobConfig()
	cfg.Upstreams = config.AllUpstreams(up.URL)
	cfg.MaxBody = 8 << 20
	var logs syncBuffer
	g := newGuard(t, cfg, WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	var rec guardtest.Recorder
	g.Records().Subscribe(&rec)
	h, err := g.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	type seen struct {
		status                int
		before, after, events string
		errID                 string
	}
	var client []seen
	send := func(body []byte, hdr map[string]string) {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/messages?beta=true", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", key)
		req.Header.Set("User-Agent", "claude-cli/2.1.197 (external, cli)")
		req.Header.Set("X-Claude-Code-Session-Id", "records-session")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		s := seen{status: res.StatusCode, before: res.Header.Get("X-Ctxguard-Tokens-Before"), after: res.Header.Get("X-Ctxguard-Tokens-After"),
			events: res.Header.Get("X-Ctxguard-Edit-Event"), errID: res.Header.Get("X-Ctxguard-Error-Id")}
		if res.StatusCode != 200 {
			var e struct {
				RequestID string `json:"request_id"`
			}
			json.Unmarshal(b, &e)
			s.errID = e.RequestID
		}
		client = append(client, s)
	}
	session := blobSession(t, 3)
	for _, b := range session {
		send(b, nil)
	}
	send(session[0], map[string]string{BypassHeader: "1"})
	send([]byte(`{"model":"claude-sonnet-4-5","messages":[`), nil)
	send(bytes.Repeat([]byte(" "), 9<<20), nil)

	// Records are published once the client has the whole answer.
	var recs []*record.Exchange
	for i := 0; i < 500; i++ {
		if recs = rec.All(); len(recs) >= len(client) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(recs) != len(client) {
		t.Fatalf("%d records for %d exchanges", len(recs), len(client))
	}
	outcomes := map[record.Outcome]int64{}
	var events, before, after int64
	inSession := 0
	for i, x := range recs {
		c := client[i]
		outcomes[x.Outcome]++
		if x.Session != "" {
			inSession++
		}
		if x.Event {
			events++
		}
		before += int64(x.TokensBefore)
		after += int64(x.TokensAfter)
		if x.Seq != uint64(i+1) || x.Status != c.status || x.Protocol != "anthropic" || x.Path != "/v1/messages" || x.Client != "claude-code" {
			t.Errorf("record %d: seq %d status %d (client %d) protocol %q path %q client %q", i, x.Seq, x.Status, c.status, x.Protocol, x.Path, x.Client)
		}
		if x.Total <= 0 || x.FirstByte > x.Total || x.Read > x.Total {
			t.Errorf("record %d: durations read %v first byte %v total %v", i, x.Read, x.FirstByte, x.Total)
		}
		if i < len(session) {
			if strconv.Itoa(x.TokensBefore) != c.before || strconv.Itoa(x.TokensAfter) != c.after || (c.events == "1") != x.Event {
				t.Errorf("record %d: tokens %d→%d event %v; the client saw %s→%s event %s", i, x.TokensBefore, x.TokensAfter, x.Event, c.before, c.after, c.events)
			}
			if x.Usage == nil || x.CalibratedAfter != x.Usage.PromptTokens() || x.Session != recs[0].Session || x.Session == "" || x.ModelID == "" || x.Window == 0 {
				t.Errorf("record %d: usage %+v calibrated %d session %q model %q window %d", i, x.Usage, x.CalibratedAfter, x.Session, x.ModelID, x.Window)
			}
			if x.Outcome != record.Rewritten && x.Outcome != record.Unchanged {
				t.Errorf("record %d: outcome %s", i, x.Outcome)
			}
			if x.BytesIn != int64(len(session[i])) || (x.Outcome == record.Rewritten) == (x.BytesOut == x.BytesIn) {
				t.Errorf("record %d: bytes in %d (sent %d) out %d, outcome %s", i, x.BytesIn, len(session[i]), x.BytesOut, x.Outcome)
			}
		}
		// Every stub names a blob the local endpoint serves, of the size
		// the record gives.
		if x.Event {
			for _, s := range x.Stubs {
				if s.Bytes == 0 {
					continue
				}
				res, err := http.Get(srv.URL + "/ctxguard/v1/blobs/" + s.Blob)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 200 || len(b) == 0 || s.Sent == 0 || s.Text() == "" || !strings.Contains(s.Text(), s.Blob) {
					t.Errorf("record %d: stub %+v: blob status %d, %d bytes", i, s, res.StatusCode, len(b))
				}
			}
		}
	}
	n := len(session)
	if events == 0 || outcomes[record.Rewritten] == 0 {
		t.Fatalf("the session made %d events, %d rewrites: the test checks too little", events, outcomes[record.Rewritten])
	}
	if x := recs[n]; x.Outcome != record.Bypassed || x.Skipped != "bypass" {
		t.Errorf("bypassed request: %s %q", x.Outcome, x.Skipped)
	}
	if x := recs[n+1]; x.Outcome != record.Bypassed || x.Skipped != "invalid json" {
		t.Errorf("invalid request: %s %q", x.Outcome, x.Skipped)
	}
	if x := recs[n+2]; x.Outcome != record.Refused || x.Status != 413 || x.ErrorID == "" || x.ErrorID != client[n+2].errID {
		t.Errorf("oversized request: %s status %d error id %q (client saw %q)", x.Outcome, x.Status, x.ErrorID, client[n+2].errID)
	}

	// The statistics are the records' counts.
	st := g.Stats()
	got := map[string]int64{"requests": st.Requests.Load(), "rewritten": st.Rewritten.Load(), "unchanged": st.Unchanged.Load(),
		"bypassed": st.Bypassed.Load(), "refused": st.Refused.Load(), "failed_open": st.Failed.Load(), "events": st.Events.Load()}
	want := map[string]int64{"requests": int64(len(recs)), "rewritten": outcomes[record.Rewritten], "unchanged": outcomes[record.Unchanged],
		"bypassed": outcomes[record.Bypassed], "refused": outcomes[record.Refused], "failed_open": 0, "events": events}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Stats (-records +stats):\n%s", d)
	}
	var stats map[string]int64
	getJSON(t, srv.URL+"/ctxguard/v1/stats", &stats)
	for k, v := range want {
		if stats[k] != v {
			t.Errorf("/ctxguard/v1/stats %s = %d, records say %d", k, stats[k], v)
		}
	}
	var sess []SessionStats
	getJSON(t, srv.URL+"/ctxguard/v1/sessions", &sess)
	if inSession != len(recs)-1 {
		t.Errorf("%d of %d records name the session; want all but the refused one", inSession, len(recs))
	}
	if len(sess) != 1 || sess[0].Requests != inSession || sess[0].Events != int(events) || sess[0].TokensBefore != before || sess[0].TokensAfter != after {
		t.Errorf("sessions %+v; records: %d requests, %d events, %d→%d tokens", sess, inSession, events, before, after)
	}

	// The metrics count the same.
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(pmodel.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	sum := func(name string, labels map[string]string) int64 {
		var v float64
		f := fams[name]
		if f == nil {
			t.Fatalf("no metric %s", name)
		}
	metric:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue metric
				}
			}
			if c := m.GetCounter(); c != nil {
				v += c.GetValue()
			}
		}
		return int64(v)
	}
	for _, o := range record.Outcomes {
		if got := sum("ctxguard_requests_total", map[string]string{"outcome": string(o)}); got != outcomes[o] {
			t.Errorf("ctxguard_requests_total{outcome=%q} = %d, records say %d", o, got, outcomes[o])
		}
	}
	if got := sum("ctxguard_edit_events_total", nil); got != events {
		t.Errorf("ctxguard_edit_events_total = %d, records say %d", got, events)
	}
	if b, a := sum("ctxguard_prompt_tokens_total", map[string]string{"stage": "before"}), sum("ctxguard_prompt_tokens_total", map[string]string{"stage": "after"}); b != before || a != after {
		t.Errorf("ctxguard_prompt_tokens_total before %d after %d; records say %d, %d", b, a, before, after)
	}

	// One JSON log line per exchange, from the record, with the error ID
	// the client saw; never the key.
	lines := 0
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line is not JSON: %s", sc.Text())
		}
		if l["msg"] != "exchange" {
			continue
		}
		seq := int(l["seq"].(float64))
		x := recs[seq-1]
		lines++
		if l["outcome"] != string(x.Outcome) || int(l["tokens_after"].(float64)) != x.TokensAfter || (x.ErrorID != "" && l["error_id"] != x.ErrorID) {
			t.Errorf("log line %s does not match record %+v", sc.Text(), x)
		}
		if _, ok := l["pass_decisions"]; !ok {
			t.Errorf("debug log line lacks the pass decisions: %s", sc.Text())
		}
	}
	if lines != len(recs) {
		t.Errorf("%d exchange log lines for %d records", lines, len(recs))
	}
	if strings.Contains(logs.String(), "RECORDSKEY") {
		t.Error("the log holds the API key")
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

// TestMiddlewareRecords: in process (Transport, Middleware), an exchange
// is recorded once its answer's body ends, with the usage read from it.
func TestMiddlewareRecords(t *testing.T) {
	up := anthropictest.NewServer(anthropictest.Options{})
	t.Cleanup(up.Close)
	g := newGuard(t, config.Defaults())
	var rec guardtest.Recorder
	g.Records().Subscribe(&rec)
	client := &http.Client{Transport: g.Transport(nil)}
	b := guardtest.BigResult()
	for _, stream := range []bool{false, true} {
		body := b
		if stream {
			body = bytes.Replace(b, []byte(`{"model"`), []byte(`{"stream":true,"model"`), 1)
		}
		req, _ := http.NewRequest("POST", up.URL+"/v1/messages", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", "sk-ant-test")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(rec.All()); n != 0 && !stream || n != 1 && stream {
			t.Fatalf("stream %v: %d records before the body was read", stream, n)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		recs := rec.All()
		x := recs[len(recs)-1]
		if len(recs) != map[bool]int{false: 1, true: 2}[stream] || x.Status != 200 || x.Usage == nil || x.Usage.Output == 0 ||
			x.Outcome != record.Rewritten || x.BytesResp != int64(len(got)) || x.BytesIn != int64(len(body)) || x.BytesOut >= x.BytesIn {
			t.Errorf("stream %v: %d records, last %+v (answer %d bytes)", stream, len(recs), x, len(got))
		}
	}
}

// brokenStore is a store that does not answer (a shared store that is
// down).
type brokenStore struct{ *store.Memory }

func (brokenStore) Get(context.Context, string) ([]byte, error) {
	return nil, errors.New("connection refused")
}

func (brokenStore) Ping(context.Context) error { return errors.New("connection refused") }

// TestProbes: /healthz answers while the process serves, /readyz when the
// store answers; both without the auth token and from any client, and
// neither is forwarded upstream.
func TestProbes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		st    store.Store
		ready int
	}{
		{"dir store", nil, 200},
		{"store down", brokenStore{store.NewMemory()}, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := anthropictest.NewServer(anthropictest.Options{})
			t.Cleanup(up.Close)
			cfg := config.Defaults()
			cfg.Upstreams = config.AllUpstreams(up.URL)
			cfg.AuthToken = "a-token-of-enough-length"
			var opts []Option
			if tc.st != nil {
				opts = append(opts, WithStore(tc.st))
			}
			g := newGuard(t, cfg, opts...)
			h, err := g.Handler()
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			for path, want := range map[string]int{"/healthz": 200, "/readyz": tc.ready, "/ctxguard/v1/stats": 401} {
				res, err := http.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != want {
					t.Errorf("GET %s: %d %s, want %d", path, res.StatusCode, b, want)
				}
				if pid := res.Header.Get("X-Ctxguard-Pid"); path == "/healthz" && pid != strconv.Itoa(os.Getpid()) {
					t.Errorf("GET /healthz: X-Ctxguard-Pid %q, want this process's id %d", pid, os.Getpid())
				}
				if res.StatusCode == 503 && (!strings.Contains(string(b), "store does not answer") || strings.Contains(string(b), "connection refused")) {
					t.Errorf("GET %s: %s: want the safe message, not the detail", path, b)
				}
			}
			if n := len(up.Requests()); n != 0 {
				t.Errorf("the upstream got %d requests", n)
			}
		})
	}
}
