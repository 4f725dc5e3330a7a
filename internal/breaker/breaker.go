// Package breaker is the state machine of a circuit breaker, for a
// dependency that can stop answering (the summarizer's model API, a
// shared store): once a call to it fails, callers stop paying for it at
// once, and one probe at a time checks for its return.
//
//   - Closed: calls are made. A call's failure (or timeout) opens the
//     breaker, and the calls in flight are told (Call.Done) so they can
//     end at once rather than wait for a dependency known to fail.
//   - Open: calls are refused, without reaching the dependency, for a
//     back-off period that starts at Options.Backoff and doubles with
//     every failure in a row, up to Options.MaxBackoff.
//   - Probing: when the back-off has passed, the next caller's call is
//     the probe; other calls are still refused while it runs. Its success
//     closes the breaker; its failure opens it again, for longer.
//
// A call that ends with no verdict (its caller gave up) changes nothing;
// a probe that does so hands the probe to the next caller. A verdict of a
// call from an earlier period (one that started before the breaker
// opened, and ended after it opened or closed again) is ignored, so a
// straggler can neither reopen a breaker that a probe closed nor close
// one that it did not probe.
//
// Time comes from Options.Now; the breaker starts no timer and no
// goroutine. A Breaker is safe for concurrent use.
package breaker

import (
	"errors"
	"sync"
	"time"
)

// ErrOpen is the error of a call the breaker refused or cut short: the
// dependency is known to fail.
var ErrOpen = errors.New("circuit breaker open")

// State is a breaker's state.
type State uint8

// The states.
const (
	Closed  State = iota // calls are made
	Open                 // calls are refused until the back-off passes
	Probing              // one call, the probe, is under way; others are refused
)

// States are every State, in order.
var States = [...]State{Closed, Open, Probing}

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case Probing:
		return "probing"
	}
	return "unknown"
}

// Options configure a Breaker. The zero value takes the defaults.
type Options struct {
	// Now is the clock of the back-off; nil means time.Now.
	Now func() time.Time
	// Backoff is how long calls are refused after the first failure.
	// Default 1s.
	Backoff time.Duration
	// MaxBackoff caps the back-off, which doubles with each failure in a
	// row. Default (or less than Backoff): Backoff, a fixed period.
	MaxBackoff time.Duration
}

// Breaker is one dependency's circuit breaker. The zero value is not
// usable; call New.
type Breaker struct {
	o Options

	mu      sync.Mutex
	state   State
	period  uint64        // counts the changes of state; a Call belongs to one
	fails   int           // failures in a row, probes included
	until   time.Time     // Open: when the next call is the probe
	err     error         // the last failure
	changed time.Time     // when the state last changed
	done    chan struct{} // closed when the current closed period ends
	trips   uint64        // times the breaker opened from Closed
	refused uint64        // calls refused
}

// New returns a closed Breaker.
func New(o Options) *Breaker {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff < o.Backoff {
		o.MaxBackoff = o.Backoff
	}
	return &Breaker{o: o, done: make(chan struct{}), changed: o.Now()}
}

// Call is one call the breaker let through. Report how it ended with
// exactly one of Success, Failure or Release.
type Call struct {
	b      *Breaker
	period uint64
	probe  bool
	done   chan struct{} // nil for a probe
	ended  bool
}

// Probe reports whether the call is the probe of a breaker that was open.
func (c *Call) Probe() bool {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	return c.probe
}

// Done is closed when the breaker opens while the call is under way
// (another call failed): the dependency is known to fail, and the call
// may end at once. A probe's Done is never closed.
func (c *Call) Done() <-chan struct{} {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	return c.done
}

// Allow returns the permission for a call, or false when the breaker
// refuses it: it is open and its back-off has not passed, or a probe is
// under way. The first call after the back-off is the probe.
func (b *Breaker) Allow() (*Call, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Closed:
		return &Call{b: b, period: b.period, done: b.done}, true
	case Open:
		if !b.o.Now().Before(b.until) {
			return b.probeLocked(), true
		}
	}
	b.refused++
	return nil, false
}

