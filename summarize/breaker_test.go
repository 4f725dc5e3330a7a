package summarize

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/internal/breaker"
	"github.com/ctxguard/ctxguard/openai/openaitest"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/store/storetest"
)

// breakerClient is a Client against url with an injected clock.
func breakerClient(t *testing.T, cfg compact.SummarizerConfig, url string) (*Client, *storetest.Clock) {
	t.Helper()
	c := newClient(t, cfg, url, nil)
	clk := storetest.NewClock(time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC))
	c.Now = clk.Now
	return c, clk
}

// onlyBreaker returns the state of c's one breaker.
func onlyBreaker(t *testing.T, c *Client) BreakerStatus {
	t.Helper()
	bs := c.Breakers()
	if len(bs) != 1 {
		t.Fatalf("%d breakers, want 1: %+v", len(bs), bs)
	}
	return bs[0]
}

// TestBreakerFailing: a model API that answers 500 (Anthropic Messages
// and OpenAI Chat Completions, over HTTP in their wire formats) is asked
// once, with its retries; after that failure every call fails at once
// with ErrBreakerOpen and reaches no server, for a back-off that doubles
// with each failed probe up to its cap; a probe that succeeds closes the
// breaker.
func TestBreakerFailing(t *testing.T) {
	var mu sync.Mutex
	status := 500
	answer := func() int { mu.Lock(); defer mu.Unlock(); return status }
	ant := anthropictest.NewServer(anthropictest.Options{Script: func(*anthropictest.Request) anthropictest.Turn {
		return anthropictest.Turn{Status: answer(), Blocks: []anthropictest.Block{anthropictest.Text("THE SUMMARY")}}
	}})
	defer ant.Close()
	oai := openaitest.New(openaitest.Options{Script: func(*openaitest.Request) openaitest.Turn {
		return openaitest.Turn{Status: answer(), Items: []openaitest.Item{openaitest.Text("THE SUMMARY")}}
	}})
	oai.Start()
	defer oai.Close()
	for _, tc := range []struct {
		proto, url string
		calls      func() int
	}{
		{"anthropic", ant.URL, func() int { return len(ant.MessagesRequests()) }},
		{"chat", oai.URL, func() int { return len(oai.Requests()) }},
	} {
		t.Run(tc.proto, func(t *testing.T) {
			mu.Lock()
			status = 500
			mu.Unlock()
			c, clk := breakerClient(t, compact.DefaultSummarizer(), tc.url)
			before := tc.calls()
			j := job(tc.proto, "m")
			if _, err := c.Summarize(context.Background(), j); err == nil || errors.Is(err, pass.ErrBreakerOpen) {
				t.Fatalf("first call: %v, want the upstream's failure", err)
			}
			if n := tc.calls() - before; n != 3 {
				t.Fatalf("%d requests for the first call, want 3 (Retries 2)", n)
			}
			var backoffs []time.Duration
			for range 7 {
				st := onlyBreaker(t, c)
				if st.State != breaker.Open {
					t.Fatalf("state %v after a failure", st.State)
				}
				d := st.Until.Sub(clk.Now())
				backoffs = append(backoffs, d)
				n := tc.calls()
				clk.Advance(d - time.Second)
				if _, err := c.Summarize(context.Background(), j); !errors.Is(err, pass.ErrBreakerOpen) {
					t.Fatalf("a call during the back-off: %v, want ErrBreakerOpen", err)
				}
				if tc.calls() != n {
					t.Fatal("a call during the back-off reached the server")
				}
				clk.Advance(time.Second)
				if _, err := c.Summarize(context.Background(), j); err == nil || errors.Is(err, pass.ErrBreakerOpen) {
					t.Fatalf("the probe: %v, want the upstream's failure", err)
				}
				if got := tc.calls() - n; got != 3 {
					t.Fatalf("the probe made %d requests, want 3", got)
				}
			}
			want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}
			for i := range want {
				if backoffs[i] != want[i] {
					t.Fatalf("back-offs %v, want %v", backoffs, want)
				}
			}
			mu.Lock()
			status = 200
			mu.Unlock()
			clk.Advance(onlyBreaker(t, c).Until.Sub(clk.Now()))
			sum, err := c.Summarize(context.Background(), j)
			if err != nil || sum.Text != "THE SUMMARY" {
				t.Fatalf("the probe that succeeds: %+v %v", sum, err)
			}
			st := onlyBreaker(t, c)
			if st.State != breaker.Closed || st.Fails != 0 || st.Trips != 1 || st.Refused != 7 {
				t.Errorf("after the probe's success: %+v", st)
			}
			if _, err := c.Summarize(context.Background(), j); err != nil {
				t.Errorf("a call after the breaker closed: %v", err)
			}
		})
	}
}

