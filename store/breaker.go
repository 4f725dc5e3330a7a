package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/internal/breaker"
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
//   - the calls in flight when it went down return at once too, with
//     ErrUnavailable (their contexts end; a store that does not heed them
//     finishes them by its own bound, and their results are dropped);
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
// The states and their periods are internal/breaker's, the state machine
// the summarizer's breakers share, with a fixed back-off of Retry; a call
// that finds the back-off over starts the probe (a Ping) rather than
// being it.
//
// Optional capabilities of the wrapped store (Files, or a test's
// interface) are found through Unwrap and As.
type Breaker struct {
	s  Store
	o  BreakerOptions
	br *breaker.Breaker // the state: closed is up, open or probing down

	mu     sync.Mutex
	closed bool
	base   context.Context // ends at Close: probes run under it
	cancel context.CancelFunc
	probes sync.WaitGroup
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
	b := &Breaker{s: s, o: o, br: breaker.New(breaker.Options{Now: o.Now, Backoff: o.Retry})}
	b.base, b.cancel = context.WithCancel(context.Background())
	return b
}

// Unwrap returns the wrapped store.
func (b *Breaker) Unwrap() Store { return b.s }

// Down reports whether the store is known to be down, and why.
func (b *Breaker) Down() (bool, error) {
	st := b.br.Status()
	return st.State != breaker.Closed, st.Err
}

// Skipped reports how many calls failed at once, without reaching the
// store, because it was known to be down.
func (b *Breaker) Skipped() int64 { return int64(b.br.Status().Refused) }

// result is what a call of the store returned.
type result[T any] struct {
	v   T
	err error
}

// call runs f against b's store unless it is known to be down, and notes
// a timeout. f runs on a goroutine of its own, under a context that also
// ends when the store is found down: the caller returns then, or when its
// own context ends, even if the store ignores contexts (a blocked read
// that heeds only its deadline); f then ends by the store's own bound,
// and what it returns is dropped (closed, if it is an io.Closer).
func call[T any](b *Breaker, ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	return run(b, ctx, false, f)
}

// run is call; with strict, any failure of f but the caller's
// cancellation marks the store down, not only a timeout (Ping).
func run[T any](b *Breaker, ctx context.Context, strict bool, f func(context.Context) (T, error)) (T, error) {
	var zero T
	c, ok := b.br.Allow()
	if ok && c.Probe() {
		// The store was down and may be back: this call starts the probe
		// in the background and, like the others, fails at once.
		b.br.Refuse()
		b.startProbe(c)
		ok = false
	}
	if !ok {
		return zero, b.unavailable()
	}
	if err := ctx.Err(); err != nil {
		c.Release()
		return zero, err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan result[T], 1)
	go func() {
		v, err := f(cctx)
		ch <- result[T]{v, err}
	}()
	var r result[T]
	select {
	case r = <-ch:
	case <-c.Done():
		go drop(ch)
		c.Release()
		return zero, b.unavailable()
	case <-ctx.Done():
		go drop(ch)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			b.trip(c, ctx.Err()) // it waited for the store until the caller's deadline
		} else {
			c.Release()
		}
		return zero, ctx.Err()
	}
	switch {
	case r.err == nil:
		c.Success()
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		c.Release() // the caller gave up
	case strict || timeout(r.err):
		b.trip(c, r.err)
	default:
		c.Release() // an answer, not a failure
	}
	return r.v, r.err
}

// drop waits for the result of a call its caller no longer waits for,
// and closes it if it is an io.Closer.
func drop[T any](ch <-chan result[T]) {
	r := <-ch
	if c, ok := any(r.v).(io.Closer); ok && r.err == nil {
		c.Close()
	}
}

// unavailable is the error of a call refused or cut short because the
// store is down: ErrUnavailable, and why.
func (b *Breaker) unavailable() error {
	if err := b.br.Status().Err; err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return ErrUnavailable // and already back
}

