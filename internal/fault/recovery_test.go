package fault

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/ctxguard/ctxguard/tokens"
)

// overflowUpstream makes requests carrying "X-Fault: cue" answer like an
// API whose window is limit tokens (ctxguard's estimate of the body it
// receives): over it, a 400 "prompt is too long" naming the body's
// estimate, written as it is and kept (errors); within it, the scripted
// API's answer. It records the estimate of every body (sizes).
type overflowUpstream struct {
	mu     sync.Mutex
	sizes  []int
	errors [][]byte
}

func (o *overflowUpstream) install(up *upstream, cue string, limit int) {
	up.on(cue, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		n := tokens.Estimate(b)
		o.mu.Lock()
		o.sizes = append(o.sizes, n)
		o.mu.Unlock()
		if n <= limit {
			r.Body = io.NopCloser(bytes.NewReader(b))
			up.api.ServeHTTP(w, r)
			return
		}
		// The API's count is twice ctxguard's, the window half of it.
		e := fmt.Appendf(nil, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: %d tokens > %d maximum"}}`, 2*n, max(limit, n/2))
		o.mu.Lock()
		o.errors = append(o.errors, e)
		o.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_overflow_"+strconv.Itoa(n))
		w.WriteHeader(http.StatusBadRequest)
		w.Write(e)
	})
}

func (o *overflowUpstream) seen() ([]int, [][]byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]int(nil), o.sizes...), append([][]byte(nil), o.errors...)
}

// largestBody returns the largest request body of the shared Claude Code
// session sessionStream replays: a long history to compact.
func largestBody(t *testing.T) []byte {
	var big []byte
	for _, b := range sessionStream(t) {
		if len(b) > len(big) {
			big = b
		}
	}
	return big
}

// TestFailedRecoveryTellsTheTruth: when the compacted retry of a request
// the upstream found too long is refused as too long too, the client gets
// the retry's error byte for byte, without X-Ctxguard-Recovered, with
// X-Ctxguard-Tokens-After naming the retry's size, and the exchange is
// recorded as a failed recovery with its reason: in the log, the
// statistics, the metrics and the dashboard. A retry that fits is a
// recovery, and its Tokens-After is the retry's too, not the first
// attempt's.
func TestFailedRecoveryTellsTheTruth(t *testing.T) {
	body := largestBody(t)
	up := newUpstream(t)
	never, fits := &overflowUpstream{}, &overflowUpstream{}
	never.install(up, "never-fits", 0)
	in := start(t, serveOpts{upstream: up.URL, config: "compact: {summarizer: {mode: none}}\n"})

	res, got := post(t, client(), in.URL, http.Header{"X-Fault": {"never-fits"}, "X-Claude-Code-Session-Id": {"fault-recovery-failed"}}, body)
	sizes, errs := never.seen()
	if len(sizes) != 2 || sizes[1] >= sizes[0] {
		t.Fatalf("the upstream got bodies of %v tokens: want the request and one smaller retry", sizes)
	}
	if res.StatusCode != http.StatusBadRequest || !bytes.Equal(got, errs[1]) {
		t.Errorf("client got %d %q, want the retry's 400 %q byte for byte", res.StatusCode, got, errs[1])
	}
	if h := res.Header.Get("Request-Id"); h != "req_overflow_"+strconv.Itoa(sizes[1]) {
		t.Errorf("Request-Id %q: not the retry's answer", h)
	}
	if h := res.Header.Get("X-Ctxguard-Recovered"); h != "" {
		t.Errorf("X-Ctxguard-Recovered: %q on a recovery that failed", h)
	}
	if h := res.Header.Get("X-Ctxguard-Tokens-After"); h != strconv.Itoa(sizes[1]) {
		t.Errorf("X-Ctxguard-Tokens-After: %s, want the retry's %d (the first attempt had %d)", h, sizes[1], sizes[0])
	}
	if !in.waitLog("outcome=recovery_failed") || !regexp.MustCompile(`level=WARN msg=exchange .*outcome=recovery_failed reason="the compacted retry was too long too: \d+ tokens, limit \d+"`).MatchString(in.Log()) {
		t.Errorf("the log has no warning of a failed recovery with its reason:\n%s", in.Tail())
	}

	var stats map[string]int
	if _, b := get(t, in.URL+"/ctxguard/v1/stats", "", nil); json.Unmarshal(b, &stats) != nil || stats["recovery_failed"] != 1 || stats["recovered"] != 0 {
		t.Errorf("stats: %s", b)
	}
	if _, b := get(t, in.URL+"/metrics", "", nil); !bytes.Contains(b, []byte(`ctxguard_requests_total{family="anthropic",outcome="recovery_failed",protocol="anthropic"} 1`)) ||
		!bytes.Contains(b, []byte(`ctxguard_failures_total{kind="recovery_failed",protocol="anthropic"} 1`)) ||
		!bytes.Contains(b, []byte(`ctxguard_requests_total{family="anthropic",outcome="recovered",protocol="anthropic"} 0`)) {
		t.Errorf("metrics do not count a failed recovery:\n%s", grepLines(b, "ctxguard_requests_total", "ctxguard_failures_total"))
	}
	var detail struct {
		Outcome string `json:"outcome"`
		Reason  string `json:"reason"`
		Status  int    `json:"status"`
		After   int    `json:"tokens_after"`
	}
	if _, b := get(t, in.URL+"/ctxguard/api/request/1", "", nil); json.Unmarshal(b, &detail) != nil ||
		detail.Outcome != "recovery_failed" || detail.Reason == "" || detail.Status != 400 || detail.After != sizes[1] {
		t.Errorf("dashboard's request page: %s", b)
	}

	// An upstream that takes the retry: a recovery, described as sent. (A
	// new instance: the first learned the model's limit, and compacts
	// before sending.)
	first := sizes[0]
	fits.install(up, "retry-fits", first*3/4)
	in = start(t, serveOpts{upstream: up.URL, config: "compact: {summarizer: {mode: none}}\n"})
	res, got = post(t, client(), in.URL, http.Header{"X-Fault": {"retry-fits"}, "X-Claude-Code-Session-Id": {"fault-recovered"}}, body)
	sizes, _ = fits.seen()
	if res.StatusCode != http.StatusOK || res.Header.Get("X-Ctxguard-Recovered") != "1" || len(sizes) != 2 {
		t.Fatalf("client got %d (recovered %q) after %v: %.300s", res.StatusCode, res.Header.Get("X-Ctxguard-Recovered"), sizes, got)
	}
	if h := res.Header.Get("X-Ctxguard-Tokens-After"); h != strconv.Itoa(sizes[1]) {
		t.Errorf("X-Ctxguard-Tokens-After: %s, want the retry's %d (the first attempt had %d)", h, sizes[1], sizes[0])
	}
	if _, b := get(t, in.URL+"/ctxguard/v1/stats", "", nil); json.Unmarshal(b, &stats) != nil || stats["recovery_failed"] != 0 || stats["recovered"] != 1 {
		t.Errorf("stats: %s", b)
	}
}

// grepLines returns the lines of b that start with one of prefixes.
func grepLines(b []byte, prefixes ...string) string {
	var out bytes.Buffer
	for line := range bytes.Lines(b) {
		for _, p := range prefixes {
			if bytes.HasPrefix(line, []byte(p)) {
				out.Write(line)
				break
			}
		}
	}
	return out.String()
}