// TestBreakerHung: a model API that never answers. Two calls hang; when
// a request stops waiting for the first (Job.Overdue), the breaker
// opens: the second ends at once with ErrBreakerOpen, freeing its slot,
// new calls fail at once without reaching the server, and a call to
// another model gets the freed slot. The hung call goes on as the probe,
// and a late answer closes the breaker.
func TestBreakerHung(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	ant := anthropictest.New(anthropictest.Options{Script: func(r *anthropictest.Request) anthropictest.Turn {
		<-release
		return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("LATE SUMMARY")}}
	}})
	oai := openaitest.New(openaitest.Options{})
	mux := http.NewServeMux()
	mux.Handle("/v1/messages", ant)
	mux.Handle("/v1/chat/completions", oai)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer unblock() // before Close, which waits for the handlers
	cfg := compact.DefaultSummarizer()
	cfg.Concurrency = 2
	c, _ := breakerClient(t, cfg, srv.URL)

	type result struct {
		sum pass.Summary
		err error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	overdue := make(chan struct{})
	j1 := job("anthropic", "m")
	j1.Overdue = overdue
	go func() { s, err := c.Summarize(context.Background(), j1); first <- result{s, err} }()
	go func() { s, err := c.Summarize(context.Background(), job("anthropic", "m")); second <- result{s, err} }()
	for len(ant.MessagesRequests()) < 2 {
		time.Sleep(time.Millisecond) // both calls reach the server
	}
	close(overdue)
	r := <-second
	if !errors.Is(r.err, pass.ErrBreakerOpen) {
		t.Fatalf("the second hung call: %v, want ErrBreakerOpen once the first is overdue", r.err)
	}
	if st := onlyBreaker(t, c); st.State != breaker.Probing || st.Trips != 1 {
		t.Fatalf("after the overdue call: %+v", st)
	}
	if ok, _ := c.Allows(job("anthropic", "m"), false); ok {
		t.Error("Allows says a call would be made while the hung call probes")
	}
	n := len(ant.MessagesRequests())
	if _, err := c.Summarize(context.Background(), job("anthropic", "m")); !errors.Is(err, pass.ErrBreakerOpen) {
		t.Fatalf("a new call while the hung one runs: %v", err)
	}
	if len(ant.MessagesRequests()) != n {
		t.Fatal("a new call reached the server while the hung one runs")
	}
	// The hung call holds one slot of two: another model's call gets the
	// other at once.
	s, err := c.Summarize(context.Background(), job("chat", "gpt-5"))
	if err != nil || s.Text == "" {
		t.Fatalf("another model's call beside the hung one: %+v %v", s, err)
	}
	unblock()
	r = <-first
	if r.err != nil || r.sum.Text != "LATE SUMMARY" {
		t.Fatalf("the hung call's late answer: %+v %v", r.sum, r.err)
	}
	for _, st := range c.Breakers() {
		if st.State != breaker.Closed {
			t.Errorf("%s %s: %v after the late answer", st.Upstream, st.Model, st.State)
		}
	}
}

