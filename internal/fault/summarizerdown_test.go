package fault

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/tools/sessiongen"
)

// downConfig gives every model the generated sessions use a 40K window,
// so that they are compacted every few dozen requests, and bounds a
// request's wait for a summary (compact.wait) at 6 s: a request that
// waited for the summarizer takes that long.
const downConfig = `
models:
  default: {window: 40000, max_output: 4000}
  overrides:
    claude-opus-4-5: {window: 40000, max_output: 4000}
    claude-sonnet-4-5: {window: 40000, max_output: 4000}
    claude-opus-4-8: {window: 40000, max_output: 4000}
    claude-haiku-4-5: {window: 40000, max_output: 4000}
compact:
  wait: 6s
`

// downWait is compact.wait in downConfig.
const downWait = 6 * time.Second

// TestSummarizerDown: ctxguard's own summarizer (session mode: the
// session's upstream, a small model) fails — its calls get 500, hang, or
// answer slower than summarizer.timeout — while the sessions' own
// requests are answered. (Before: every new span asked the failing model
// again, 16 calls in 30 requests, and while two hung calls held both
// slots every later compaction of every session waited the full
// compact.wait.) Now, once the first call failed, no request of that
// session or of an unrelated one calls the summarizer again, none waits
// for it (none takes compact.wait), and the compactions that follow carry
// the extractive summary; the metrics and the dashboard's configuration
// page show the breaker open.
func TestSummarizerDown(t *testing.T) {
	sessions := downSessions(t, 2)
	for _, mode := range []string{"500", "hung", "slow"} {
		t.Run(mode, func(t *testing.T) {
			api := anthropictest.New(anthropictest.Options{})
			sum := &summarizerAPI{api: api, mode: mode}
			up := httptest.NewServer(sum)
			t.Cleanup(up.Close)
			messages := func() int { return len(api.MessagesRequests()) }
			config := downConfig
			if mode == "slow" {
				config += "  summarizer: {timeout: 1s}\n"
			}
			in := start(t, serveOpts{upstream: up.URL, config: config})
			c := client()

			send := func(session int, body []byte) time.Duration {
				t.Helper()
				h := http.Header{"X-Claude-Code-Session-Id": {fmt.Sprint("down-", session)}}
				began := time.Now()
				res, b := post(t, c, in.URL, h, body)
				if res.StatusCode != http.StatusOK {
					t.Fatalf("session %d: status %d: %s", session, res.StatusCode, b)
				}
				return time.Since(began)
			}
			trips := func() float64 { return metric(t, in.URL, `ctxguard_breaker_trips_total{dependency="summarizer"}`) }

			// Session 0 until the first failure opens the breaker.
			first := -1
			for i, b := range sessions[0] {
				send(0, b)
				if trips() >= 1 {
					first = i
					break
				}
			}
			if first < 0 {
				t.Fatalf("the summarizer's breaker never opened; %d summarizer calls", sum.count())
			}
			calls, before := sum.count(), messages()
			t.Logf("the breaker opened at request %d of session 0, after %d summarizer calls", first, calls)

			// The rest of session 0, then all of session 1.
			var slowest time.Duration
			n := 0
			for s, bodies := range [][][]byte{sessions[0][first+1:], sessions[1]} {
				for _, b := range bodies {
					slowest = max(slowest, send(s, b))
					n++
				}
			}
			if got := sum.count(); got != calls {
				t.Errorf("%d summarizer calls after the breaker opened", got-calls)
			}
			if slowest >= downWait {
				t.Errorf("a request took %v after the breaker opened: it waited for the summarizer (compact.wait %v)", slowest, downWait)
			}
			// The compactions after the first failure: each first carrier
			// of a summary the upstream saw, all extractive.
			compactions, seen := 0, map[string]bool{}
			for _, r := range api.MessagesRequests()[before:] {
				s := summaryIn(r.Decoded)
				if s == "" || seen[s] {
					continue
				}
				seen[s] = true
				compactions++
				if strings.Contains(s, modelText) {
					t.Errorf("a model's summary from a failing model: %.200s", s)
				}
			}
			if compactions < 2 {
				t.Fatalf("%d compactions in the %d requests after the first failure; the test needs two or more", compactions, n)
			}
			t.Logf("%d requests after the breaker opened, %d compactions, the slowest %v", n, compactions, slowest)

			open := metric(t, in.URL, `ctxguard_breakers{dependency="summarizer",state="open"}`) +
				metric(t, in.URL, `ctxguard_breakers{dependency="summarizer",state="probing"}`)
			if open != 1 || metric(t, in.URL, `ctxguard_breaker_refused_total{dependency="summarizer"}`) < 1 {
				t.Errorf("metrics: %v breakers open or probing, want 1; refused %v", open,
					metric(t, in.URL, `ctxguard_breaker_refused_total{dependency="summarizer"}`))
			}
			var cfg struct {
				Breakers []struct {
					Upstream, Model, State, Error string
				} `json:"breakers"`
			}
			res, b := get(t, in.URL+"/ctxguard/api/config", "", nil)
			if err := json.Unmarshal(b, &cfg); err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("the configuration page's data: %d %v", res.StatusCode, err)
			}
			if len(cfg.Breakers) != 1 || cfg.Breakers[0].State == "closed" || cfg.Breakers[0].Model != anthropic.SmallModel ||
				cfg.Breakers[0].Upstream != up.URL || cfg.Breakers[0].Error == "" {
				t.Errorf("the configuration page's breakers: %+v", cfg.Breakers)
			}
		})
	}
}

