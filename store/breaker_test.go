package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/store/storetest"
)

// slowStore is a Memory that can freeze like a server that stopped
// answering: a frozen call waits until the store thaws (then it is
// served), its context ends (it returns the context's error), or the
// test times it out (it returns a deadline error, as a client's read
// timeout would). It counts the calls that reached it.
type slowStore struct {
	store.Store
	calls, pings, waiting atomic.Int64
	timeouts              chan struct{}

	mu      sync.Mutex
	thaw    chan struct{} // nil: not frozen
	pingErr error
}

func newSlowStore() *slowStore {
	return &slowStore{Store: store.NewMemory(), timeouts: make(chan struct{})}
}

func (s *slowStore) freeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.thaw == nil {
		s.thaw = make(chan struct{})
	}
}

func (s *slowStore) unfreeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.thaw != nil {
		close(s.thaw)
		s.thaw = nil
	}
}

// timeOut makes one frozen call fail with a deadline error.
func (s *slowStore) timeOut() { s.timeouts <- struct{}{} }

func (s *slowStore) setPingErr(err error) {
	s.mu.Lock()
	s.pingErr = err
	s.mu.Unlock()
}

func (s *slowStore) enter(ctx context.Context) error {
	s.mu.Lock()
	thaw := s.thaw
	s.mu.Unlock()
	if thaw == nil {
		return nil
	}
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	select {
	case <-thaw:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.timeouts:
		return fmt.Errorf("read tcp 127.0.0.1:6379: %w", os.ErrDeadlineExceeded)
	}
}

func (s *slowStore) Get(ctx context.Context, key string) ([]byte, error) {
	s.calls.Add(1)
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, key)
}

func (s *slowStore) Put(ctx context.Context, key string, val []byte) error {
	s.calls.Add(1)
	if err := s.enter(ctx); err != nil {
		return err
	}
	return s.Store.Put(ctx, key, val)
}

func (s *slowStore) PutBlob(ctx context.Context, id string, data []byte) error {
	s.calls.Add(1)
	if err := s.enter(ctx); err != nil {
		return err
	}
	return s.Store.PutBlob(ctx, id, data)
}

func (s *slowStore) TouchBlob(ctx context.Context, id string) error {
	s.calls.Add(1)
	if err := s.enter(ctx); err != nil {
		return err
	}
	return s.Store.TouchBlob(ctx, id)
}

func (s *slowStore) OpenBlob(ctx context.Context, id string) (io.ReadCloser, error) {
	s.calls.Add(1)
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	return s.Store.OpenBlob(ctx, id)
}

func (s *slowStore) HasBlob(ctx context.Context, id string) bool {
	s.calls.Add(1)
	return s.enter(ctx) == nil && s.Store.HasBlob(ctx, id)
}

func (s *slowStore) PutIfAbsent(ctx context.Context, key string, val []byte) ([]byte, bool, error) {
	s.calls.Add(1)
	if err := s.enter(ctx); err != nil {
		return nil, false, err
	}
	return s.Store.PutIfAbsent(ctx, key, val)
}

func (s *slowStore) Sweep(ctx context.Context, now time.Time) (int, error) {
	s.calls.Add(1)
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	return s.Store.Sweep(ctx, now)
}