// Probe returns a probe call now, whatever the back-off says, when the
// breaker is open and no probe is under way (a readiness check that
// should report what the dependency says). It returns false otherwise,
// and counts nothing as refused.
func (b *Breaker) Probe() (*Call, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != Open {
		return nil, false
	}
	return b.probeLocked(), true
}

func (b *Breaker) probeLocked() *Call {
	b.set(Probing)
	return &Call{b: b, period: b.period, probe: true}
}

// set changes the state (b.mu held), starting a new period.
func (b *Breaker) set(s State) {
	b.state = s
	b.period++
	b.changed = b.o.Now()
}

// Success reports that the call succeeded: a probe, or any call of the
// current closed period, closes the breaker and clears the failures.
func (c *Call) Success() {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if !c.end() || c.period != b.period {
		return
	}
	b.fails, b.err = 0, nil
	if b.state == Probing {
		b.set(Closed)
		b.done = make(chan struct{})
	}
}

// Failure reports that the call failed (or timed out) with err: the
// breaker opens, for longer after each failure in a row. It reports
// whether this call opened it (false for a call of an earlier period).
func (c *Call) Failure(err error) bool {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if !c.end() || c.period != b.period {
		return false
	}
	b.openLocked(err)
	return true
}

// Stall reports that the call has run too long, though it goes on: the
// breaker opens as for a failure (the calls in flight are told), and the
// call becomes the probe, whose verdict, when it ends, closes the breaker
// or opens it again for longer. It reports whether this call opened the
// breaker; a probe that stalls, or a call of an earlier period, changes
// nothing.
func (c *Call) Stall(err error) bool {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.ended || c.probe || c.period != b.period {
		return false
	}
	b.openLocked(err)
	b.set(Probing)
	c.period, c.probe, c.done = b.period, true, nil
	return true
}

// openLocked opens the breaker for the back-off of one more failure.
func (b *Breaker) openLocked(err error) {
	if b.state == Closed {
		b.trips++
		close(b.done)
	}
	b.fails++
	b.err = err
	b.set(Open)
	b.until = b.o.Now().Add(b.backoff(b.fails))
}

// backoff is the back-off after n failures in a row.
func (b *Breaker) backoff(n int) time.Duration {
	d := b.o.Backoff
	for i := 1; i < n && d < b.o.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, b.o.MaxBackoff)
}

// Release reports that the call ended with no verdict (its caller gave
// up): a probe hands the probe to the next caller; other calls change
// nothing.
func (c *Call) Release() {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if !c.end() || c.period != b.period || !c.probe {
		return
	}
	b.set(Open) // until has passed: the next caller probes
}

// end marks the call ended (b.mu held), and reports whether it was not
// already.
func (c *Call) end() bool {
	if c.ended {
		return false
	}
	c.ended = true
	return true
}

// Status is a snapshot of a breaker.
type Status struct {
	State State
	// Since is when the state last changed.
	Since time.Time
	// Fails counts the failures in a row (0 when the last call
	// succeeded); Err is the last one.
	Fails int
	Err   error
	// Until is when an open breaker lets the next call through as the
	// probe.
	Until time.Time
	// Trips counts the times the breaker opened from closed; Refused the
	// calls it refused.
	Trips, Refused uint64
}

// Status returns the breaker's state.
func (b *Breaker) Status() Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := Status{State: b.state, Since: b.changed, Fails: b.fails, Err: b.err, Trips: b.trips, Refused: b.refused}
	if b.state == Open {
		s.Until = b.until
	}
	return s
}

// Refuse counts a call its caller did not make because Check said the
// breaker would refuse it.
func (b *Breaker) Refuse() {
	b.mu.Lock()
	b.refused++
	b.mu.Unlock()
}

// Check reports what Allow would answer now, without taking the probe
// or counting a refusal: whether a call would be let through, and
// whether it would be the probe.
func (b *Breaker) Check() (ok, probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case Closed:
		return true, false
	case Open:
		if !b.o.Now().Before(b.until) {
			return true, true
		}
	}
	return false, false
}
