package clearing

import (
	"slices"
	"sort"
)

// This file holds the decision function: given per-message token counts of
// a conversation, it replays the requests the client sent (request k holds
// every message before assistant message k, and the current request holds
// them all) and decides where clearing events happened. It is pure: the
// same counts and settings give the same plan in every process.

// msgCost summarizes one message for planning. All counts are tokens.
type msgCost struct {
	assistant bool
	tok       int // the message as sent when nothing is cleared
	stubbed   int // the message with its clearable items replaced by stubs
	think     int // thinking blocks that an event may remove
	clearable int // tokens of clearable items (for the keep rule)
	uses      int // tool calls in the message
	// frame is what the message's JSON costs beyond what the counts
	// above measure (keys, ids, names), from parts that never change
	// between requests: only HistorySizer adds it, the plan does not.
	frame int
}

// limits are the planner's settings, resolved to tokens for one model.
type limits struct {
	trigger      int // a request above this size may fire an event
	keepTokens   int // newest clearable tokens kept
	keepUses     int // newest tool calls kept
	clearAtLeast int // an event must free at least this much
	// payback: an event must repay its cache cost within this many
	// requests (and within as many as the session has made); 0
	// disables the rule. See paysBack.
	payback int
	// write and read are the cache prices, in thousandths of the base
	// input price (pipeline.Env).
	write, read int
	// readTokens: the newest file reads, up to this many tokens, stay
	// past the clear boundary (see planner.hold); 0 keeps none.
	readTokens int
	// cold lists the requests (by `at`) that found the prompt cache
	// cold, ascending (pipeline.Env.Cold); nil: time plays no part (and
	// no event waits), empty: none was cold. At a cold request an event
	// needs only to free coldAtLeast; a due event at a warm request
	// below urgent may wait up to maxWait requests for a cold one (Cold,
	// waits).
	cold                         []int
	coldAtLeast, maxWait, urgent int
}

// isCold reports whether request at found the cache cold.
func (lim *limits) isCold(at int) bool {
	_, ok := slices.BinarySearch(lim.cold, at)
	return ok
}

// waits reports whether an event e that is due at a warm request, having
// waited `waited` requests already, waits one more for a cold request, in
// a session that has made `requests` requests so far, `cold` of them cold.
// It waits while the cache's cost decides events (lim.payback), while it
// is not urgent (e.before below urgent), within maxWait,
// and while the wait pays in expectation: the chance that the next request
// is cold (the session's own rate so far, from a prior of one in
// coldPrior) times what the event costs now (its rewritten tokens written
// instead of read) exceeds what one more request pays for the tokens it
// would have freed (read at the cache-read price).
func (lim *limits) waits(e event, rewritten, waited, requests, cold int) bool {
	if lim.cold == nil || lim.payback <= 0 || lim.maxWait <= 0 || waited >= lim.maxWait || e.before >= lim.urgent {
		// With the payback rule off, what an event costs the cache does
		// not decide when it happens.
		return false
	}
	w, r := int64(lim.write), int64(lim.read)
	if w <= 0 || r <= 0 {
		w, r = 1250, 100
	}
	// (cold+1)/(requests+coldPrior) * (w-r)*rewritten > r*freed
	return int64(cold+1)*(w-r)*int64(rewritten) > int64(requests+coldPrior)*r*int64(e.freed)
}

// coldPrior: before a session shows its own pace, one request in this
// many is taken to find its cache cold (2% of the requests in the
// project's Claude Code sessions come more than 5 minutes after the one
// before).
const coldPrior = 50

// read is a file read the plan may keep past the clear boundary: a
// clearable tool result of a file-reading tool (Config.Reads).
type read struct {
	item  int    // its index in analysis.items
	msg   int    // its message
	tok   int    // its tokens as sent
	saved int    // what clearing it saves (tok less a stub's)
	key   uint64 // its call (tool and input): a later read with the same key supersedes it
}

// plan is the outcome: items in messages before clearTo are cleared,
// except the reads the latest event kept; thinking blocks in assistant
// messages before thinkTo are removed.
type plan struct {
	clearTo, thinkTo int
	events           []event
	// kept[k] lists the reads (indexes into planner.reads, ascending) that
	// events[k] kept although they lie before its clearTo. Each is a
	// subset of the one before plus reads of the event's new region: a
	// read once cleared stays cleared.
	kept [][]int
}

// keeps reports whether event k of the plan kept read i.
func (pl *plan) keeps(k, i int) bool {
	if k < 0 || k >= len(pl.kept) {
		return false
	}
	_, ok := slices.BinarySearch(pl.kept[k], i)
	return ok
}