func (s *slowStore) Ping(ctx context.Context) error {
	s.pings.Add(1)
	if err := s.enter(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pingErr
}

// eventually waits (at most 10 s) for cond, which a goroutine of the
// Breaker makes true.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}

// result waits (at most 10 s) for a call's error.
func result(t *testing.T, what string, c <-chan error) error {
	t.Helper()
	select {
	case err := <-c:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

// changes records a Breaker's OnChange calls.
type changes struct {
	mu   sync.Mutex
	errs []error
}

func (c *changes) add(err error) {
	c.mu.Lock()
	c.errs = append(c.errs, err)
	c.mu.Unlock()
}

func (c *changes) list() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.errs...)
}

// everyCall makes each call of the Store interface but Ping and Close
// once, and returns their errors and what HasBlob said.
func everyCall(b store.Store, id string) (errs []error, has bool) {
	ctx := context.Background()
	errs = append(errs, b.PutBlob(ctx, id, []byte("x")))
	has = b.HasBlob(ctx, id)
	_, err := b.OpenBlob(ctx, id)
	errs = append(errs, err, b.TouchBlob(ctx, id))
	_, err = b.Get(ctx, "k")
	errs = append(errs, err, b.Put(ctx, "k", []byte("v")))
	_, _, err = b.PutIfAbsent(ctx, "k2", []byte("v"))
	errs = append(errs, err)
	_, err = b.Sweep(ctx, time.Now())
	return append(errs, err), has
}

// TestBreakerFailsFast: once a call times out, the call in flight is cut
// short and every later call fails at once with ErrUnavailable without
// reaching the store; after Retry one probe at a time checks the store,
// and the first that succeeds restores service.
func TestBreakerFailsFast(t *testing.T) {
	slow := newSlowStore()
	clk := storetest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	var ch changes
	b := store.NewBreaker(slow, store.BreakerOptions{Now: clk.Now, Retry: time.Second, OnChange: ch.add})
	defer b.Close()
	ctx := context.Background()
	id := store.ID([]byte("kept"))
	if err := b.PutBlob(ctx, id, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "absent"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of an absent record: %v", err)
	}
	if down, _ := b.Down(); down {
		t.Fatal("down after answers")
	}

	// Two calls wait on the frozen store; one times out.
	slow.freeze()
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { _, err := b.Get(ctx, "r"); first <- err }()
	eventually(t, "the first call waits", func() bool { return slow.waiting.Load() == 1 })
	go func() { second <- b.Put(ctx, "r", []byte("v")) }()
	eventually(t, "both calls wait", func() bool { return slow.waiting.Load() == 2 })
	slow.timeOut()
	e1, e2 := result(t, "the first call", first), result(t, "the second call", second)
	timedOut, cut := e1, e2
	if errors.Is(e1, store.ErrUnavailable) {
		timedOut, cut = e2, e1
	}
	if !errors.Is(timedOut, os.ErrDeadlineExceeded) || !errors.Is(cut, store.ErrUnavailable) {
		t.Fatalf("calls in flight: %v and %v; want one timeout and one cut short with ErrUnavailable", e1, e2)
	}
	if down, why := b.Down(); !down || !errors.Is(why, os.ErrDeadlineExceeded) {
		t.Fatalf("Down() = %v, %v after a timeout", down, why)
	}
	if cs := ch.list(); len(cs) != 1 || !errors.Is(cs[0], os.ErrDeadlineExceeded) {
		t.Errorf("OnChange calls %v, want one with the timeout", cs)
	}

	// Down: nothing reaches the store, and no probe before Retry.
	calls := slow.calls.Load()
	errs, has := everyCall(b, id)
	for i, err := range errs {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("call %d while down: %v, want ErrUnavailable", i, err)
		}
	}
	if has {
		t.Error("HasBlob true while down")
	}
	if n := slow.calls.Load() - calls; n != 0 {
		t.Errorf("%d calls reached the store while it was known to be down", n)
	}
	if n := b.Skipped(); n != 8 {
		t.Errorf("Skipped() = %d, want the 8 calls made", n)
	}
	if n := slow.pings.Load(); n != 0 {
		t.Errorf("%d probes before Retry passed", n)
	}

	// After Retry, a call starts one probe; it waits on the frozen store,
	// and no other starts however much time passes.
	clk.Advance(time.Second)
	if _, err := b.Get(ctx, "r"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Get while down: %v", err)
	}
	eventually(t, "a probe", func() bool { return slow.pings.Load() == 1 && slow.waiting.Load() == 1 })
	for range 3 {
		clk.Advance(time.Minute)
		everyCall(b, id)
		if err := b.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("Ping while a probe runs: %v, want ErrUnavailable at once", err)
		}
	}
	if n := slow.pings.Load(); n != 1 {
		t.Errorf("%d probes at once, want 1", n)
	}
	if n := slow.calls.Load() - calls; n != 0 {
		t.Errorf("%d calls reached the store while it was known to be down", n)
	}

	// The store answers the probe: service is back.
	slow.unfreeze()
	eventually(t, "service restored", func() bool { down, _ := b.Down(); return !down })
	rc, err := b.OpenBlob(ctx, id)
	if err != nil {
		t.Fatalf("OpenBlob once the store is back: %v", err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "kept" {
		t.Errorf("blob %q", got)
	}
	if cs := ch.list(); len(cs) != 2 || cs[1] != nil {
		t.Errorf("OnChange calls %v, want the outage and then nil", cs)
	}
}

// TestBreakerProbeFails: a probe that fails leaves the store down, and the
// next starts only Retry after it ended.
func TestBreakerProbeFails(t *testing.T) {
	slow := newSlowStore()
	clk := storetest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	b := store.NewBreaker(slow, store.BreakerOptions{Now: clk.Now, Retry: 2 * time.Second})
	defer b.Close()
	ctx := context.Background()
	slow.setPingErr(errors.New("connection refused"))
	if err := b.Ping(ctx); err == nil {
		t.Fatal("Ping of a refusing store succeeded")
	}
	if down, _ := b.Down(); !down {
		t.Fatal("a failed readiness probe did not mark the store down")
	}
	clk.Advance(2 * time.Second)
	b.Get(ctx, "k")
	eventually(t, "the probe ends", func() bool { return slow.pings.Load() == 2 && slow.waiting.Load() == 0 })
	// The probe's end is the clock's now: the next is due 2 s later.
	clk.Advance(time.Second)
	b.Get(ctx, "k")
	clk.Advance(999 * time.Millisecond)
	b.Get(ctx, "k")
	if n := slow.pings.Load(); n != 2 {
		t.Fatalf("%d pings: a probe started before Retry passed", n)
	}
	if down, _ := b.Down(); !down {
		t.Fatal("a failed probe restored service")
	}
	// Readiness while down and no probe runs: Ping is the probe.
	slow.setPingErr(nil)
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("Ping of a store that answers again: %v", err)
	}
	if down, _ := b.Down(); down {
		t.Fatal("a successful Ping did not restore service")
	}
	if _, err := b.Get(ctx, "k"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get once back: %v", err)
	}
}

