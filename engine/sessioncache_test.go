package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/guardtest"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/store/storetest"
)

func newFakeClock() *storetest.Clock {
	return storetest.NewClock(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
}

// longestStream returns the longest Messages request stream of the corpus.
func longestStream(t *testing.T) [][]byte {
	var best [][]byte
	for _, s := range guardtest.Corpus(t, "..") {
		if s.Proto == anthropic.Protocol && len(s.Bodies) > len(best) {
			best = s.Bodies
		}
	}
	return best
}

// TestSessionMemoryBounds: the sessions remembered for incremental
// rewrites stay within limits.sessions and limits.session_memory whatever
// arrives, and are all dropped once idle for limits.session_idle.
func TestSessionMemoryBounds(t *testing.T) {
	stream := longestStream(t)
	// What one session's memo holds after the requests below.
	one := newEngine(t, config.Defaults(), withStore(store.NewMemory()))
	for _, b := range stream[len(stream)-3:] {
		one.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(0), b)
	}
	_, memoBytes := one.sessions.usage()
	if memoBytes <= 0 {
		t.Fatal("one session remembered nothing")
	}
	for _, tc := range []struct {
		name     string
		sessions int
		bytes    int64
	}{
		{"count bound", 3, 1 << 30},
		{"byte bound", 100, 3*memoBytes + 1},
		{"smaller than one memo", 100, memoBytes / 2},
		{"none", 0, 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Defaults()
			cfg.Limits.Sessions, cfg.Limits.SessionMemory, cfg.Limits.SessionIdle = tc.sessions, tc.bytes, 5*time.Minute
			clock := newFakeClock()
			g := newEngine(t, cfg, withStore(store.NewMemory()), withClock(clock.Now))
			peak := 0
			for i := 0; i < 8; i++ {
				for _, b := range stream[len(stream)-3:] {
					g.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(i), b)
					n, bytes := g.sessions.usage()
					if n > tc.sessions || bytes > tc.bytes {
						t.Fatalf("session %d: %d memos holding %d bytes; bounds %d and %d", i, n, bytes, tc.sessions, tc.bytes)
					}
					peak = max(peak, int(bytes))
				}
				clock.Advance(time.Second)
			}
			if fits := tc.sessions > 0 && tc.bytes > memoBytes; fits && int64(peak) < memoBytes {
				t.Errorf("peak %d bytes remembered: less than one memo (%d), so the bound is not what limits", peak, memoBytes)
			}
			if !(tc.sessions > 0 && tc.bytes > memoBytes) && peak != 0 {
				t.Errorf("%d bytes remembered where nothing fits", peak)
			}
			// Not idle long enough: kept. Idle: all gone.
			clock.Advance(4 * time.Minute)
			n0, _ := g.sessions.usage()
			g.sessions.sweep()
			if n, _ := g.sessions.usage(); n != n0 {
				t.Errorf("sweep before session_idle dropped %d memos", n0-n)
			}
			clock.Advance(time.Minute)
			_, b0 := g.sessions.usage()
			freed := g.sessions.sweep()
			if n, bytes := g.sessions.usage(); n != 0 || bytes != 0 {
				t.Errorf("after session_idle: %d memos, %d bytes", n, bytes)
			}
			if freed != b0 {
				t.Errorf("sweep reported %d bytes freed of %d", freed, b0)
			}
		})
	}
}

// TestSessionMemorySize: a memo keeps no copy of the body, only its parse
// (offsets) and hashes, and counts at least those, so the byte bound
// bounds real memory.
func TestSessionMemorySize(t *testing.T) {
	stream := longestStream(t)
	g := newEngine(t, config.Defaults(), withStore(store.NewMemory()))
	for _, b := range stream {
		g.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(0), b)
	}
	_, bytes := g.sessions.usage()
	last := stream[len(stream)-1]
	c, err := anthropic.Parse(last)
	if err != nil {
		t.Fatal(err)
	}
	parse := int64(c.Footprint() + 16*len(c.Messages))
	if bytes < parse || bytes >= int64(len(last)) {
		t.Errorf("one session's memo counts %d bytes for a %d-byte body whose parse holds %d", bytes, len(last), parse)
	}
	g.sessions.mu.Lock()
	defer g.sessions.mu.Unlock()
	for _, m := range g.sessions.m {
		if m.conv == nil || m.conv.Body != nil {
			t.Errorf("the memo holds a body, or no parse")
		}
	}
}

// TestRecentConcurrent: many sessions at once under tight bounds: no
// deadlock, the bounds hold, the accounting returns to zero.
func TestRecentConcurrent(t *testing.T) {
	stream := longestStream(t)
	cfg := config.Defaults()
	cfg.Limits.Sessions, cfg.Limits.SessionMemory = 3, int64(4*len(stream[len(stream)-1]))
	g := newEngine(t, cfg, withStore(store.NewMemory()))
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i, b := range stream {
				g.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader((w+i)%5), b)
				if n, bytes := g.sessions.usage(); n > 3 || bytes > cfg.Limits.SessionMemory {
					t.Errorf("%d memos, %d bytes", n, bytes)
					return
				}
			}
		}()
	}
	wg.Wait()
	g.sessions.idle = 0
	g.sessions.sweep()
	if n, bytes := g.sessions.usage(); n != 0 || bytes != 0 {
		t.Errorf("after sweeping all: %d memos, %d bytes", n, bytes)
	}
}