// timeout reports whether err says a call waited too long.
func timeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// trip marks the store down, if c's period is still the current one: a
// call that ends after the store was found down and back up says nothing
// of the new period. The calls in flight see their Done closed.
func (b *Breaker) trip(c *breaker.Call, err error) {
	if c.Failure(err) && b.o.OnChange != nil {
		b.o.OnChange(err)
	}
}

// startProbe runs the probe c permits in the background, unless the
// Breaker is closed.
func (b *Breaker) startProbe(c *breaker.Call) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		c.Release()
		return
	}
	b.probes.Add(1)
	go func() {
		defer b.probes.Done()
		b.probe(b.base, c)
	}()
}

// probe pings the store with the probe c permits, and restores normal
// service if it answers; else the next probe waits Retry.
func (b *Breaker) probe(ctx context.Context, c *breaker.Call) error {
	ctx, cancel := context.WithTimeout(ctx, b.o.ProbeTimeout)
	err := b.s.Ping(ctx)
	cancel()
	if err != nil {
		c.Failure(err)
		return err
	}
	c.Success()
	if b.o.OnChange != nil {
		b.o.OnChange(nil)
	}
	return nil
}

// Ping implements Store. While the store is up it pings it, and any
// failure but the caller's own cancellation marks it down (readiness
// failed). While it is down, Ping is the probe when none runs (and
// reports what the store says); when one runs, it fails at once.
func (b *Breaker) Ping(ctx context.Context) error {
	if b.br.Status().State != breaker.Closed {
		c, ok := b.br.Probe()
		if !ok {
			return b.unavailable()
		}
		return b.probe(ctx, c)
	}
	_, err := run(b, ctx, true, func(ctx context.Context) (struct{}, error) { return struct{}{}, b.s.Ping(ctx) })
	return err
}

// PutBlob implements Store.
func (b *Breaker) PutBlob(ctx context.Context, id string, data []byte) error {
	_, err := call(b, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, b.s.PutBlob(ctx, id, data) })
	return err
}

// HasBlob implements Store: false while the store is down. HasBlob says
// nothing of why it found no blob: it marks the store down only when the
// caller's deadline passed while it waited.
func (b *Breaker) HasBlob(ctx context.Context, id string) bool {
	has, _ := call(b, ctx, func(ctx context.Context) (bool, error) { return b.s.HasBlob(ctx, id), nil })
	return has
}

// OpenBlob implements Store.
func (b *Breaker) OpenBlob(ctx context.Context, id string) (io.ReadCloser, error) {
	return call(b, ctx, func(ctx context.Context) (io.ReadCloser, error) { return b.s.OpenBlob(ctx, id) })
}

// TouchBlob implements Store.
func (b *Breaker) TouchBlob(ctx context.Context, id string) error {
	_, err := call(b, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, b.s.TouchBlob(ctx, id) })
	return err
}

// Get implements Store.
func (b *Breaker) Get(ctx context.Context, key string) ([]byte, error) {
	return call(b, ctx, func(ctx context.Context) ([]byte, error) { return b.s.Get(ctx, key) })
}

// Put implements Store.
func (b *Breaker) Put(ctx context.Context, key string, val []byte) error {
	_, err := call(b, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, b.s.Put(ctx, key, val) })
	return err
}

// PutIfAbsent implements Store.
func (b *Breaker) PutIfAbsent(ctx context.Context, key string, val []byte) ([]byte, bool, error) {
	type put struct {
		cur    []byte
		stored bool
	}
	r, err := call(b, ctx, func(ctx context.Context) (put, error) {
		cur, stored, err := b.s.PutIfAbsent(ctx, key, val)
		return put{cur, stored}, err
	})
	return r.cur, r.stored, err
}

// Sweep implements Store.
func (b *Breaker) Sweep(ctx context.Context, now time.Time) (int, error) {
	return call(b, ctx, func(ctx context.Context) (int, error) { return b.s.Sweep(ctx, now) })
}

// Close stops the probes and closes the wrapped store.
func (b *Breaker) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	err := b.s.Close() // ends a probe that waits on a connection
	b.probes.Wait()
	return err
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
