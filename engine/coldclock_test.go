package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/store"
	"github.com/google/go-cmp/cmp"
)

// TestColdBook: the cache's clock, request by request, for one process
// and for a second one (or a restarted one) on the same store.
func TestColdBook(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	ttl := 5 * time.Minute
	a := newColdBook(st, time.Hour, func() time.Time { return t0 }, 0)
	b := newColdBook(st, time.Hour, func() time.Time { return t0 }, 0)
	for _, step := range []struct {
		name   string
		book   *coldBook
		at     int
		after  time.Duration // since the start
		cold   bool
		points []int
	}{
		{"the first request is warm", a, 1, 0, false, nil},
		{"a minute later", a, 3, time.Minute, false, nil},
		{"after a pause longer than the cache lives", a, 5, 7 * time.Minute, true, []int{5}},
		{"its retry stays cold, although it comes at once", a, 5, 7*time.Minute + time.Second, true, []int{5}},
		{"the next request is warm", a, 7, 8 * time.Minute, false, []int{5}},
		// b has never seen the session: the store says when a last
		// saw it, and what a decided.
		{"another process, soon after", b, 9, 9 * time.Minute, false, []int{5}},
		{"another process, after a pause", b, 11, 20 * time.Minute, true, []int{5, 11}},
		{"the first process sees the second's decision", a, 11, 20*time.Minute + time.Second, true, []int{5, 11}},
		{"and the second's arrival", a, 13, 21 * time.Minute, false, []int{5, 11}},
		{"a pause of exactly the lifetime is warm", a, 15, 26 * time.Minute, false, []int{5, 11}},
	} {
		points, cold, _, err := step.book.decide(ctx, "s1", step.at, t0.Add(step.after), ttl, nil)
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if cold != step.cold {
			t.Errorf("%s: cold = %v, want %v", step.name, cold, step.cold)
		}
		if d := cmp.Diff(step.points, points); d != "" {
			t.Errorf("%s: points (-want +got):\n%s", step.name, d)
		}
	}
	// Another session has its own clock.
	if points, cold, _, _ := a.decide(ctx, "s2", 1, t0.Add(time.Hour), ttl, nil); cold || points != nil {
		t.Errorf("another session's first request: cold %v, points %v", cold, points)
	}
}

// TestColdBookPublishes: a process publishes a session's arrival at most
// every publishEvery, and another process that times a request by it
// allows for the lag: a request just past the lifetime by the stale
// publication, but not by the true previous arrival, stays warm.
func TestColdBookPublishes(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	a := newColdBook(st, time.Hour, nil, 0)
	b := newColdBook(st, time.Hour, nil, 0)
	ttl := 5 * time.Minute
	a.decide(ctx, "s", 1, t0, ttl, nil)                     // published
	a.decide(ctx, "s", 3, t0.Add(10*time.Second), ttl, nil) // within publishEvery: not published
	if got, _ := a.published(ctx, "s"); !got.Equal(t0) {
		t.Errorf("published %v, want %v", got, t0)
	}
	// 5m5s after the publication, 4m55s after the true previous request.
	if _, cold, _, _ := b.decide(ctx, "s", 5, t0.Add(ttl+5*time.Second), ttl, nil); cold {
		t.Error("another process found the cache cold within the publication's lag")
	}
	// Well past it.
	if _, cold, _, _ := b.decide(ctx, "s", 7, t0.Add(2*ttl+time.Minute), ttl, nil); !cold {
		t.Error("another process found the cache warm after a long pause")
	}
}

// TestColdBookFailingStore: a store that fails leaves the request warm
// and says why; nothing panics.
func TestColdBookFailingStore(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	st := downStore{store.NewMemory()}
	b := newColdBook(st, time.Hour, func() time.Time { return t0 }, 0)
	if _, cold, _, err := b.decide(context.Background(), "s", 1, t0, time.Minute, nil); cold || err == nil {
		t.Errorf("first request: cold %v, err %v; want warm and an error", cold, err)
	}
	if _, cold, _, err := b.decide(context.Background(), "s", 3, t0.Add(time.Hour), time.Minute, nil); cold || err == nil {
		t.Errorf("after a pause: cold %v, err %v; want warm and an error", cold, err)
	}
}

