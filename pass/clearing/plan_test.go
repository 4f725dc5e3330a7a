package clearing

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// session builds msgCosts for n rounds: a user prompt, then per round an
// assistant message (think tokens of thinking, one tool call) and a user
// message with a result of res tokens.
func session(rounds, think, res int) []msgCost {
	m := []msgCost{{tok: 10, stubbed: 10}}
	for i := 0; i < rounds; i++ {
		m = append(m,
			msgCost{assistant: true, tok: 20 + think, stubbed: 20 + think, think: think, uses: 1},
			msgCost{tok: res, stubbed: stubTokens, clearable: res},
		)
	}
	return m
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		msgs   []msgCost
		lim    limits
		events []event
	}{
		{
			name: "below the trigger nothing happens",
			msgs: session(10, 0, 100),
			lim:  limits{trigger: 10_000, keepTokens: 200, keepUses: 1, clearAtLeast: 100},
		},
		{
			// Every result is 1000 tokens; at 20 messages the request of 10
			// rounds (1000 base + 10 + 10*1020 = 11210) crosses 10000...
			name: "one batch, newest kept",
			msgs: session(12, 0, 1000),
			lim:  limits{trigger: 10_000, keepTokens: 2000, keepUses: 2, clearAtLeast: 3000},
			events: []event{
				// Request before assistant message 19 (9 rounds + prompt:
				// 1000+10+9*1020 = 10190 > trigger). Keep rule: the newest
				// 2 rounds (messages 15..18) hold 2 uses and 2000 tokens,
				// so clearing moves to 15 and frees 7 results.
				{at: 19, clearTo: 15, thinkTo: 17, freed: 7 * (1000 - stubTokens), before: 10190, after: 10190 - 7*(1000-stubTokens)},
			},
		},
		{
			name: "clear_at_least holds events back",
			msgs: session(12, 0, 1000),
			lim:  limits{trigger: 10_000, keepTokens: 2000, keepUses: 2, clearAtLeast: 100_000},
		},
		{
			name: "thinking goes with an event, the latest stays",
			msgs: session(6, 500, 100),
			lim:  limits{trigger: 3000, keepTokens: 0, keepUses: 6, clearAtLeast: 1000},
			events: []event{
				// Request before message 9: 1000+10+4*520+4*100 = 3490 > 3000.
				// Keep 6 uses keeps everything (only 4 rounds); thinking
				// of messages 1, 3, 5 goes (message 7 is the latest).
				{at: 9, clearTo: 0, thinkTo: 7, freed: 1500, before: 3490, after: 1990},
				// The current request (6 rounds) is over again; the thinking
				// of messages 7 and 9 goes, 11 is the latest.
				{at: 13, clearTo: 1, thinkTo: 11, freed: 1000, before: 3230, after: 2230},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := 1000
			got := newPlanner(base, tc.msgs).run(tc.msgs, tc.lim)
			if d := cmp.Diff(tc.events, got.events, cmp.AllowUnexported(event{})); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
		})
	}
}

// TestPlanMonotone: over growing prefixes of a session, the boundaries of
// the plan never move back, and a plan for a prefix is the start of the
// plan for the whole session.
func TestPlanMonotone(t *testing.T) {
	msgs := session(200, 300, 700)
	for i := range msgs {
		if i%7 == 0 {
			msgs[i].tok += 3000 // a few big ones
			if !msgs[i].assistant {
				msgs[i].clearable += 3000
			}
		}
	}
	lim := limits{trigger: 30_000, keepTokens: 8000, keepUses: 3, clearAtLeast: 10_000}
	full := newPlanner(1000, msgs).run(msgs, lim)
	if len(full.events) < 3 {
		t.Fatalf("only %d events; the test needs several", len(full.events))
	}
	prevC, prevT := 0, 0
	for n := 1; n <= len(msgs); n++ {
		pl := newPlanner(1000, msgs[:n]).run(msgs[:n], lim)
		if pl.clearTo < prevC || pl.thinkTo < prevT {
			t.Fatalf("prefix %d: boundaries (%d,%d) moved back from (%d,%d)", n, pl.clearTo, pl.thinkTo, prevC, prevT)
		}
		prevC, prevT = pl.clearTo, pl.thinkTo
		if d := cmp.Diff(full.events[:len(pl.events)], pl.events, cmp.AllowUnexported(event{}), cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("prefix %d plan is not a prefix of the full plan:\n%s", n, d)
		}
		for _, e := range pl.events {
			if e.freed < lim.clearAtLeast {
				t.Fatalf("event %+v frees less than clear_at_least", e)
			}
		}
	}
}

