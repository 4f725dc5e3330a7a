package serve

import (
	"context"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/guardtest"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/store/storetest"
)

// TestJanitor: memory goes back to the system once the server has been
// idle a whole tick, once per idle spell, and idle memos go at the tick
// after session_idle.
func TestJanitor(t *testing.T) {
	cfg := config.Defaults()
	clock := storetest.NewClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	s := newServer(t, cfg, withStore(store.NewMemory()), withClock(clock.Now))
	frees := 0
	j := janitor{free: func() { frees++ }}
	first := []byte(`{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`)

	s.engine.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(1), first)
	j.tick(s, clock.Now()) // busy: requests since the last tick
	if frees != 0 {
		t.Fatalf("memory handed back while busy")
	}
	clock.Advance(time.Minute)
	j.tick(s, clock.Now()) // a whole idle tick
	if frees != 1 {
		t.Fatalf("after an idle tick: %d releases, want 1", frees)
	}
	clock.Advance(time.Minute)
	j.tick(s, clock.Now())
	if frees != 1 {
		t.Fatalf("a second idle tick released again (%d)", frees)
	}
	if n, _ := s.engine.SessionUsage(); n != 1 {
		t.Fatalf("%d memos before session_idle, want 1", n)
	}
	clock.Advance(cfg.Limits.SessionIdle)
	j.tick(s, clock.Now()) // the memo goes, and with it memory
	if n, _ := s.engine.SessionUsage(); n != 0 || frees != 2 {
		t.Fatalf("after session_idle: %d memos, %d releases; want 0 and 2", n, frees)
	}
	s.engine.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(1), first)
	j.tick(s, clock.Now())
	clock.Advance(time.Minute)
	j.tick(s, clock.Now())
	if frees != 3 {
		t.Fatalf("a new idle spell: %d releases, want 3", frees)
	}
}

func TestTickEvery(t *testing.T) {
	for idle, want := range map[time.Duration]time.Duration{
		0: time.Second, time.Second: time.Second, 10 * time.Second: 5 * time.Second,
		5 * time.Minute: time.Minute, time.Hour: time.Minute,
	} {
		if got := tickEvery(idle); got != want {
			t.Errorf("tickEvery(%v) = %v, want %v", idle, got, want)
		}
	}
}
