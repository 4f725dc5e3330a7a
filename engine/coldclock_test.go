package engine

import (
	"context"
	"errors"
	"testing"
	"time"

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
		points, cold, err := step.book.decide(ctx, "s1", step.at, t0.Add(step.after), ttl)
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
	if points, cold, _ := a.decide(ctx, "s2", 1, t0.Add(time.Hour), ttl); cold || points != nil {
		t.Errorf("another session's first request: cold %v, points %v", cold, points)
	}
}

// TestColdBookFailingStore: a store that fails leaves the request warm
// and says why; nothing panics.
func TestColdBookFailingStore(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	st := downStore{store.NewMemory()}
	b := newColdBook(st, time.Hour, func() time.Time { return t0 }, 0)
	if _, cold, err := b.decide(context.Background(), "s", 1, t0, time.Minute); cold || err == nil {
		t.Errorf("first request: cold %v, err %v; want warm and an error", cold, err)
	}
	if _, cold, err := b.decide(context.Background(), "s", 3, t0.Add(time.Hour), time.Minute); cold || err == nil {
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
