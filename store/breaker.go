package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ErrUnavailable is matched by the errors of a Breaker's calls while its
// store is known to be down: the call was not made (or was cut short when
// the store was found down), and its caller fails open at once instead of
// waiting for a store that does not answer.
var ErrUnavailable = errors.New("store: unavailable")

// Breaker wraps a Store that can stop answering — a server (Redis), a
// network file system — so that callers stop waiting for it once it is
// known to be down. It works with any Store.
//
// The store is known to be down once a call timed out (its error matches
// context.DeadlineExceeded, os.ErrDeadlineExceeded or a net.Error whose
// Timeout is true, and the caller had not given up on it first), or once
// Ping failed (the readiness probe). From then on:
//
//   - every call but Close fails at once with an error matching
//     ErrUnavailable (HasBlob reports false), without reaching the store;
//   - the calls in flight when it went down are cancelled, so they fail
//     at once too;
//   - one probe at a time, the store's Ping bounded by ProbeTimeout, checks
//     for its return: started in the background by a call, at least
//     Retry after the previous probe ended, or run by Ping itself when no
//     probe is running (a readiness probe then reports what the store
//     says);
//   - the first probe that succeeds restores normal service.
//
// Answers are not failures: ErrNotFound, ErrBadID, ErrTooLarge, or an
// error the store returned at once (a full disk, a refused command) pass
// through and change nothing, since the caller did not wait. Nor is a
// call its caller cancelled.
//
// Optional capabilities of the wrapped store (Files, or a test's
// interface) are found through Unwrap and As.
type Breaker struct {
	s Store
	o BreakerOptions

	cur     atomic.Pointer[breakerState]
	probing atomic.Bool

	mu        sync.Mutex
	probed    time.Time // when the last probe ended (or the store went down)
	closed    bool
	base      context.Context // ends at Close: probes run under it
	cancel    context.CancelFunc
	probes    sync.WaitGroup
	downCalls atomic.Int64
}

// BreakerOptions configure a Breaker. The zero value takes the defaults.
type BreakerOptions struct {
	// Now is the clock that times Retry; nil means time.Now.
	Now func() time.Time
	// Retry is the least time between the end of one probe and the start
	// of the next one a call starts. Default 1s.
	Retry time.Duration
	// ProbeTimeout bounds one probe. Default 5s.
	ProbeTimeout time.Duration
	// OnChange, if set, is called when the store is found down (err says
	// why) and when it is back (err nil), once per change, on the
	// goroutine that found it. It must not call the Breaker.
	OnChange func(err error)
}

// breakerState is one period of the store being up or down. A period that
// is up has a context that ends when it does: calls made in it run under
// it, so that finding the store down cuts them short.
type breakerState struct {
	down   bool
	err    error           // why it is down
	ctx    context.Context // up: ends when the store is found down
	cancel context.CancelCauseFunc
}

// errFoundDown ends the calls in flight when the store is found down.
var errFoundDown = errors.New("the store was found down")

// NewBreaker wraps s. Close closes s.
func NewBreaker(s Store, o BreakerOptions) *Breaker {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Retry <= 0 {
		o.Retry = time.Second
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 5 * time.Second
	}
	b := &Breaker{s: s, o: o}
	b.base, b.cancel = context.WithCancel(context.Background())
	b.cur.Store(b.up())
	return b
}

// up returns a new period of the store being up.
func (b *Breaker) up() *breakerState {
	ctx, cancel := context.WithCancelCause(b.base)
	return &breakerState{ctx: ctx, cancel: cancel}
}

// Unwrap returns the wrapped store.
func (b *Breaker) Unwrap() Store { return b.s }

// Down reports whether the store is known to be down, and why.
func (b *Breaker) Down() (bool, error) {
	st := b.cur.Load()
	return st.down, st.err
}

// Skipped reports how many calls failed at once, without reaching the
// store, because it was known to be down.
func (b *Breaker) Skipped() int64 { return b.downCalls.Load() }

// call runs f against the store unless it is known to be down, under a
// context that also ends when the store is found down, and notes a
// timeout.
func (b *Breaker) call(ctx context.Context, f func(context.Context) error) error {
	st := b.cur.Load()
	if st.down {
		b.downCalls.Add(1)
		b.maybeProbe()
		return b.unavailable(st)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(st.ctx, func() { cancel(errFoundDown) })
	err := f(cctx)
	stop()
	found := errors.Is(context.Cause(cctx), errFoundDown)
	cancel(nil)
	switch {
	case err == nil:
		return nil
	case found && ctx.Err() == nil:
		return b.unavailable(b.cur.Load())
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return err // the caller gave up
	case timeout(err):
		b.trip(st, err)
	}
	return err
}

// unavailable is the error of a call made while the store is down.
func (b *Breaker) unavailable(st *breakerState) error {
	if st.err == nil {
		return ErrUnavailable
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, st.err)
}

// timeout reports whether err says a call waited too long.
func timeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// trip marks the store down, if st is still the current period: a call
// that ends after the store was found down and back up says nothing of
// the new period.
func (b *Breaker) trip(st *breakerState, err error) {
	if st.down {
		return
	}
	if !b.cur.CompareAndSwap(st, &breakerState{down: true, err: err}) {
		return
	}
	b.mu.Lock()
	b.probed = b.o.Now()
	b.mu.Unlock()
	st.cancel(errFoundDown)
	if b.o.OnChange != nil {
		b.o.OnChange(err)
	}
}

// maybeProbe starts a probe in the background unless one runs, or the
// last ended less than Retry ago.
func (b *Breaker) maybeProbe() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.o.Now().Sub(b.probed) < b.o.Retry || !b.probing.CompareAndSwap(false, true) {
		return
	}
	b.probes.Add(1)
	go func() {
		defer b.probes.Done()
		b.probe(b.base)
	}()
}