// modelText is what the summarizer's model would answer, were it up.
const modelText = "MODEL SUMMARY"

// summarizerAPI is the fake model API for the sessions and their
// summarizer: the summarizer's calls (the small model, not streamed) fail
// as mode says; the rest goes to the scripted API.
type summarizerAPI struct {
	api  http.Handler
	mode string

	mu    sync.Mutex
	calls int
}

func (s *summarizerAPI) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *summarizerAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if !bytes.Contains(body, []byte(`"model":"`+anthropic.SmallModel+`"`)) || bytes.Contains(body, []byte(`"stream":true`)) {
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.api.ServeHTTP(w, r)
		return
	}
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	switch s.mode {
	case "500":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)
		return
	case "hung":
		<-r.Context().Done()
		return
	case "slow":
		select {
		case <-r.Context().Done():
			return
		case <-time.After(4 * time.Second):
		}
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"msg_sum","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":%q}],"stop_reason":"end_turn","usage":{"input_tokens":100,"output_tokens":20}}`,
		anthropic.SmallModel, modelText)
}

// summaryIn returns the compaction summary a request body carries, or "".
func summaryIn(body []byte) string {
	s := string(body)
	i := strings.Index(s, conversation.CompactionNote)
	if i < 0 {
		return ""
	}
	j := strings.Index(s[i:], "</summary>")
	if j < 0 {
		return s[i:]
	}
	return s[i : i+j]
}

// downSessions generates n Claude Code sessions, each long enough for
// several compactions at downConfig's window.
func downSessions(t *testing.T, n int) [][][]byte {
	t.Helper()
	var out [][][]byte
	for seed := range uint64(n) {
		gen, err := sessiongen.Generate(rand.New(rand.NewPCG(seed, 11)), sessiongen.Options{Turns: 200, MaxResult: 8_000, Protocol: anthropic.Protocol.Name()})
		if err != nil {
			t.Fatal(err)
		}
		bodies, err := gen.Bodies()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, bodies)
	}
	return out
}

// metric scrapes the instance's /metrics and returns the value of the
// series written exactly as series (name{labels}), or -1 when absent.
func metric(t *testing.T, url, series string) float64 {
	t.Helper()
	_, b := get(t, url+"/metrics", "", nil)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}
