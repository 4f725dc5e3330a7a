package summarize

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/protocol"
)

var protos = []protocol.Protocol{anthropic.Protocol, responses.Protocol, chat.Protocol}

const secret = "sk-ant-secret-key-0123456789"

// answers are each API's exact non-streamed answer shape.
var answers = map[string]string{
	"/v1/messages":         `{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[{"type":"text","text":"THE SUMMARY"}],"stop_reason":"end_turn","usage":{"input_tokens":100,"cache_read_input_tokens":5,"output_tokens":20}}`,
	"/v1/responses":        `{"id":"resp_1","object":"response","status":"completed","output":[{"type":"reasoning","summary":[]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"THE SUMMARY"}]}],"usage":{"input_tokens":105,"input_tokens_details":{"cached_tokens":5},"output_tokens":20}}`,
	"/v1/chat/completions": `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"THE SUMMARY"},"finish_reason":"stop"}],"usage":{"prompt_tokens":105,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":5}}}`,
}

type seen struct {
	path   string
	header http.Header
	body   map[string]any
}

// fakeAPI answers every call with handler's status and body, recording
// what it got.
func fakeAPI(t *testing.T, handler func(n int, path string) (int, string)) (*httptest.Server, func() []seen) {
	var mu sync.Mutex
	var got []seen
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mu.Lock()
		got = append(got, seen{r.URL.Path, r.Header.Clone(), m})
		n := len(got)
		mu.Unlock()
		status, body := handler(n, r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		if status == 429 {
			w.Header().Set("Retry-After", "7")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s, func() []seen { mu.Lock(); defer mu.Unlock(); return append([]seen(nil), got...) }
}

func ok(_ int, path string) (int, string) { return 200, answers[path] }

func newClient(t *testing.T, cfg compact.SummarizerConfig, url string, log *slog.Logger) *Client {
	t.Helper()
	c, err := New(cfg, protos, map[string]string{"anthropic": url, "openai": url}, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	var slept []time.Duration
	c.Sleep = func(ctx context.Context, d time.Duration) error { slept = append(slept, d); return ctx.Err() }
	return c
}

func job(proto, model string) *pass.Job {
	h := http.Header{"X-Api-Key": {secret}, "Authorization": {"Bearer " + secret}, "Anthropic-Beta": {"interleaved-thinking-2025-05-14"},
		"X-Claude-Code-Session-Id": {"s1"}, "Openai-Organization": {"org-1"}, "Cookie": {"c=1"}}
	return &pass.Job{Protocol: proto, Model: model, Header: h, System: "SYSTEM", Input: "INPUT", MaxTokens: 1234}
}

// TestSessionMode: a call in each protocol goes to the session's upstream
// with a small model, the job's texts and budget, and only the
// credentials it needs.
func TestSessionMode(t *testing.T) {
	for _, tc := range []struct {
		proto, model, path, wantModel string
		wantHeaders                   []string
		budgetKey                     string
	}{
		{"anthropic", "claude-opus-4-5", "/v1/messages", "claude-haiku-4-5", []string{"X-Api-Key", "Authorization", "Anthropic-Version"}, "max_tokens"},
		{"responses", "gpt-5.1-codex", "/v1/responses", "gpt-5-mini", []string{"Authorization", "Openai-Organization"}, "max_output_tokens"},
		{"chat", "gpt-5", "/v1/chat/completions", "gpt-5-mini", []string{"Authorization", "Openai-Organization"}, "max_completion_tokens"},
	} {
		t.Run(tc.proto, func(t *testing.T) {
			s, got := fakeAPI(t, ok)
			c := newClient(t, compact.DefaultSummarizer(), s.URL, nil)
			sum, err := c.Summarize(context.Background(), job(tc.proto, tc.model))
			if err != nil {
				t.Fatal(err)
			}
			if sum.Text != "THE SUMMARY" || sum.Model != tc.wantModel || sum.InputTokens != 105 || sum.OutputTokens != 20 {
				t.Errorf("summary %+v", sum)
			}
			r := got()[0]
			if r.path != tc.path || r.body["model"] != tc.wantModel || r.body[tc.budgetKey] != float64(1234) {
				t.Errorf("request %s %v", r.path, r.body)
			}
			if !strings.Contains(string(mustJSON(r.body)), "INPUT") || !strings.Contains(string(mustJSON(r.body)), "SYSTEM") {
				t.Errorf("the texts are missing: %v", r.body)
			}
			for _, k := range []string{"Anthropic-Beta", "X-Claude-Code-Session-Id", "Cookie"} {
				if r.header.Get(k) != "" {
					t.Errorf("%s forwarded", k)
				}
			}
			for _, k := range tc.wantHeaders {
				if r.header.Get(k) == "" {
					t.Errorf("%s missing", k)
				}
			}
		})
	}
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// TestEndpointMode: a configured endpoint is called in its protocol with
// the configured key, in the header that protocol takes it in, and with
// nothing of the session's own headers.
func TestEndpointMode(t *testing.T) {
	t.Setenv("CTXGUARD_TEST_KEY", secret)
	for _, tc := range []struct {
		proto, path string
		header      http.Header // what the call carries besides Content-Type
	}{
		{"chat", "/v1/chat/completions", http.Header{"Authorization": {"Bearer " + secret}}},
		{"responses", "/v1/responses", http.Header{"Authorization": {"Bearer " + secret}}},
		{"anthropic", "/v1/messages", http.Header{"X-Api-Key": {secret}, "Anthropic-Version": {anthropic.Version}}},
	} {
		s, got := fakeAPI(t, ok)
		cfg := compact.DefaultSummarizer()
		cfg.Mode, cfg.Endpoint, cfg.Protocol, cfg.Model, cfg.APIKeyEnv = "endpoint", s.URL, tc.proto, "small-model", "CTXGUARD_TEST_KEY"
		c := newClient(t, cfg, "http://unused.invalid", nil)
		if _, err := c.Summarize(context.Background(), job("anthropic", "claude-opus-4-5")); err != nil {
			t.Fatalf("%s: %v", tc.proto, err)
		}
		r := got()[0]
		h := r.header.Clone()
		for _, k := range []string{"Content-Type", "Content-Length", "Accept-Encoding", "User-Agent"} {
			h.Del(k)
		}
		if r.path != tc.path || r.body["model"] != "small-model" {
			t.Errorf("%s: request %s %v, want %s", tc.proto, r.path, r.body["model"], tc.path)
		}
		if d := cmp.Diff(tc.header, h); d != "" {
			t.Errorf("%s: headers (-want +got):\n%s", tc.proto, d)
		}
	}
	cfg := compact.DefaultSummarizer()
	cfg.Mode, cfg.Endpoint, cfg.Protocol, cfg.Model, cfg.APIKeyEnv = "endpoint", "http://unused.invalid", "chat", "small-model", "CTXGUARD_TEST_UNSET"
	if _, err := New(cfg, protos, nil, nil, nil); err == nil || !strings.Contains(err.Error(), "CTXGUARD_TEST_UNSET") {
		t.Errorf("an unset key variable: %v", err)
	}
}

// TestRetries: 429 and 5xx are retried (Retry-After honoured, capped),
// up to Retries; a 400 is not; garbage is an error; the key appears in no
// error and no log line.
func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers []int // status per attempt
		body    string
		calls   int
		ok      bool
	}{
		{"529 then ok", []int{529, 200}, "", 2, true},
		{"429 then 500 then ok", []int{429, 500, 200}, "", 3, true},
		{"gives up after retries", []int{500, 500, 500, 500}, "", 3, false},
		{"400 is final", []int{400, 200}, "", 1, false},
		{"garbage", []int{200}, `{"type":"message","content":[]}`, 1, false},
		{"not JSON", []int{200}, `<html>`, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, got := fakeAPI(t, func(n int, path string) (int, string) {
				st := tc.answers[min(n, len(tc.answers))-1]
				if st != 200 {
					return st, `{"type":"error","error":{"type":"x","message":"echo ` + secret + `"}}`
				}
				if tc.body != "" {
					return 200, tc.body
				}
				return 200, answers[path]
			})
			var logs bytes.Buffer
			c := newClient(t, compact.DefaultSummarizer(), s.URL, slog.New(slog.NewTextHandler(&logs, nil)))
			_, err := c.Summarize(context.Background(), job("anthropic", "claude-sonnet-4-5"))
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v", err)
			}
			if n := len(got()); n != tc.calls {
				t.Errorf("%d calls, want %d", n, tc.calls)
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("the error names the key: %v", err)
			}
			if strings.Contains(logs.String(), secret) {
				t.Error("a log line holds the key")
			}
		})
	}
}

