package clear

import "sort"

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
}

// plan is the outcome: items in messages before clearTo are cleared;
// thinking blocks in assistant messages before thinkTo are removed.
type plan struct {
	clearTo, thinkTo int
	events           []event
}

// event is one step of the plan: at the request holding the first `at`
// messages, clearing moved to (clearTo, thinkTo) and freed tokens.
type event struct {
	at, clearTo, thinkTo, freed int
	before, after               int // request size before and after
}

// planner holds prefix sums so a request's size under any boundaries costs
// O(1).
type planner struct {
	base int
	tok  []int // tok[i] = sum of msgs[:i].tok
	clr  []int // sum of (stubbed - think): a message before both boundaries
	thk  []int // sum of think
	kept []int // sum of clearable
	uses []int // sum of uses
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
	j := -1        // newest assistant index whose suffix satisfies the keep rule
	lastA := -1    // last assistant index below the current boundary
	next := 0      // first message not yet seen
	var asst []int // assistant indexes seen, in order
	ai := 0        // index into asst of j
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
		cur := p.size(at, pl.clearTo, pl.thinkTo)
		if cur <= lim.trigger || lastA < 0 {
			continue
		}
		c := pl.clearTo
		if j > c {
			c = j
		}
		t := pl.thinkTo
		if lastA > t {
			t = lastA
		}
		if c > t {
			t = c
		}
		after := p.size(at, c, t)
		// The first change is at the old clear boundary (or, when only
		// thinking goes, at the old thinking boundary); before it the
		// request is unchanged and stays cached.
		from := pl.clearTo
		if c == pl.clearTo {
			from = pl.thinkTo
		}
		rewritten := after - p.size(from, pl.clearTo, min(pl.thinkTo, from))
		freed := cur - after
		if freed >= lim.clearAtLeast && freed > 0 && paysBack(freed, rewritten, len(asst), lim) {
			pl.events = append(pl.events, event{at: at, clearTo: c, thinkTo: t, freed: freed, before: cur, after: after})
			pl.clearTo, pl.thinkTo = c, t
		}
	}
	return pl
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
	frame  []int // frame[i] = sum of msgs[:i].frame
}

// newSizes returns the sizes of the plan pl made by p over msgs.
func newSizes(p *planner, pl plan, msgs []msgCost) *sizes {
	s := &sizes{p: p, events: pl.events, frame: make([]int, len(msgs)+1)}
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
	if k > 0 {
		c, t = s.events[k-1].clearTo, s.events[k-1].thinkTo
	}
	return s.p.size(at, c, t) - s.p.size(from, min(c, from), min(t, from)) + s.frame[at] - s.frame[from]
}
