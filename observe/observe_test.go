package observe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// exchange is a record of session key at t0 + at seconds.
func exchange(key string, at int, o record.Outcome) *record.Exchange {
	return &record.Exchange{Session: key, ModelID: "claude-sonnet-4-5", Outcome: o, TokensBefore: 1000, TokensAfter: 600,
		Start: t0.Add(time.Duration(at) * time.Second)}
}

// TestStats: each outcome is counted under its own counter, every
// record under Requests, events and first compactions on their own.
func TestStats(t *testing.T) {
	var s Stats
	for _, o := range []record.Outcome{record.Rewritten, record.Rewritten, record.Unchanged, record.Bypassed, record.FailedOpen,
		record.Recovered, record.RecoveryFailed, record.Refused} {
		s.Observe(&record.Exchange{Outcome: o})
	}
	s.Observe(&record.Exchange{Outcome: record.Rewritten, Event: true, Compaction: "compact/x"})
	want := map[string]int64{"requests": 9, "rewritten": 3, "unchanged": 1, "bypassed": 1, "failed_open": 1, "recovered": 1,
		"recovery_failed": 1, "refused": 1, "events": 1, "compactions": 1, "usage_observed": 0}
	if d := cmp.Diff(want, s.Counters()); d != "" {
		t.Errorf("counters (-want +got):\n%s", d)
	}
}

// failingPut is a store whose writes fail after the first n.
type failingPut struct {
	store.Store
	n, puts int
}

func (f *failingPut) Put(ctx context.Context, key string, b []byte) error {
	if f.puts++; f.puts > f.n {
		return errors.New("disk full")
	}
	return f.Store.Put(ctx, key, b)
}

// TestSessions: a session's statistics add up its records, a record
// without a session is not one, the list is most recent first, Flush
// writes what changed since the last flush, and a store that fails stops
// the flush (and the calibration's save after it) with a warning.
func TestSessions(t *testing.T) {
	mem := store.NewMemory()
	var logs bytes.Buffer
	set := NewSet(mem, tokens.NewCalibration(), slog.New(slog.NewTextHandler(&logs, nil)))
	s := &set.Sessions
	s.Observe(exchange("a", 1, record.Rewritten))
	s.Observe(exchange("b", 2, record.FailedOpen))
	x := exchange("a", 3, record.Recovered)
	x.Event = true
	s.Observe(x)
	s.Observe(exchange("", 4, record.Rewritten))
	want := []SessionStats{
		{Key: "a", Model: "claude-sonnet-4-5", Requests: 2, Rewritten: 2, Events: 1, TokensBefore: 2000, TokensAfter: 1200, LastSeen: t0.Add(3 * time.Second)},
		{Key: "b", Model: "claude-sonnet-4-5", Requests: 1, Failed: 1, TokensBefore: 1000, TokensAfter: 600, LastSeen: t0.Add(2 * time.Second)},
	}
	if d := cmp.Diff(want, s.List()); d != "" {
		t.Fatalf("sessions (-want +got):\n%s", d)
	}
	set.Flush()
	b, err := mem.Get(context.Background(), "session/a")
	var got SessionStats
	if err != nil || json.Unmarshal(b, &got) != nil || got.Requests != 2 {
		t.Fatalf("session/a in the store: %s, %v", b, err)
	}
	if _, err := mem.Get(context.Background(), calibrationKey); err != nil {
		t.Errorf("the calibration was not saved by Flush: %v", err)
	}

	// Only what changed is written again; a failing store stops there.
	failing := &failingPut{Store: store.NewMemory(), n: 0}
	set = NewSet(failing, tokens.NewCalibration(), slog.New(slog.NewTextHandler(&logs, nil)))
	set.Sessions.Observe(exchange("a", 1, record.Rewritten))
	set.Sessions.Observe(exchange("b", 1, record.Rewritten))
	set.Flush()
	if failing.puts != 1 || !strings.Contains(logs.String(), "saving session stats") {
		t.Errorf("a failing store: %d writes tried, want 1 (the flush stops, the calibration waits); log:\n%s", failing.puts, logs.String())
	}
	set.Flush()
	if failing.puts != 2 {
		t.Errorf("a flush with nothing changed tried %d writes, want only the calibration's", failing.puts-1)
	}
}

// TestSessionsBounded: at most maxSessions are kept; the least recently
// seen goes first.
func TestSessionsBounded(t *testing.T) {
	var s Sessions
	for i := range maxSessions + 1 {
		s.Observe(exchange(fmt.Sprint("s", i), i, record.Rewritten))
	}
	l := s.List()
	if len(l) != maxSessions || l[len(l)-1].Key != "s1" || l[0].Key != fmt.Sprint("s", maxSessions) {
		t.Errorf("%d sessions kept, oldest %s, newest %s; want %d, s1, s%d", len(l), l[len(l)-1].Key, l[0].Key, maxSessions, maxSessions)
	}
}

// TestCalibration: only the usage of a 2xx answer of a known model feeds
// the calibration; every 20th usage taken saves it.
func TestCalibration(t *testing.T) {
	mem := store.NewMemory()
	set := NewSet(mem, tokens.NewCalibration(), slog.New(slog.DiscardHandler))
	u := &protocol.Usage{Input: 1200}
	for _, x := range []*record.Exchange{
		{ModelID: "claude-sonnet-4-5", Status: 200, TokensAfter: 1000, Usage: u},
		{ModelID: "claude-sonnet-4-5", Status: 400, TokensAfter: 1000, Usage: u},
		{ModelID: "", Status: 200, TokensAfter: 1000, Usage: u},
		{ModelID: "claude-sonnet-4-5", Status: 200, TokensAfter: 1000},
	} {
		set.Calibration.Observe(x)
	}
	if n := set.Stats.Observed.Load(); n != 1 {
		t.Fatalf("%d usages taken, want 1", n)
	}
	if _, err := mem.Get(context.Background(), calibrationKey); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("saved before the 20th usage: %v", err)
	}
	for range 19 {
		set.Calibration.ObserveSession("", "claude-sonnet-4-5", 1000, *u)
	}
	b, err := mem.Get(context.Background(), calibrationKey)
	if err != nil {
		t.Fatalf("not saved at the 20th usage: %v", err)
	}
	c := LoadCalibration(mem, slog.New(slog.DiscardHandler))
	if got, want := c.Adjust("claude-sonnet-4-5", 1000), set.Calibration.Tokens.Adjust("claude-sonnet-4-5", 1000); got != want || got <= 1000 {
		t.Errorf("the loaded calibration adjusts 1000 to %d, the learned one to %d; want equal, above 1000 (%s)", got, want, b)
	}
}