// event is one step of the plan: at the request holding the first `at`
// messages, clearing moved to (clearTo, thinkTo) and freed tokens.
type event struct {
	at, clearTo, thinkTo, freed int
	before, after               int // request size before and after
	cold                        bool
}

// planner holds prefix sums so a request's size under any boundaries costs
// O(1).
type planner struct {
	base  int
	reads []read // the conversation's file reads, in message order
	tok   []int  // tok[i] = sum of msgs[:i].tok
	clr   []int  // sum of (stubbed - think): a message before both boundaries
	thk   []int  // sum of think
	kept  []int  // sum of clearable
	uses  []int  // sum of uses
}

func newPlanner(base int, msgs []msgCost) *planner {
	n := len(msgs)
	p := &planner{base: base, tok: make([]int, n+1), clr: make([]int, n+1), thk: make([]int, n+1), kept: make([]int, n+1), uses: make([]int, n+1)}
	for i, m := range msgs {
		p.tok[i+1] = p.tok[i] + m.tok
		p.clr[i+1] = p.clr[i] + m.stubbed - m.think
		p.thk[i+1] = p.thk[i] + m.think
		p.kept[i+1] = p.kept[i] + m.clearable
		p.uses[i+1] = p.uses[i] + m.uses
	}
	return p
}

// size is the request holding msgs[:n] with items cleared before c and
// thinking removed before t (c <= t <= n).
func (p *planner) size(n, c, t int) int {
	return p.base + p.clr[c] + (p.tok[t] - p.tok[c]) - (p.thk[t] - p.thk[c]) + (p.tok[n] - p.tok[t])
}

// run replays the session's requests and returns the plan for msgs.
func (p *planner) run(msgs []msgCost, lim limits) plan {
	var pl plan
	n := len(msgs)
	var kept []int             // the reads the latest event kept
	keptSaved := 0             // what clearing them would save
	nr := 0                    // reads in messages before at
	later := nextSame(p.reads) // for hold
	var held, scratch []int    // candidate kept sets
	j := -1                    // newest assistant index whose suffix satisfies the keep rule
	lastA := -1                // last assistant index below the current boundary
	next := 0                  // first message not yet seen
	var asst []int             // assistant indexes seen, in order
	ai := 0                    // index into asst of j
	waited := 0                // warm requests a due event has waited for a cold one
	colds := 0                 // cold requests so far
	for at := 1; at <= n; at++ {
		// A request ended before every assistant message. The current
		// request counts too unless it ends with an assistant message (a
		// prefill): then its history is that of the request before it,
		// and judging it separately would make a decision the next
		// request could not reproduce.
		if at < n && !msgs[at].assistant || at == n && msgs[n-1].assistant {
			continue
		}
		for ; next < at; next++ {
			if msgs[next].assistant {
				asst = append(asst, next)
				lastA = next
			}
		}
		// Advance j to the newest assistant index whose suffix [j, at)
		// still keeps keepTokens and keepUses.
		for ai < len(asst) {
			cand := asst[ai]
			if p.kept[at]-p.kept[cand] >= lim.keepTokens && p.uses[at]-p.uses[cand] >= lim.keepUses {
				j = cand
				ai++
				continue
			}
			break
		}
		for nr < len(p.reads) && p.reads[nr].msg < at {
			nr++
		}
		cold := lim.isCold(at)
		cur := p.size(at, pl.clearTo, pl.thinkTo) + keptSaved
		if cur <= lim.trigger || lastA < 0 {
			waited = 0
			if cold {
				colds++
			}
			continue
		}
		c, t := boundaries(pl, j, lastA)
		// The event keeps what the read rule keeps (hold), but clearing a
		// read an earlier event kept rewrites the request from that read
		// on, which the event must repay: it clears those the rule lets
		// go from the oldest one it can afford on, and keeps the older
		// ones.
		try := attempt{p: p, lim: &lim, pl: &pl, at: at, c: c, t: t, cur: cur, n: n, requests: len(asst), cold: cold, kept: kept}
		held = p.hold(held[:0], nr, c, pl.clearTo, kept, lim.readTokens, later)
		keep := held
		e, rewrote, ok := try.event(keep)
		if !ok {
			// Keep the oldest reads the rule lets go, one more at a
			// time, until the event repays or keeps them all.
			lets := countMissing(kept, keep)
			for k := 1; !ok && k <= lets; k++ {
				scratch = restore(scratch[:0], held, kept, k)
				keep = scratch
				e, rewrote, ok = try.event(keep)
			}
		}
		wait := ok && !cold && lim.waits(e, rewrote, waited, len(asst), colds)
		if cold {
			colds++
		}
		if wait {
			waited++
			continue
		}
		waited = 0
		if ok {
			keep = slices.Clone(keep) // held and scratch are reused
			pl.events = append(pl.events, e)
			pl.kept = append(pl.kept, keep)
			pl.clearTo, pl.thinkTo = c, t
			kept, keptSaved = keep, p.saved(keep, 0, n)
		}
	}
	return pl
}