// TestPlanPayback: with payback on, every event repays its cache cost
// within the session's length so far, and short sessions see fewer events.
func TestPlanPayback(t *testing.T) {
	msgs := session(300, 200, 900)
	lim := limits{trigger: 20_000, keepTokens: 5000, keepUses: 2, clearAtLeast: 5000}
	p := newPlanner(1000, msgs)
	free := p.run(msgs, lim)
	lim.payback = 10
	paid := p.run(msgs, lim)
	if len(paid.events) == 0 || len(paid.events) >= len(free.events) {
		t.Fatalf("events: %d with payback, %d without", len(paid.events), len(free.events))
	}
	c, th := 0, 0
	for _, e := range paid.events {
		from := c
		if e.clearTo == c {
			from = th
		}
		rewritten := e.after - p.size(from, c, min(th, from))
		requests := e.at / 2 // one assistant message per round
		if back := (1.25*float64(rewritten) - 0.1*float64(rewritten+e.freed)) / (0.1 * float64(e.freed)); back > float64(min(10, requests)) {
			t.Errorf("event %+v repays after %.1f requests, session so far %d", e, back, requests)
		}
		c, th = e.clearTo, e.thinkTo
	}
}

func TestPaysBack(t *testing.T) {
	openai := limits{write: 1000, read: 100}
	for _, tc := range []struct {
		freed, rewritten, requests, payback int
		prices                              limits // zero: Anthropic's
		want                                bool
	}{
		{1000, 1000, 11, 11, limits{}, true},  // repays after 10.5 requests
		{1000, 1000, 11, 10, limits{}, false}, // not within 10
		{1000, 1000, 10, 20, limits{}, false}, // nor within the 10 requests made so far
		{16000, 31800, 23, 10, limits{}, false},
		{40000, 31800, 23, 10, limits{}, true},
		{1, 1_000_000, 1, 0, limits{}, true}, // rule off
		{1000, 1000, 11, 11, limits{write: 1250, read: 100}, true},
		// OpenAI has no write premium: (1*r - 0.1*(r+f)) / (0.1*f)
		{1000, 1000, 11, 10, openai, true},      // repays after 8 requests
		{1000, 1000, 7, 10, openai, false},      // not within the 7 made so far
		{30000, 31800, 23, 10, limits{}, false}, // after 11.2 requests on Anthropic,
		{30000, 31800, 23, 10, openai, true},    // after 8.5 on OpenAI
		{16000, 31800, 23, 10, openai, false},   // after 16.9
	} {
		lim := tc.prices
		lim.payback = tc.payback
		if got := paysBack(tc.freed, tc.rewritten, tc.requests, lim); got != tc.want {
			t.Errorf("paysBack(%d, %d, %d, %+v) = %v", tc.freed, tc.rewritten, tc.requests, lim, got)
		}
	}
}

// TestSizes: the sizes the plan tells later passes are the sizes it
// replayed: at each event's request, the size after the event; at every
// request, the messages under the boundaries in effect there, and a part
// of a request is the whole minus its head.
func TestSizes(t *testing.T) {
	msgs := session(60, 50, 700)
	lim := limits{trigger: 8_000, keepTokens: 1500, keepUses: 2, clearAtLeast: 2000}
	p := newPlanner(0, msgs)
	pl := p.run(msgs, lim)
	if len(pl.events) < 2 {
		t.Fatalf("%d events: the test checks too little", len(pl.events))
	}
	s := newSizes(p, pl, msgs)
	for _, e := range pl.events {
		if got := s.Size(e.at, 0); got != e.after {
			t.Errorf("request %d: size %d, the plan replayed %d", e.at, got, e.after)
		}
	}
	c, th, k := 0, 0, 0
	for at := 0; at <= len(msgs); at++ {
		for k < len(pl.events) && pl.events[k].at <= at {
			c, th = pl.events[k].clearTo, pl.events[k].thinkTo
			k++
		}
		whole := p.size(at, c, th)
		if got := s.Size(at, 0); got != whole {
			t.Fatalf("request %d: size %d, want %d", at, got, whole)
		}
		for from := 0; from <= at; from += 7 {
			// Each message as the boundaries at request at leave it.
			want := 0
			for i := from; i < at; i++ {
				m := msgs[i]
				switch {
				case i < c:
					want += m.stubbed - m.think
				case i < th:
					want += m.tok - m.think
				default:
					want += m.tok
				}
			}
			if got := s.Size(at, from); got != want {
				t.Fatalf("request %d from %d: size %d, want %d", at, from, got, want)
			}
		}
	}
}

