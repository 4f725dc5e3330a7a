package clearing

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPlanCold: a request that found the prompt cache cold gets an event
// the warm rules refuse (clear_at_least, payback), because no cached
// prefix is lost; a warm request does not, and a plan that does not know
// the clock (cold nil) behaves as before.
func TestPlanCold(t *testing.T) {
	msgs := session(20, 0, 1000) // the current request holds 41 messages
	warm := limits{trigger: 10_000, keepTokens: 2000, keepUses: 2, clearAtLeast: 100_000, payback: 1}
	for _, tc := range []struct {
		name string
		cold []int
		want []int // the requests (at) that got an event
	}{
		{"time plays no part", nil, nil},
		{"no request was cold", []int{}, nil},
		{"a cold request below the trigger", []int{5}, nil},
		{"a cold request above it", []int{21}, []int{21}},
		// After the event at 19 the request is back under the trigger
		// until 35.
		{"two cold requests", []int{19, 23, 37}, []int{19, 37}},
		{"the current request is cold", []int{41}, []int{41}},
		{"a point past the history is ignored", []int{43}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := warm
			lim.cold, lim.coldAtLeast = tc.cold, 1000
			got := newPlanner(1000, msgs).run(msgs, lim)
			var at []int
			for _, e := range got.events {
				at = append(at, e.at)
				if !e.cold || e.freed < lim.coldAtLeast {
					t.Errorf("event %+v: want a cold event freeing at least %d", e, lim.coldAtLeast)
				}
			}
			if d := cmp.Diff(tc.want, at); d != "" {
				t.Errorf("events at (-want +got):\n%s", d)
			}
		})
	}
}

// TestWaits: a due event waits for a cold request only while the
// session's own pace says one is likely soon enough to pay for the reads
// the wait costs, within max_wait, and never when urgent.
func TestWaits(t *testing.T) {
	lim := limits{cold: []int{}, maxWait: 10, urgent: 50_000, write: 1250, read: 100, payback: 10}
	// Freeing 10,000 tokens costs 1,000 (read units) a request waited;
	// the event rewrites 20,000 tokens: 23,000,000 now (1150 a token).
	e := event{freed: 10_000, before: 30_000}
	for _, tc := range []struct {
		name                    string
		lim                     func(limits) limits
		e                       event
		waited, requests, colds int
		want                    bool
	}{
		// (cold+1)/(requests+50) * 23,000,000 > 1,000,000 needs a rate
		// above 1/23.
		{"a session with no pause so far", nil, e, 0, 100, 0, false},
		{"a session that pauses often", nil, e, 0, 100, 20, true},
		{"long enough", nil, e, 10, 100, 20, false},
		{"urgent", nil, event{freed: 10_000, before: 50_000}, 0, 100, 20, false},
		{"the clock off", func(l limits) limits { l.cold = nil; return l }, e, 0, 100, 20, false},
		{"max_wait 0", func(l limits) limits { l.maxWait = 0; return l }, e, 0, 100, 20, false},
		{"the payback rule off", func(l limits) limits { l.payback = 0; return l }, e, 0, 100, 20, false},
		{"a small event waits for less", nil, event{freed: 100_000, before: 30_000}, 0, 100, 20, false},
	} {
		l := lim
		if tc.lim != nil {
			l = tc.lim(l)
		}
		if got := l.waits(tc.e, 20_000, tc.waited, tc.requests, tc.colds); got != tc.want {
			t.Errorf("%s: waits = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPlanWaitsForCold: in a session that pauses often, an event due at
// a warm request waits, and happens at the next cold request; when none
// comes within max_wait, it happens anyway.
func TestPlanWaitsForCold(t *testing.T) {
	msgs := session(30, 0, 1000) // requests at 1, 3, 5, ... 61
	// The newest 6,000 tokens stay: an event rewrites more than it frees.
	lim := limits{trigger: 10_000, keepTokens: 6000, keepUses: 2, clearAtLeast: 3000, coldAtLeast: 1000,
		maxWait: 3, urgent: 1_000_000, write: 1250, read: 100, payback: 10}
	first := func(cold []int) event {
		t.Helper()
		l := lim
		l.cold = cold
		pl := newPlanner(1000, msgs).run(msgs, l)
		if len(pl.events) == 0 {
			t.Fatalf("cold %v: no event", cold)
		}
		return pl.events[0]
	}
	due := first(nil).at // where the event is due without the clock
	// Cold at every request below the trigger (1,010 + 1,020 a round
	// crosses 10,000 at the ninth round, request 19): a session with
	// long pauses.
	var early []int
	for at := 1; at < 19; at += 2 {
		early = append(early, at)
	}
	if got := first([]int{due + 4}); got.at != due {
		t.Errorf("a session that never paused: first event %+v, want it where it is due, at %d", got, due)
	}
	if got := first(append(early, due+4)); got.at != due+4 || !got.cold {
		t.Errorf("a cold request two requests after the event was due: first event %+v, want a cold one at %d", got, due+4)
	}
	if got := first(early); got.at != due+2*lim.maxWait || got.cold {
		t.Errorf("no cold request within max_wait: first event %+v, want a warm one at %d", got, due+2*lim.maxWait)
	}
}

// TestPlanColdReplays: the plan of a request, replayed from a later
// request's history with the same cold requests, has the same events up
// to it (what was sent stays what was sent), whatever the clock said.
func TestPlanColdReplays(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 21))
	for trial := 0; trial < 200; trial++ {
		rounds := 5 + rng.IntN(40)
		msgs := []msgCost{{tok: 10, stubbed: 10}}
		for range rounds {
			res := 50 + rng.IntN(3000)
			msgs = append(msgs,
				msgCost{assistant: true, tok: 20, stubbed: 20, uses: 1},
				msgCost{tok: res, stubbed: stubTokens, clearable: res})
		}
		var cold []int
		for at := 1; at <= len(msgs); at += 2 {
			if rng.IntN(5) == 0 {
				cold = append(cold, at)
			}
		}
		lim := limits{trigger: 5000 + rng.IntN(10_000), keepTokens: rng.IntN(4000), keepUses: 1 + rng.IntN(3),
			clearAtLeast: 1000 + rng.IntN(8000), payback: rng.IntN(12), cold: cold, coldAtLeast: rng.IntN(3000),
			maxWait: rng.IntN(6), urgent: 10_000 + rng.IntN(40_000), write: 1250, read: 100}
		full := newPlanner(1000, msgs).run(msgs, lim)
		for n := 1; n <= len(msgs); n += 2 {
			part := newPlanner(1000, msgs[:n]).run(msgs[:n], lim)
			var want []event
			for _, e := range full.events {
				if e.at <= n {
					want = append(want, e)
				}
			}
			if d := cmp.Diff(want, part.events, cmp.AllowUnexported(event{})); d != "" {
				t.Fatalf("trial %d, request %d of %d, cold %v: events (-full +replayed):\n%s", trial, n, len(msgs), cold, d)
			}
		}
	}
}
