package validate

import (
	"bytes"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// blocks aligns the blocks of two array contents: rewritten blocks must
// be original blocks, in order, with some removed.
func (d *differ) blocks(oi, rj int) {
	O, R := d.o.Messages[oi].Blocks, d.r.Messages[rj].Blocks
	if len(R) == 1 && R[0].Type == "text" && d.replaceable(oi) {
		for i := range O {
			d.removedBlock(oi, i)
		}
		d.replacement(rj, 0)
		return
	}
	// Blocks a rewritten block matches by identity are claimed: the
	// fallback below never pairs another block with them.
	claimed := make([]bool, len(O))
	for j, k := 0, 0; j < len(R); j++ {
		for x := k; x < len(O); x++ {
			if d.sameIdentity(&O[x], &R[j]) {
				claimed[x] = true
				k = x + 1
				break
			}
		}
	}
	k := 0
	for j := range R {
		rb := &R[j]
		found := -1
		for x := k; x < len(O) && found < 0; x++ {
			if d.sameIdentity(&O[x], rb) {
				found = x
			}
		}
		// Changed beyond recognition: compare with the next unclaimed
		// block of the same type, to say what changed.
		for x := k; x < len(O) && found < 0; x++ {
			if !claimed[x] && O[x].Type == rb.Type {
				found = x
			}
		}
		if found < 0 {
			if d.opts.AllowRoundTrimming && rb.Kind == conversation.Text && d.lostResults(oi) {
				d.replacement(rj, j) // a note where tool results were dropped
				continue
			}
			d.ps.add(RuleBlockAdded, bpath(rj, j), "block has no counterpart in orig.%s", mpath(oi))
			continue
		}
		for x := k; x < found; x++ {
			d.removedBlock(oi, x)
		}
		d.kept[oi][found] = true
		d.compareBlock(oi, found, rj, j)
		k = found + 1
	}
	for x := k; x < len(O); x++ {
		d.removedBlock(oi, x)
	}
	if len(O) == len(R) && k == len(O) {
		oe, re := make([]span, len(O)), make([]span, len(R))
		for i := range O {
			oe[i], re[i] = O[i].Span, R[i].Span
		}
		if !sameGaps(d.ob, d.rb, d.o.Messages[oi].Content, d.r.Messages[rj].Content, oe, re) {
			d.ps.add(RuleBlockChanged, mpath(rj)+".content", "formatting between blocks changed")
		}
	}
}

// lostResults reports whether original message oi held tool results that
// the rewritten request no longer has.
func (d *differ) lostResults(oi int) bool { return d.lost(oi, conversation.ToolResult) }

// lostRound reports whether original message oi held tool calls or
// results that the rewritten request no longer has: a trimmed round.
func (d *differ) lostRound(oi int) bool {
	return d.lost(oi, conversation.ToolCall) || d.lostResults(oi)
}

// lost reports whether original message oi held blocks of kind k (tool
// calls or results) that the rewritten request no longer has.
func (d *differ) lost(oi int, k conversation.Kind) bool {
	m := &d.o.Messages[oi]
	for i := range m.Blocks {
		if m.Blocks[i].Kind == k && !d.usedKeys[d.uniqueKey(d.ob, &m.Blocks[i])] {
			return true
		}
	}
	return false
}

// sameIdentity reports whether two blocks are the same block, as far as
// the changes a rewrite may make let one tell.
func (d *differ) sameIdentity(o, r *block) bool {
	ob, rb := d.ob, d.rb
	if o.Type != r.Type || o.Kind != r.Kind {
		return false
	}
	switch {
	case o.Kind == conversation.ToolCall, o.Kind == conversation.ToolResult:
		return bytes.Equal(o.ID.Bytes(ob), r.ID.Bytes(rb))
	case o.Kind == conversation.Text:
		return bytes.Equal(o.Text.Bytes(ob), r.Text.Bytes(rb))
	case markable(o):
		o1, o2 := outside(ob, o.Span, ccRegion(ob, o.Span, o.CacheControl))
		r1, r2 := outside(rb, r.Span, ccRegion(rb, r.Span, r.CacheControl))
		return equal2(o1, o2, r1, r2)
	}
	return bytes.Equal(o.Span.Bytes(ob), r.Span.Bytes(rb))
}

// removedBlock reports original block bi of message oi gone, unless an
// option allows it. Tool pairing is checked afterwards by rounds.
func (d *differ) removedBlock(oi, bi int) {
	blk := &d.o.Messages[oi].Blocks[bi]
	p := "orig." + bpath(oi, bi)
	switch {
	case blk.Type == "thinking" || blk.Type == "redacted_thinking":
		switch {
		case oi == d.lastAsst:
			d.ps.add(RuleThinkingChanged, p, "%s block of the latest assistant message removed", blk.Type)
		case !d.opts.AllowThinkingRemoval:
			d.ps.add(RuleBlockRemoved, p, "%s block removed (needs Options.AllowThinkingRemoval)", blk.Type)
		}
	case blk.Kind == conversation.ToolCall || blk.Kind == conversation.ToolResult:
		switch {
		case !d.opts.AllowMessageRemoval:
			d.ps.add(RuleBlockRemoved, p, "%s block removed (needs Options.AllowMessageRemoval, and goes only in whole tool rounds)", blk.Type)
		case oi >= d.tail:
			d.ps.add(RuleBlockRemoved, p, "%s block of the current turn removed", blk.Type)
		}
	case blk.Kind == conversation.Text && d.opts.AllowMessageRemoval && oi < d.tail &&
		jsonscan.Blank(blk.Text.Bytes(d.ob)) && d.lostRound(oi):
		// White space alone says nothing; a trimmed round takes it.
	default:
		t := blk.Type
		if t == "" {
			t = "untyped"
		}
		d.ps.add(RuleBlockRemoved, p, "%s block removed: only thinking blocks and whole tool rounds may go", t)
	}
}

// replacement checks the text block that stands in for a message whose
// blocks were all removed.
func (d *differ) replacement(rj, bj int) {
	rb := d.rb
	blk := &d.r.Messages[rj].Blocks[bj]
	p := bpath(rj, bj)
	if blk.Kind != conversation.Text {
		return // Request reports it
	}
	for _, m := range members(rb, blk.Span) {
		switch k := keyName(rb, m.key); k {
		case "type", "text":
		case "cache_control":
			if !d.opts.AllowCacheMarkers {
				d.ps.add(RuleCacheMarker, p, "replacement text block carries a cache_control marker (needs Options.AllowCacheMarkers)")
			}
		default:
			d.ps.add(RuleBlockAdded, p, "replacement text block has member %q: only type, text and cache_control are allowed", k)
		}
	}
}

// compareBlock compares original block bi of message oi with rewritten
// block bj of message rj, which the alignment paired.
func (d *differ) compareBlock(oi, bi, rj, bj int) {
	ob, rb := d.ob, d.rb
	o, r := &d.o.Messages[oi].Blocks[bi], &d.r.Messages[rj].Blocks[bj]
	if bytes.Equal(o.Span.Bytes(ob), r.Span.Bytes(rb)) {
		return
	}
	p := bpath(rj, bj)
	what := "block (orig." + bpath(oi, bi) + ")"
	switch {
	case o.Type != r.Type:
		d.ps.add(RuleBlockChanged, p, "block type %q became %q (orig.%s)", o.Type, r.Type, bpath(oi, bi))
		return
	case jsonscan.KindOf(ob, o.Span) != jsonscan.Object || jsonscan.KindOf(rb, r.Span) != jsonscan.Object:
		d.ps.add(RuleBlockChanged, p, "%s changed", what)
		return
	case o.Type == "thinking" || o.Type == "redacted_thinking":
		d.ps.add(RuleThinkingChanged, p, "%s %s altered: %s; a thinking block that stays must be byte-identical", o.Type, what, d.thinkingDiff(o, r))
		return
	case !markable(o) || !markable(r):
		diff := compareObjects(ob, rb, o.Span, r.Span, nil, nil, nil)
		switch diff.What {
		case "", "formatting":
			d.ps.add(RuleBlockChanged, p, "%s of type %q changed (formatting): blocks of types ctxguard does not edit must be byte-identical", what, o.Type)
		default:
			d.ps.add(RuleBlockChanged, p, "%s of type %q changed (member %q %s): blocks of types ctxguard does not edit must be byte-identical", what, o.Type, diff.Key, diff.What)
		}
		return
	}
	mayChange := func(k string) bool {
		return o.Type == "tool_result" && k == "content" || o.Type == "tool_use" && k == "input" && d.opts.AllowInputEdits
	}
	visit := func(k string, ov, rv span) {
		if k == "content" {
			d.resultMarkers(o, r, p)
		}
	}
	diff := compareObjects(ob, rb, o.Span, r.Span, mayChange, d.mayAddMarker, visit)
	if o.Type == "tool_use" && diff.Key == "input" && diff.What == "changed" {
		d.ps.add(RuleInputChanged, p, "tool_use input changed (needs Options.AllowInputEdits)")
		return
	}
	d.reportMembers(RuleBlockChanged, p, o.Type+" "+what, diff)
}

func quote(s string) string { return `"` + s + `"` }

// thinkingDiff says which part of a thinking block changed.
func (d *differ) thinkingDiff(o, r *block) string {
	switch {
	case !bytes.Equal(o.Text.Bytes(d.ob), r.Text.Bytes(d.rb)):
		return "the thinking text changed"
	case !bytes.Equal(o.Signature.Bytes(d.ob), r.Signature.Bytes(d.rb)):
		if o.Type == "redacted_thinking" {
			return "the data changed"
		}
		return "the signature changed"
	}
	diff := compareObjects(d.ob, d.rb, o.Span, r.Span, nil, nil, nil)
	if diff.What == "" || diff.What == "formatting" {
		return "formatting changed"
	}
	return "member " + quote(diff.Key) + " " + diff.What
}

// resultMarkers checks that the cache_control markers inside a
// tool_result's content survive an edit of that content.
func (d *differ) resultMarkers(o, r *block, p string) {
	no, nr := partMarkers(d.ob, o), partMarkers(d.rb, r)
	switch {
	case nr < no:
		d.ps.add(RuleCacheMarker, p, "tool_result content lost %d cache_control marker(s): markers are never removed", no-nr)
	case nr > no && !d.opts.AllowCacheMarkers:
		d.ps.add(RuleCacheMarker, p, "cache_control marker added inside tool_result content (needs Options.AllowCacheMarkers)")
	}
}

func partMarkers(b []byte, blk *block) int {
	n := 0
	for _, pt := range blk.Parts {
		if jsonscan.KindOf(b, pt.Span) != jsonscan.Object {
			continue
		}
		if cc, err := jsonscan.Lookup(b, pt.Span, "cache_control"); err == nil && jsonscan.KindOf(b, cc) != jsonscan.Null {
			n++
		}
	}
	return n
}

// rounds reports tool rounds that lost one half: a tool_use kept while its
// tool_result went, or the reverse.
func (d *differ) rounds() {
	for oi := range d.o.Messages {
		m := &d.o.Messages[oi]
		for bi := range m.Blocks {
			blk := &m.Blocks[bi]
			if blk.Kind != conversation.ToolResult || blk.Call[0] < 0 {
				continue
			}
			ci, cj := blk.Call[0], blk.Call[1]
			use, res := d.kept[ci][cj], d.kept[oi][bi]
			switch {
			case use && !res:
				d.ps.add(RuleHalfRound, "orig."+bpath(oi, bi), "tool_result removed but its tool_use (orig.%s) kept", bpath(ci, cj))
			case res && !use:
				d.ps.add(RuleHalfRound, "orig."+bpath(ci, cj), "tool_use removed but its tool_result (orig.%s) kept", bpath(oi, bi))
			}
		}
	}
}