// TestHold: which reads an event keeps past its clear boundary.
func TestHold(t *testing.T) {
	// Reads at messages 2, 4, ..., 20 of 500 tokens each, keys by letter.
	reads := func(keys string) []read {
		var out []read
		for i, k := range keys {
			out = append(out, read{item: i, msg: 2 + 2*i, tok: 500, saved: 500 - stubTokens, key: uint64(k)})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		keys    string
		nr      int   // reads in the request
		c       int   // the new clear boundary
		clearTo int   // the old one
		kept    []int // kept by the previous event
		budget  int
		want    []int
	}{
		{name: "budget off", keys: "abcdef", nr: 6, c: 20, budget: 0},
		{name: "all fit", keys: "abcdef", nr: 6, c: 20, budget: 3000, want: []int{0, 1, 2, 3, 4, 5}},
		{name: "the newest that fit", keys: "abcdef", nr: 6, c: 20, budget: 1999, want: []int{3, 4, 5}},
		// The two newest are past c: they count, and are not kept by
		// the rule (nothing clears them).
		{name: "newest past the boundary count", keys: "abcdef", nr: 6, c: 10, budget: 2000, want: []int{2, 3}},
		// A re-read (the same key) supersedes the older read, which
		// neither counts nor stays.
		{name: "re-read supersedes", keys: "abcaba", nr: 6, c: 20, budget: 1500, want: []int{2, 4, 5}},
		{name: "superseded is not kept even within budget", keys: "aab", nr: 3, c: 20, budget: 5000, want: []int{1, 2}},
		// Reads after nr are not in the request yet.
		{name: "only the request's reads", keys: "abcdef", nr: 3, c: 20, budget: 1000, want: []int{1, 2}},
		// Cleared reads (before the old boundary and not kept) neither
		// count nor come back.
		{name: "cleared stays cleared", keys: "abcdef", nr: 6, c: 20, clearTo: 9, kept: []int{1}, budget: 5000, want: []int{1, 4, 5}},
		{name: "once one does not fit, no older one", keys: "abcdef", nr: 6, c: 20, clearTo: 9, kept: []int{0, 2}, budget: 1000, want: []int{4, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &planner{reads: reads(tc.keys)}
			got := p.hold(nil, tc.nr, tc.c, tc.clearTo, tc.kept, tc.budget, nextSame(p.reads[:tc.nr]))
			if d := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("kept (-want +got):\n%s", d)
			}
		})
	}
}

// readSession is session(rounds, 0, res) where every third result is a
// read of its own file of tok tokens, and every assistant message holds
// text tokens of text (which clearing keeps).
func readSession(rounds, res, tok, text int) ([]msgCost, []read) {
	msgs := session(rounds, 0, res)
	for i := range msgs {
		if msgs[i].assistant {
			msgs[i].tok += text
			msgs[i].stubbed += text
		}
	}
	var reads []read
	for i := 2; i < len(msgs); i += 6 {
		msgs[i].tok, msgs[i].clearable = tok, tok
		reads = append(reads, read{item: (i - 2) / 2, msg: i, tok: tok, saved: tok - stubTokens, key: uint64(i)})
	}
	return msgs, reads
}