type downStore struct{ store.Store }

var errDown = errors.New("store down")

func (downStore) Get(context.Context, string) ([]byte, error) { return nil, errDown }
func (downStore) Put(context.Context, string, []byte) error   { return errDown }
func (downStore) PutIfAbsent(context.Context, string, []byte) ([]byte, bool, error) {
	return nil, false, errDown
}

// TestCacheTTLOfRequest: a request is timed with its model's cache
// lifetime, or the longer one it asks for (Anthropic's "ttl":"1h" marker,
// OpenAI's prompt_cache_retention "24h"); its result (and record) says
// which, and whether it found the cache cold.
func TestCacheTTLOfRequest(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		proto protocol.Protocol
		body  func(n int) string // the request holding n user turns
		ttl   time.Duration
	}{
		{"anthropic", anthropic.Protocol, func(n int) string {
			return `{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[` + turns(n, `{"role":"user","content":"q%d"}`, `{"role":"assistant","content":"a%d"}`) + `]}`
		}, 5 * time.Minute},
		{"anthropic, 1h marker", anthropic.Protocol, func(n int) string {
			return `{"model":"claude-sonnet-4-5","max_tokens":10,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[` + turns(n, `{"role":"user","content":"q%d"}`, `{"role":"assistant","content":"a%d"}`) + `]}`
		}, time.Hour},
		{"responses", responses.Protocol, func(n int) string {
			return `{"model":"gpt-5.2","input":[` + turns(n, `{"role":"user","content":"q%d"}`, `{"role":"assistant","content":"a%d"}`) + `]}`
		}, 5 * time.Minute},
		{"responses, 24h retention", responses.Protocol, func(n int) string {
			return `{"model":"gpt-5.2","prompt_cache_retention":"24h","input":[` + turns(n, `{"role":"user","content":"q%d"}`, `{"role":"assistant","content":"a%d"}`) + `]}`
		}, 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := t0
			e := newEngine(t, config.Defaults(), withStore(store.NewMemory()), withClock(func() time.Time { return now }))
			send := func(n int, after time.Duration) Result {
				now = t0.Add(after)
				return e.RewriteBody(context.Background(), tc.proto, nil, []byte(tc.body(n)))
			}
			// Timed with the model's lifetime while that says warm (what
			// the request asked for is read only when it matters).
			if r := send(1, 0); r.CacheTTL != 5*time.Minute || r.Cold {
				t.Fatalf("first request: ttl %v cold %v, want 5m and warm", r.CacheTTL, r.Cold)
			}
			// Just within the lifetime: warm; just past it: cold.
			if r := send(2, tc.ttl); r.Cold || r.CacheTTL != tc.ttl {
				t.Errorf("a request %v after the one before: cold %v, ttl %v; want warm, %v", tc.ttl, r.Cold, r.CacheTTL, tc.ttl)
			}
			if r := send(3, 2*tc.ttl+time.Second); !r.Cold || r.CacheTTL != tc.ttl {
				t.Errorf("a request %v after the one before: cold %v, ttl %v; want cold, %v", tc.ttl+time.Second, r.Cold, r.CacheTTL, tc.ttl)
			}
		})
	}
}

// turns renders n user turns, with an assistant answer between them.
func turns(n int, user, assistant string) string {
	var parts []string
	for i := 1; i <= n; i++ {
		if i > 1 {
			parts = append(parts, fmt.Sprintf(assistant, i-1))
		}
		parts = append(parts, fmt.Sprintf(user, i))
	}
	return strings.Join(parts, ",")
}