// attempt is a candidate event of run's at request at, moving the
// boundaries of plan pl to (c, t): the request is cur tokens, the session
// has made `requests` requests, kept are the reads the latest event kept.
type attempt struct {
	p                *planner
	lim              *limits
	pl               *plan
	at, c, t, cur, n int
	requests         int
	cold             bool
	kept             []int
}

// event returns the event that keeps the reads of keep, the tokens it
// makes the API write again, and whether the rules let it happen: it
// frees at least clear_at_least and repays its cache write (paysBack), or,
// at a cold request, frees at least the cold floor.
func (a *attempt) event(keep []int) (e event, rewritten int, ok bool) {
	p, pl := a.p, a.pl
	after := p.size(a.at, a.c, a.t) + p.saved(keep, 0, a.n)
	// The first change is at the old clear boundary (or, when only
	// thinking goes, at the old thinking boundary), or at the first read
	// kept before and cleared now; before it the request is unchanged and
	// stays cached.
	from := pl.clearTo
	if a.c == pl.clearTo {
		from = pl.thinkTo
	}
	if i, ok := firstMissing(a.kept, keep); ok {
		from = min(from, p.reads[i].msg)
	}
	rewritten = after - p.size(from, min(pl.clearTo, from), min(pl.thinkTo, from)) - p.saved(a.kept, 0, from)
	freed := a.cur - after
	e = event{at: a.at, clearTo: a.c, thinkTo: a.t, freed: freed, before: a.cur, after: after, cold: a.cold}
	if a.cold {
		// No cache to lose: no payback to make.
		return e, rewritten, freed >= a.lim.coldAtLeast && freed > 0
	}
	return e, rewritten, freed >= a.lim.clearAtLeast && freed > 0 && paysBack(freed, rewritten, a.requests, *a.lim)
}

// hold appends to out the reads an event keeps (indexes into p.reads,
// ascending) when, at the request holding the first nr reads, it moves
// the clear boundary from clearTo to c; kept are those the previous event
// kept.
//
// The rule: walking from the newest read back, a read that a newer one
// with the same key supersedes (the same call again: its answer is the
// newer text) is passed over, and so is one already cleared; every other
// read counts its tokens, and those before c are kept as long as the
// count stays within budget. Once it does not, no older read is kept.
// The newest reads count whether or not they are past c, so budget caps
// the file text a request carries. The outcome depends on the history
// alone, and only reads still sent (kept, or at or past clearTo) can be
// kept: what was cleared stays cleared.
//
// next[i] is the index of the next read with read i's key (len(p.reads)
// if none): read i is superseded in the request when next[i] < nr.
func (p *planner) hold(out []int, nr, c, clearTo int, kept []int, budget int, next []int) []int {
	if budget <= 0 || nr == 0 {
		return out
	}
	start, used := len(out), 0
	// The reads still sent, newest first: those at or past clearTo, then
	// the kept ones.
	i, k := nr-1, len(kept)-1
	for {
		if i >= 0 && p.reads[i].msg < clearTo {
			i = -1
		}
		var r int
		switch {
		case i >= 0:
			r, i = i, i-1
		case k >= 0:
			r, k = kept[k], k-1
		default:
			slices.Reverse(out[start:])
			return out
		}
		if next[r] < nr {
			continue // superseded
		}
		if used += p.reads[r].tok; used > budget {
			slices.Reverse(out[start:])
			return out
		}
		if p.reads[r].msg < c {
			out = append(out, r)
		}
	}
}

// nextSame returns, for each read, the index of the next read with the
// same key, or len(reads).
func nextSame(reads []read) []int {
	next := make([]int, len(reads))
	last := make(map[uint64]int, len(reads))
	for i := len(reads) - 1; i >= 0; i-- {
		next[i] = len(reads)
		if j, ok := last[reads[i].key]; ok {
			next[i] = j
		}
		last[reads[i].key] = i
	}
	return next
}