// TestPlanReads: events keep the newest reads within the budget, the
// plan's sizes count them, and a read once cleared is never kept again.
func TestPlanReads(t *testing.T) {
	msgs, reads := readSession(120, 600, 900, 0)
	lim := limits{trigger: 12_000, keepTokens: 1000, keepUses: 1, clearAtLeast: 3000, readTokens: 2800}
	p := newPlanner(0, msgs)
	p.reads = reads
	pl := p.run(msgs, lim)
	if len(pl.events) < 3 {
		t.Fatalf("%d events: the test checks too little", len(pl.events))
	}
	released := 0
	for k, e := range pl.events {
		var was []int
		from := 0
		if k > 0 {
			was, from = pl.kept[k-1], pl.events[k-1].clearTo
		}
		total := 0
		for _, i := range pl.kept[k] {
			r := reads[i]
			if r.msg >= e.clearTo {
				t.Errorf("event %d keeps read %d at message %d, past its boundary %d", k, i, r.msg, e.clearTo)
			}
			if _, ok := slices.BinarySearch(was, i); !ok && r.msg < from {
				t.Errorf("event %d keeps read %d, which an earlier event cleared", k, i)
			}
			total += r.tok
		}
		if total > lim.readTokens {
			t.Errorf("event %d keeps %d tokens of reads, over the budget %d", k, total, lim.readTokens)
		}
		if len(pl.kept[k]) == 0 {
			t.Errorf("event %d keeps no read", k)
		}
		for _, i := range was {
			if _, ok := slices.BinarySearch(pl.kept[k], i); !ok {
				released++
			}
		}
	}
	if released == 0 {
		t.Error("no event cleared a read an earlier one kept")
	}
	// The sizes the plan replayed count the kept reads.
	s := newSizes(p, pl, msgs)
	for _, e := range pl.events {
		if got := s.Size(e.at, 0); got != e.after {
			t.Errorf("request %d: size %d, the plan replayed %d", e.at, got, e.after)
		}
	}
	// Without the budget the same session keeps nothing and frees more.
	lim.readTokens = 0
	none := p.run(msgs, lim)
	for k := range none.kept {
		if len(none.kept[k]) > 0 {
			t.Fatalf("no budget, but event %d keeps %v", k, none.kept[k])
		}
	}
}

// TestPlanReadsPayback: a read an earlier event kept deep in the history
// is cleared only by an event that repays rewriting the request from
// it; until then it stays, over the budget.
func TestPlanReadsPayback(t *testing.T) {
	msgs, reads := readSession(150, 600, 900, 400)
	lim := limits{trigger: 12_000, keepTokens: 1000, keepUses: 1, clearAtLeast: 3000, readTokens: 2800, payback: 10}
	p := newPlanner(0, msgs)
	p.reads = reads
	pl := p.run(msgs, lim)
	if len(pl.events) < 2 {
		t.Fatalf("%d events: the test checks too little", len(pl.events))
	}
	over := false
	for k, e := range pl.events {
		c, th := 0, 0
		var was []int
		if k > 0 {
			c, th, was = pl.events[k-1].clearTo, pl.events[k-1].thinkTo, pl.kept[k-1]
		}
		from := c
		if e.clearTo == c {
			from = th
		}
		if i, ok := firstMissing(was, pl.kept[k]); ok {
			from = min(from, reads[i].msg)
		}
		rewritten := e.after - p.size(from, min(c, from), min(th, from)) - p.saved(was, 0, from)
		requests := e.at / 2
		if back := (1.25*float64(rewritten) - 0.1*float64(rewritten+e.freed)) / (0.1 * float64(e.freed)); back > float64(min(10, requests)) {
			t.Errorf("event %+v repays after %.1f requests, session so far %d", e, back, requests)
		}
		total := 0
		for _, i := range pl.kept[k] {
			total += reads[i].tok
		}
		over = over || total > lim.readTokens
	}
	if !over {
		t.Error("no event kept reads over the budget: the test does not reach the case it is for")
	}
}

func TestRestore(t *testing.T) {
	for _, tc := range []struct {
		keep, kept []int
		k          int
		want       []int
	}{
		{nil, nil, 3, nil},
		{[]int{4, 7}, []int{1, 2, 4}, 0, []int{4, 7}},
		{[]int{4, 7}, []int{1, 2, 4}, 1, []int{1, 4, 7}},
		{[]int{4, 7}, []int{1, 2, 4}, 2, []int{1, 2, 4, 7}},
		{[]int{4, 7}, []int{1, 2, 4}, 9, []int{1, 2, 4, 7}},
		{[]int{1}, []int{1, 5, 6}, 1, []int{1, 5}},
		{nil, []int{3, 8}, 1, []int{3}},
	} {
		if got := restore(nil, tc.keep, tc.kept, tc.k); !slices.Equal(got, tc.want) {
			t.Errorf("restore(%v, %v, %d) = %v, want %v", tc.keep, tc.kept, tc.k, got, tc.want)
		}
	}
}