// probe pings the store (the caller holds b.probing) and restores normal
// service if it answers.
func (b *Breaker) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, b.o.ProbeTimeout)
	err := b.s.Ping(ctx)
	cancel()
	b.mu.Lock()
	b.probed = b.o.Now()
	b.mu.Unlock()
	if err == nil {
		if st := b.cur.Load(); st.down && b.cur.CompareAndSwap(st, b.up()) && b.o.OnChange != nil {
			b.o.OnChange(nil)
		}
	}
	b.probing.Store(false)
	return err
}

// Ping implements Store. While the store is up it pings it, and any
// failure but the caller's own cancellation marks it down (readiness
// failed). While it is down, Ping is the probe when none runs (and
// reports what the store says); when one runs, it fails at once.
func (b *Breaker) Ping(ctx context.Context) error {
	st := b.cur.Load()
	if st.down {
		if !b.probing.CompareAndSwap(false, true) {
			return b.unavailable(st)
		}
		return b.probe(ctx)
	}
	err := b.call(ctx, b.s.Ping)
	if err != nil && !errors.Is(err, ErrUnavailable) && !errors.Is(ctx.Err(), context.Canceled) {
		b.trip(st, err)
	}
	return err
}

// PutBlob implements Store.
func (b *Breaker) PutBlob(ctx context.Context, id string, data []byte) error {
	return b.call(ctx, func(ctx context.Context) error { return b.s.PutBlob(ctx, id, data) })
}

// HasBlob implements Store: false while the store is down. HasBlob says
// nothing of why it found no blob: it marks the store down only when the
// caller's deadline passed while it waited.
func (b *Breaker) HasBlob(ctx context.Context, id string) bool {
	has := false
	_ = b.call(ctx, func(ctx context.Context) error {
		if has = b.s.HasBlob(ctx, id); !has && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return ctx.Err()
		}
		return nil
	})
	return has
}

// OpenBlob implements Store.
func (b *Breaker) OpenBlob(ctx context.Context, id string) (io.ReadCloser, error) {
	var rc io.ReadCloser
	err := b.call(ctx, func(ctx context.Context) (err error) { rc, err = b.s.OpenBlob(ctx, id); return err })
	return rc, err
}

// TouchBlob implements Store.
func (b *Breaker) TouchBlob(ctx context.Context, id string) error {
	return b.call(ctx, func(ctx context.Context) error { return b.s.TouchBlob(ctx, id) })
}

// Get implements Store.
func (b *Breaker) Get(ctx context.Context, key string) ([]byte, error) {
	var v []byte
	err := b.call(ctx, func(ctx context.Context) (err error) { v, err = b.s.Get(ctx, key); return err })
	return v, err
}

// Put implements Store.
func (b *Breaker) Put(ctx context.Context, key string, val []byte) error {
	return b.call(ctx, func(ctx context.Context) error { return b.s.Put(ctx, key, val) })
}

// PutIfAbsent implements Store.
func (b *Breaker) PutIfAbsent(ctx context.Context, key string, val []byte) ([]byte, bool, error) {
	var cur []byte
	var stored bool
	err := b.call(ctx, func(ctx context.Context) (err error) { cur, stored, err = b.s.PutIfAbsent(ctx, key, val); return err })
	return cur, stored, err
}

// Sweep implements Store.
func (b *Breaker) Sweep(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := b.call(ctx, func(ctx context.Context) (err error) { n, err = b.s.Sweep(ctx, now); return err })
	return n, err
}

// Close stops the probes and closes the wrapped store.
func (b *Breaker) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	b.probes.Wait()
	return b.s.Close()
}

// Wrapper is implemented by a Store that wraps another (Breaker).
type Wrapper interface {
	Unwrap() Store
}

// As finds the first store in s's chain of wrappers (s, then what
// Unwrap returns, and so on) that is a T, as errors.As does for errors:
// a capability of a wrapped store (Files, say) is found through a
// Breaker.
func As[T any](s Store) (T, bool) {
	for range 16 {
		if t, ok := s.(T); ok {
			return t, true
		}
		w, ok := s.(Wrapper)
		if !ok {
			break
		}
		s = w.Unwrap()
	}
	var zero T
	return zero, false
}