// TestBreakerSlow: a model API slower than Timeout (OpenAI Responses)
// times out once, is not retried, and opens the breaker: the next call
// fails at once without reaching the server.
func TestBreakerSlow(t *testing.T) {
	release := make(chan struct{})
	srv := openaitest.New(openaitest.Options{Script: func(*openaitest.Request) openaitest.Turn {
		<-release
		return openaitest.Turn{Items: []openaitest.Item{openaitest.Text("SLOW")}}
	}})
	srv.Start()
	defer srv.Close()
	defer close(release) // before Close, which waits for the handlers
	cfg := compact.DefaultSummarizer()
	cfg.Timeout = 50 * time.Millisecond
	c, _ := breakerClient(t, cfg, srv.URL)
	if _, err := c.Summarize(context.Background(), job("responses", "gpt-5")); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("the slow call: %v, want a timeout", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1: a timeout is not retried", n)
	}
	if _, err := c.Summarize(context.Background(), job("responses", "gpt-5")); !errors.Is(err, pass.ErrBreakerOpen) {
		t.Fatalf("the next call: %v, want ErrBreakerOpen", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("the refused call reached the server (%d requests)", n)
	}
	if st := onlyBreaker(t, c); st.State != breaker.Open || st.Err == nil || !strings.Contains(st.Err.Error(), "deadline") {
		t.Errorf("breaker %+v", st)
	}
}

// TestBreakerCallerGivesUp: a caller that cancels is no verdict on the
// model API, and a caller whose deadline passes is a timeout.
func TestBreakerCallerGivesUp(t *testing.T) {
	release := make(chan struct{})
	srv := anthropictest.NewServer(anthropictest.Options{Script: func(*anthropictest.Request) anthropictest.Turn {
		<-release
		return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("x")}}
	}})
	defer srv.Close()
	defer close(release) // before Close, which waits for the handlers
	c, _ := breakerClient(t, compact.DefaultSummarizer(), srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for len(srv.MessagesRequests()) < 1 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := c.Summarize(ctx, job("anthropic", "m")); !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "canceled") {
		t.Fatalf("cancelled call: %v", err)
	}
	if st := onlyBreaker(t, c); st.State != breaker.Closed {
		t.Fatalf("a cancelled call changed the breaker: %+v", st)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if _, err := c.Summarize(ctx, job("anthropic", "m")); err == nil {
		t.Fatal("a call past its caller's deadline succeeded")
	}
	if st := onlyBreaker(t, c); st.State != breaker.Open {
		t.Fatalf("a call past its caller's deadline did not open the breaker: %+v", st)
	}
}

// TestBreakerPerTarget: one upstream and model failing leaves the
// others' calls alone.
func TestBreakerPerTarget(t *testing.T) {
	srv := anthropictest.NewServer(anthropictest.Options{Script: func(r *anthropictest.Request) anthropictest.Turn {
		if strings.Contains(string(r.Body), `"bad-model"`) {
			return anthropictest.Turn{Status: http.StatusServiceUnavailable}
		}
		return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("fine")}}
	}})
	defer srv.Close()
	cfg := compact.DefaultSummarizer()
	cfg.Model = "bad-model"
	c, _ := breakerClient(t, cfg, srv.URL)
	if _, err := c.Summarize(context.Background(), job("anthropic", "m")); err == nil {
		t.Fatal("bad-model answered")
	}
	c.cfg.Model = "good-model"
	if _, err := c.Summarize(context.Background(), job("anthropic", "m")); err != nil {
		t.Fatalf("good-model after bad-model failed: %v", err)
	}
	got := map[string]breaker.State{}
	for _, st := range c.Breakers() {
		got[st.Model] = st.State
		if st.Upstream != srv.URL {
			t.Errorf("upstream %q, want %q", st.Upstream, srv.URL)
		}
	}
	if got["bad-model"] != breaker.Open || got["good-model"] != breaker.Closed {
		t.Errorf("breakers %v", got)
	}
}
