package breaker

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/internal/testclock"
)

func newBreaker() (*Breaker, *testclock.Clock) {
	c := testclock.New(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	return New(Options{Now: c.Now, Backoff: 10 * time.Second, MaxBackoff: 35 * time.Second}), c
}

var errDown = errors.New("down")

func mustAllow(t *testing.T, b *Breaker) *Call {
	t.Helper()
	c, ok := b.Allow()
	if !ok {
		t.Fatalf("refused in state %v", b.Status().State)
	}
	return c
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestBackoffGrowsCapped: each failed probe opens the breaker for twice
// as long, up to the cap; during the back-off every call is refused, and
// after it exactly one call (the probe) goes through; its success closes
// the breaker and resets the back-off.
func TestBackoffGrowsCapped(t *testing.T) {
	b, clk := newBreaker()
	mustAllow(t, b).Failure(errDown)
	var got []time.Duration
	for range 5 {
		st := b.Status()
		if st.State != Open {
			t.Fatalf("state %v after a failure", st.State)
		}
		d := st.Until.Sub(clk.Now())
		got = append(got, d)
		clk.Advance(d - time.Nanosecond)
		if _, ok := b.Allow(); ok {
			t.Fatalf("a call went through %v before the back-off of %v ended", time.Nanosecond, d)
		}
		clk.Advance(time.Nanosecond)
		p := mustAllow(t, b)
		if !p.Probe() {
			t.Fatal("the first call after the back-off is not the probe")
		}
		if _, ok := b.Allow(); ok {
			t.Fatal("a second call went through while the probe runs")
		}
		p.Failure(errDown)
	}
	if d := cmp.Diff([]time.Duration{10 * time.Second, 20 * time.Second, 35 * time.Second, 35 * time.Second, 35 * time.Second}, got); d != "" {
		t.Errorf("back-offs (-want +got):\n%s", d)
	}
	clk.Advance(time.Hour)
	mustAllow(t, b).Success()
	st := b.Status()
	if st.State != Closed || st.Fails != 0 || st.Err != nil || st.Trips != 1 || st.Refused != 10 {
		t.Errorf("after the probe's success: %+v", st)
	}
	c := mustAllow(t, b)
	if c.Probe() {
		t.Error("a call of a closed breaker is a probe")
	}
	c.Failure(errDown)
	if d := b.Status().Until.Sub(clk.Now()); d != 10*time.Second {
		t.Errorf("back-off after a success and a new failure: %v, want the first one again", d)
	}
}

// TestInFlightToldAndIgnored: when a call fails, the calls in flight of
// the same period see Done closed, and their verdicts change nothing:
// neither a late failure (which would lengthen the back-off) nor a late
// success (which would close a breaker nobody probed).
func TestInFlightToldAndIgnored(t *testing.T) {
	b, clk := newBreaker()
	a, c, d := mustAllow(t, b), mustAllow(t, b), mustAllow(t, b)
	if closed(c.Done()) {
		t.Fatal("Done closed while the breaker is closed")
	}
	if !a.Failure(errDown) {
		t.Fatal("the first failure did not open the breaker")
	}
	if !closed(c.Done()) || !closed(d.Done()) {
		t.Fatal("the calls in flight were not told the breaker opened")
	}
	until := b.Status().Until
	if c.Failure(errDown) {
		t.Error("a straggler's failure opened the breaker again")
	}
	d.Success()
	if st := b.Status(); st.State != Open || st.Fails != 1 || !st.Until.Equal(until) {
		t.Errorf("stragglers changed the breaker: %+v", st)
	}
	// A straggler of a period before the probe cannot close it either.
	clk.Advance(10 * time.Second)
	old := mustAllow(t, b) // the probe
	old.Failure(errDown)
	clk.Advance(20 * time.Second)
	p := mustAllow(t, b)
	if closed(p.Done()) {
		t.Error("a probe's Done is closed")
	}
	p.Success()
	if st := b.Status(); st.State != Closed {
		t.Errorf("state %v after the probe succeeded", st.State)
	}
}

// TestRelease: a call whose caller gave up changes nothing; a probe
// that does so hands the probe to the next caller at once.
func TestRelease(t *testing.T) {
	b, clk := newBreaker()
	mustAllow(t, b).Release()
	if st := b.Status(); st.State != Closed || st.Fails != 0 {
		t.Fatalf("a released call changed the breaker: %+v", st)
	}
	mustAllow(t, b).Failure(errDown)
	clk.Advance(10 * time.Second)
	p := mustAllow(t, b)
	p.Release()
	p.Failure(errDown) // reported twice: the first report counts
	q := mustAllow(t, b)
	if !q.Probe() {
		t.Fatal("after a released probe, the next call is not the probe")
	}
	q.Success()
	if st := b.Status(); st.State != Closed {
		t.Errorf("state %v", st.State)
	}
}

// TestStall: a call that runs too long opens the breaker (the others in
// flight are told) and becomes the probe, so that no second call starts
// while it runs; its late success closes the breaker, its failure opens
// it for the second back-off.
func TestStall(t *testing.T) {
	for _, succeed := range []bool{true, false} {
		b, clk := newBreaker()
		slow, other := mustAllow(t, b), mustAllow(t, b)
		if !slow.Stall(errDown) {
			t.Fatal("the stall did not open the breaker")
		}
		if !closed(other.Done()) || closed(slow.Done()) {
			t.Fatalf("Done: other %v, stalled %v; want the other told, the stalled one going on", closed(other.Done()), closed(slow.Done()))
		}
		if !slow.Probe() || b.Status().State != Probing {
			t.Fatalf("the stalled call is not the probe (state %v)", b.Status().State)
		}
		clk.Advance(time.Hour)
		if _, ok := b.Allow(); ok {
			t.Fatal("a call went through while the stalled call runs")
		}
		if slow.Stall(errDown) {
			t.Error("a probe's stall opened the breaker again")
		}
		if succeed {
			slow.Success()
			if st := b.Status(); st.State != Closed || st.Fails != 0 {
				t.Errorf("after the stalled call succeeded: %+v", st)
			}
			continue
		}
		slow.Failure(errDown)
		if st := b.Status(); st.State != Open || st.Until.Sub(clk.Now()) != 20*time.Second || st.Trips != 1 {
			t.Errorf("after the stalled call failed: %+v", st)
		}
	}
}

// TestCheck: Check says what Allow would, without taking the probe or
// counting a refusal.
func TestCheck(t *testing.T) {
	b, clk := newBreaker()
	type answer struct{ ok, probe bool }
	check := func() answer { ok, probe := b.Check(); return answer{ok, probe} }
	var got []answer
	got = append(got, check())
	mustAllow(t, b).Failure(errDown)
	got = append(got, check())
	clk.Advance(10 * time.Second)
	got = append(got, check(), check())
	p := mustAllow(t, b)
	got = append(got, check())
	p.Success()
	got = append(got, check())
	want := []answer{{true, false}, {false, false}, {true, true}, {true, true}, {false, false}, {true, false}}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(answer{})); d != "" {
		t.Errorf("Check (-want +got):\n%s", d)
	}
	if n := b.Status().Refused; n != 0 {
		t.Errorf("Check counted %d refusals", n)
	}
	b.Refuse()
	if n := b.Status().Refused; n != 1 {
		t.Errorf("Refuse counted %d refusals, want 1", n)
	}
}

// TestProbeNow: Probe takes the probe of an open breaker before its
// back-off passes, once.
func TestProbeNow(t *testing.T) {
	b, _ := newBreaker()
	if _, ok := b.Probe(); ok {
		t.Fatal("a closed breaker gave a probe")
	}
	mustAllow(t, b).Failure(errDown)
	p, ok := b.Probe()
	if !ok || !p.Probe() {
		t.Fatal("no probe from an open breaker")
	}
	if _, ok := b.Probe(); ok {
		t.Fatal("two probes at once")
	}
	p.Success()
	if b.Status().State != Closed {
		t.Error("the probe's success did not close the breaker")
	}
}

// TestConcurrent: many callers at once (run with -race); at most one
// probe at a time.
func TestConcurrent(t *testing.T) {
	b, clk := newBreaker()
	var mu sync.Mutex
	probes, maxProbes := 0, 0
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				c, ok := b.Allow()
				if !ok {
					clk.Advance(time.Second)
					continue
				}
				p := c.Probe()
				if p {
					mu.Lock()
					probes++
					maxProbes = max(maxProbes, probes)
					mu.Unlock()
					_ = b.Status() // the probe runs
					mu.Lock()
					probes-- // before the verdict, which frees the probe
					mu.Unlock()
				}
				switch (i + j) % 3 {
				case 0:
					c.Failure(errDown)
				case 1:
					c.Success()
				default:
					c.Release()
				}
				_ = b.Status()
			}
		}()
	}
	wg.Wait()
	if maxProbes > 1 {
		t.Errorf("%d probes at once", maxProbes)
	}
}