// TestConcurrencyAndCancel: never more calls at once than Concurrency;
// a caller waiting for a slot gives up with its context.
func TestConcurrencyAndCancel(t *testing.T) {
	release := make(chan struct{})
	var now, peak atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := now.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		now.Add(-1)
		_, _ = io.WriteString(w, answers[r.URL.Path])
	}))
	defer s.Close()
	cfg := compact.DefaultSummarizer()
	cfg.Concurrency = 2
	c := newClient(t, cfg, s.URL, nil)
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = c.Summarize(context.Background(), job("anthropic", "m")) }()
	}
	// A sixth caller with a cancelled context waits for a slot and gives up.
	for now.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Summarize(ctx, job("anthropic", "m")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller: %v", err)
	}
	close(release)
	wg.Wait()
	if p := peak.Load(); p > 2 {
		t.Errorf("%d calls at once, Concurrency 2", p)
	}
}

// TestTimeout: an upstream that never answers fails the attempt within
// Timeout (as a deadline error), which is not retried: it would wait as
// long again.
func TestTimeout(t *testing.T) {
	block := make(chan struct{})
	var calls atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1); <-block }))
	defer s.Close()
	defer close(block)
	cfg := compact.DefaultSummarizer()
	cfg.Timeout, cfg.Retries = 50*time.Millisecond, 1
	c := newClient(t, cfg, s.URL, nil)
	_, err := c.Summarize(context.Background(), job("anthropic", "m"))
	if err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("err = %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

func TestNone(t *testing.T) {
	cfg := compact.DefaultSummarizer()
	cfg.Mode = "none"
	c, err := New(cfg, protos, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Summarize(context.Background(), job("anthropic", "m")); !errors.Is(err, ErrNone) {
		t.Fatalf("err = %v", err)
	}
}

func FuzzCallAnswer(f *testing.F) {
	for _, a := range answers {
		f.Add([]byte(a))
	}
	f.Add([]byte(`{"type":"message","content":[{"type":"text","text":""}],"stop_reason":"refusal"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, p := range protos {
			text, u, err := p.(protocol.Caller).CallAnswer(b)
			if err == nil && strings.TrimSpace(text) == "" {
				t.Fatalf("%s: no error and no text", p.Name())
			}
			_ = u
		}
	})
}