// firstMissing returns the first element of a (ascending) that b
// (ascending) lacks.
func firstMissing(a, b []int) (int, bool) {
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok {
			return x, true
		}
	}
	return 0, false
}

// restore appends to dst the reads of keep (ascending) and the oldest k
// reads of kept (ascending) that keep lacks, ascending, once.
func restore(dst, keep, kept []int, k int) []int {
	for len(keep) > 0 || len(kept) > 0 {
		switch {
		case len(kept) == 0 || len(keep) > 0 && keep[0] < kept[0]:
			dst, keep = append(dst, keep[0]), keep[1:]
		case len(keep) > 0 && keep[0] == kept[0]:
			dst, keep, kept = append(dst, keep[0]), keep[1:], kept[1:]
		case k > 0:
			dst, kept, k = append(dst, kept[0]), kept[1:], k-1
		default:
			kept = kept[1:]
		}
	}
	return dst
}

// saved is what clearing the reads of kept in messages [from, to) saves.
func (p *planner) saved(kept []int, from, to int) int {
	n := 0
	for _, i := range kept {
		if m := p.reads[i].msg; m >= from && m < to {
			n += p.reads[i].saved
		}
	}
	return n
}

// paysBack reports whether an event that frees `freed` tokens and makes the
// API write `rewritten` tokens again is worth it in a session that has
// made `requests` requests so far, at the cache prices of lim.
//
// With prompt caching, the rewritten part costs a cache write (W: 1.25x
// on Anthropic, 1x on OpenAI, which has no write premium) instead of a
// cache read (R: 0.1x) once, and every later request reads `freed` fewer
// tokens (saving R each). So the event repays itself after
//
//	(W*rewritten - R*(rewritten+freed)) / (R*freed)
//
// requests. How long the session will go on is unknown; it must repay
// within lim.payback requests, and within as many requests as the session
// has made so far (a session that has run n requests tends to run about
// as many more). Short sessions, where an event could only cost money,
// therefore see none. lim.payback <= 0 turns the rule off.
func paysBack(freed, rewritten, requests int, lim limits) bool {
	if lim.payback <= 0 {
		return true
	}
	w, r := int64(lim.write), int64(lim.read)
	if w <= 0 || r <= 0 {
		w, r = 1250, 100
	}
	horizon := int64(min(lim.payback, requests))
	// In integers: W*r - R*(r+f) <= R*f*horizon.
	return w*int64(rewritten)-r*int64(rewritten+freed) <= r*int64(freed)*horizon
}

// sizes tells later passes the size of each earlier request as the plan
// rewrote it (pipeline.HistorySizer): the messages of request `at` under
// the clearing boundaries in effect at that request.
type sizes struct {
	p      *planner
	events []event
	kept   [][]int // plan.kept
	frame  []int   // frame[i] = sum of msgs[:i].frame
}

// newSizes returns the sizes of the plan pl made by p over msgs.
func newSizes(p *planner, pl plan, msgs []msgCost) *sizes {
	s := &sizes{p: p, events: pl.events, kept: pl.kept, frame: make([]int, len(msgs)+1)}
	for i, m := range msgs {
		s.frame[i+1] = s.frame[i] + m.frame
	}
	return s
}

// Size implements pipeline.HistorySizer.
func (s *sizes) Size(at, from int) int {
	// The boundaries of the last event at or before request at.
	k := sort.Search(len(s.events), func(i int) bool { return s.events[i].at > at })
	c, t := 0, 0
	var kept []int
	if k > 0 {
		c, t = s.events[k-1].clearTo, s.events[k-1].thinkTo
		kept = s.kept[k-1]
	}
	return s.p.size(at, c, t) - s.p.size(from, min(c, from), min(t, from)) + s.p.saved(kept, from, at) + s.frame[at] - s.frame[from]
}

// boundaries returns the clear and thinking boundaries of an event after
// plan pl, whose newest assistant message within the keep rule is j and
// whose last assistant message below the request's end is lastA: neither
// boundary moves back, and thinking goes at least as far as clearing.
func boundaries(pl plan, j, lastA int) (c, t int) {
	c = max(pl.clearTo, j)
	t = max(pl.thinkTo, lastA, c)
	return c, t
}

// countMissing returns how many of the reads in kept are not in keep
// (both ascending).
func countMissing(kept, keep []int) int {
	n := 0
	for _, i := range kept {
		if _, in := slices.BinarySearch(keep, i); !in {
			n++
		}
	}
	return n
}
