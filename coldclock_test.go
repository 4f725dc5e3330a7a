package ctxguard

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
)

// gappySession is blobSession's requests, each with the time its client
// sends it: 20 seconds apart, and ten minutes after the one before at
// every ninth request (a user who left the session alone longer than the
// prompt cache lives).
func gappySession(t *testing.T) (bodies [][]byte, at []time.Time) {
	t.Helper()
	bodies = blobSession(t, 11)
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	for k := range bodies {
		gap := 20 * time.Second
		if k%9 == 4 {
			gap = 10 * time.Minute
		}
		now = now.Add(gap)
		at = append(at, now)
	}
	return bodies, at
}

// sender sends request k of a session through some instance, at the
// request's time, and returns what went upstream.
type sender func(k int, body []byte, at time.Time) Result

// TestColdClockFleet: a session with long pauses, whose requests at a cold
// cache get edits of their own, sends the same bytes through one
// instance, through two instances on one store taking turns, and through
// an instance that restarts halfway on its data directory; the cold
// decisions are stored when made and read back. The session has cold
// events, and without the clock it sends other bytes.
func TestColdClockFleet(t *testing.T) {
	bodies, times := gappySession(t)
	cfg := blobConfig()
	// Warm events repay their cache write and free 4,000 tokens; cold
	// ones free 1,000.
	pass.Update(&cfg.Passes, func(s *clearing.Config) {
		s.Payback, s.ClearAtLeast, s.Cold.ClearAtLeast = 10, model.Tokens(4000), model.Tokens(1000)
	})
	run := func(name string, send sender) [][]byte {
		t.Helper()
		var out [][]byte
		for k, b := range bodies {
			res := send(k, b, times[k])
			if res.Err != nil {
				t.Fatalf("%s: request %d: %v", name, k, res.Err)
			}
			out = append(out, bytes.Clone(res.Body))
		}
		return out
	}
	clocked := func(st store.Store, now *time.Time, dir string) *Guard {
		t.Helper()
		c := cfg
		c.DataDir = dir
		opts := []Option{WithClock(func() time.Time { return *now })}
		if st != nil {
			opts = append(opts, WithStore(st))
		}
		g, err := New(c, opts...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}

	// One instance; its records tell where the cold events were.
	var now time.Time
	one := clocked(store.NewMemory(), &now, t.TempDir())
	coldEvents, coldRequests := 0, 0
	want := run("one instance", func(k int, b []byte, at time.Time) Result {
		now = at
		res := one.RewriteBody(context.Background(), anthropic.Protocol, nil, b)
		if res.Cold {
			coldRequests++
		}
		if res.Event && res.Cause == record.CauseCold {
			if !res.Cold {
				t.Errorf("request %d: a cold event at a warm request", k)
			}
			coldEvents++
		}
		return res
	})
	if coldRequests == 0 || coldEvents == 0 {
		t.Fatalf("%d cold requests, %d cold events: the test checks nothing", coldRequests, coldEvents)
	}

	// Two instances on one store, taking turns.
	shared := store.NewMemory()
	var nows [2]time.Time
	two := [2]*Guard{clocked(shared, &nows[0], t.TempDir()), clocked(shared, &nows[1], t.TempDir())}
	got := run("two instances", func(k int, b []byte, at time.Time) Result {
		nows[k%2] = at
		return two[k%2].RewriteBody(context.Background(), anthropic.Protocol, nil, b)
	})
	compareStreams(t, "two instances", want, got)

	// One instance restarted halfway, just before a cold request, on the
	// store it had (a store that outlives the process: a data directory,
	// a Redis server). The new process has seen nothing of the session.
	kept := keepOpen{store.NewMemory()}
	half := len(bodies) / 2
	for half%9 != 4 {
		half++
	}
	var first, second *Guard
	got = run("restart", func(k int, b []byte, at time.Time) Result {
		now = at
		switch k {
		case 0:
			first = clocked(kept, &now, t.TempDir())
		case half:
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			second = clocked(kept, &now, t.TempDir())
		}
		g := first
		if k >= half {
			g = second
		}
		return g.RewriteBody(context.Background(), anthropic.Protocol, nil, b)
	})
	compareStreams(t, "restart", want, got)

	// Without the clock (every request warm) the bytes differ: the cold
	// decisions are what the instances agreed on.
	blind := clocked(store.NewMemory(), &now, t.TempDir())
	got = run("no clock", func(k int, b []byte, _ time.Time) Result {
		now = times[0]
		return blind.RewriteBody(context.Background(), anthropic.Protocol, nil, b)
	})
	same := true
	for k := range got {
		same = same && bytes.Equal(got[k], want[k])
	}
	if same {
		t.Error("the session sends the same bytes with every request warm: its cold requests changed nothing")
	}
}

// keepOpen is a store that survives the Guard closing it, as a store
// outside the process survives a restart.
type keepOpen struct{ store.Store }

func (keepOpen) Close() error { return nil }

func compareStreams(t *testing.T, name string, want, got [][]byte) {
	t.Helper()
	for k := range want {
		if !bytes.Equal(want[k], got[k]) {
			t.Fatalf("%s: request %d differs from one instance's (%d bytes, want %d)", name, k, len(got[k]), len(want[k]))
		}
	}
}