// TestBreakerAnswersAreNotFailures: the store's answers, errors it
// returns at once and calls their callers cancelled leave it up; a call
// whose caller's deadline passed while it waited marks it down.
func TestBreakerAnswersAreNotFailures(t *testing.T) {
	slow := newSlowStore()
	b := store.NewBreaker(&failing{Store: slow}, store.BreakerOptions{})
	defer b.Close()
	ctx := context.Background()
	everyCall(b, "not-an-id")
	if _, err := b.OpenBlob(ctx, store.ID([]byte("absent"))); !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "disk-full", []byte("v")); err == nil {
		t.Fatal("the failing Put succeeded")
	}
	slow.freeze()
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := b.Get(cctx, "k"); done <- err }()
	eventually(t, "the call waits", func() bool { return slow.waiting.Load() == 1 })
	cancel()
	if err := result(t, "the cancelled call", done); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	if down, why := b.Down(); down {
		t.Fatalf("down after answers and a cancelled call: %v", why)
	}
	// A deadline that passed before the call is not the store's doing.
	dctx, dcancel := context.WithDeadline(ctx, time.Now())
	defer dcancel()
	if _, err := b.Get(dctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get with a past deadline: %v", err)
	}
	if down, _ := b.Down(); down {
		t.Fatal("a call whose deadline had passed before it started marked the store down")
	}
	// One that passes while the frozen store keeps it waiting is.
	dctx, dcancel = context.WithTimeout(ctx, 10*time.Millisecond)
	defer dcancel()
	if b.HasBlob(dctx, store.ID([]byte("absent"))) {
		t.Error("HasBlob true on a frozen store")
	}
	if down, _ := b.Down(); !down {
		t.Error("a HasBlob whose deadline passed while it waited did not mark the store down")
	}
}

// failing refuses Put at once with an error of its own (a full disk).
type failing struct{ store.Store }

func (f *failing) Put(context.Context, string, []byte) error {
	return errors.New("no space left on device")
}

// TestBreakerCloseStopsProbe: Close ends a probe in flight and closes the
// wrapped store.
func TestBreakerCloseStopsProbe(t *testing.T) {
	slow := newSlowStore()
	clk := storetest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	b := store.NewBreaker(slow, store.BreakerOptions{Now: clk.Now})
	slow.setPingErr(errors.New("refused"))
	b.Ping(context.Background())
	slow.freeze()
	clk.Advance(time.Hour)
	b.Get(context.Background(), "k")
	eventually(t, "a probe waits", func() bool { return slow.waiting.Load() == 1 })
	done := make(chan error, 1)
	go func() { done <- b.Close() }()
	if err := result(t, "Close", done); err != nil {
		t.Fatal(err)
	}
	if n := slow.waiting.Load(); n != 0 {
		t.Errorf("%d calls still wait after Close", n)
	}
}

// The conformance suite through a Breaker: it changes nothing a store
// promises, and capabilities (Files) are found through it.
func TestConformanceBreakerDir(t *testing.T) {
	storetest.Run(t, func(t *testing.T, c storetest.Config) store.Store {
		return store.NewBreaker(storetest.TempDir(t, c.TTL, c.Now), store.BreakerOptions{Now: c.Now})
	})
}

func TestConformanceBreakerMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T, c storetest.Config) store.Store {
		return store.NewBreaker(store.NewMemoryWith(store.MemoryOptions{TTL: c.TTL, Now: c.Now}), store.BreakerOptions{Now: c.Now})
	})
}

// BenchmarkBreakerGet is what the Breaker adds to a call of a store
// that answers, and what a call costs while the store is known down.
func BenchmarkBreakerGet(b *testing.B) {
	ctx := context.Background()
	down := newSlowStore()
	down.setPingErr(errors.New("refused"))
	known := store.NewBreaker(down, store.BreakerOptions{Retry: time.Hour})
	known.Ping(ctx)
	for _, tc := range []struct {
		name string
		s    store.Store
	}{
		{"bare", store.NewMemory()},
		{"breaker", store.NewBreaker(store.NewMemory(), store.BreakerOptions{})},
		{"down", known},
	} {
		tc.s.Put(ctx, "k", []byte("v"))
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tc.s.Get(ctx, "k")
			}
		})
	}
}
