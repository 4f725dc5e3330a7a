package validate

import (
	"bytes"
	"hash/maphash"
	"slices"
	"strconv"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// differ aligns a rewritten request with its original and reports what
// changed beyond what Options allows.
type differ struct {
	ob, rb []byte
	o, r   *conv
	opts   Options
	ps     *problems
	seed   maphash.Seed

	allowTop map[string]bool
	lastAsst int // the original's latest assistant message, or -1
	tail     int // first original message of the current turn

	msgsO, msgsR span     // the messages arrays, when the top level was walked that far
	matchOf      []int    // original message -> rewritten message, or -1
	kept         [][]bool // original message -> block -> still present
	usedKeys     map[string]bool
}

func newDiffer(o, r *conv, opts Options, ps *problems) *differ {
	d := &differ{ob: o.Body, rb: r.Body, o: o, r: r, opts: opts, ps: ps, seed: maphash.MakeSeed()}
	d.allowTop = map[string]bool{}
	for _, k := range opts.AllowTopLevel {
		d.allowTop[k] = true
	}
	d.lastAsst = o.LastAssistant()
	d.tail = d.lastAsst
	if d.tail < 0 {
		d.tail = len(o.Messages) - 1
	}
	d.matchOf = make([]int, len(o.Messages))
	d.kept = make([][]bool, len(o.Messages))
	for i := range o.Messages {
		d.matchOf[i] = -1
		d.kept[i] = make([]bool, len(o.Messages[i].Blocks))
	}
	return d
}

func (d *differ) run() {
	d.topLevel()
	d.messages()
	d.rounds()
}

func (d *differ) topLevel() {
	special := map[string]bool{"messages": true, "system": true, "tools": true}
	mayChange := func(k string) bool { return special[k] || d.allowTop[k] }
	mayAdd := func(k string) bool { return d.allowTop[k] }
	visit := func(k string, ov, rv span) {
		switch k {
		case "messages":
			d.msgsO, d.msgsR = ov, rv
		case "system":
			if !d.allowTop[k] {
				d.system(ov, rv)
			}
		case "tools":
			if !d.allowTop[k] {
				d.tools(ov, rv)
			}
		}
	}
	diff := compareMembers(d.ob, d.rb, d.o.Root, d.r.Root, rootMembers(d.o), rootMembers(d.r), mayChange, mayAdd, visit)
	switch diff.What {
	case "":
	case "added":
		d.ps.add(RuleTopLevel, diff.Key, "top-level member %q added (not in Options.AllowTopLevel)", diff.Key)
	case "removed":
		d.ps.add(RuleTopLevel, diff.Key, "top-level member %q removed", diff.Key)
	case "formatting":
		d.ps.add(RuleTopLevel, diff.Key, "top-level formatting changed near %q (whitespace, separators or key bytes)", diff.Key)
	default:
		d.ps.add(RuleTopLevel, diff.Key, "top-level member %q %s (not in Options.AllowTopLevel)", diff.Key, diff.What)
	}
}

// reportMembers reports a difference found inside a block-like object,
// naming cache_control changes as such.
func (d *differ) reportMembers(rule Rule, path, what string, diff objDiff) {
	switch {
	case diff.What == "":
	case diff.Key == "cache_control" && diff.What == "added":
		d.ps.add(RuleCacheMarker, path, "cache_control marker added to %s (needs Options.AllowCacheMarkers)", what)
	case diff.Key == "cache_control":
		d.ps.add(RuleCacheMarker, path, "existing cache_control marker of %s %s: markers are never changed or removed", what, diff.What)
	case diff.What == "formatting":
		d.ps.add(rule, path, "%s: formatting changed near %q (whitespace, separators or key bytes)", what, diff.Key)
	default:
		d.ps.add(rule, path, "%s: member %q %s", what, diff.Key, diff.What)
	}
}

func (d *differ) mayAddMarker(k string) bool { return k == "cache_control" && d.opts.AllowCacheMarkers }

func (d *differ) system(ov, rv span) {
	ob, rb := d.ob, d.rb
	if bytes.Equal(ov.Bytes(ob), rv.Bytes(rb)) {
		return
	}
	ok, rk := jsonscan.KindOf(ob, ov), jsonscan.KindOf(rb, rv)
	switch {
	case ok == jsonscan.Array && rk == jsonscan.Array:
		d.markedArray(ov, rv, "system", RuleSystem)
	case ok == jsonscan.String && rk == jsonscan.Array:
		d.wrapped(ov, elements(rb, rv), "system", RuleSystem)
	default:
		d.ps.add(RuleSystem, "system", "system prompt changed")
	}
}

func (d *differ) tools(ov, rv span) {
	if bytes.Equal(ov.Bytes(d.ob), rv.Bytes(d.rb)) {
		return
	}
	if jsonscan.KindOf(d.ob, ov) != jsonscan.Array || jsonscan.KindOf(d.rb, rv) != jsonscan.Array {
		d.ps.add(RuleTools, "tools", "tools changed")
		return
	}
	d.markedArray(ov, rv, "tools", RuleTools)
}

// markedArray compares two arrays of objects that may differ only by
// cache_control members added to their elements.
func (d *differ) markedArray(ov, rv span, name string, rule Rule) {
	oe, re := elements(d.ob, ov), elements(d.rb, rv)
	if len(oe) != len(re) {
		d.ps.add(rule, name, "%s has %d elements, the original %d", name, len(re), len(oe))
		return
	}
	for i := range oe {
		if bytes.Equal(oe[i].Bytes(d.ob), re[i].Bytes(d.rb)) {
			continue
		}
		p := name + "." + strconv.Itoa(i)
		if jsonscan.KindOf(d.ob, oe[i]) != jsonscan.Object || jsonscan.KindOf(d.rb, re[i]) != jsonscan.Object {
			d.ps.add(rule, p, "%s element changed", name)
			continue
		}
		d.reportMembers(rule, p, name+" element", compareObjects(d.ob, d.rb, oe[i], re[i], nil, d.mayAddMarker, nil))
	}
	if !sameGaps(d.ob, d.rb, ov, rv, oe, re) {
		d.ps.add(rule, name, "formatting between %s elements changed", name)
	}
}

// wrapped checks a string s (system prompt or message content) that the
// rewrite turned into an array of blocks: allowed only as one text block
// holding the same string bytes plus a new cache_control marker.
func (d *differ) wrapped(s span, re []span, path string, rule Rule) {
	ob, rb := d.ob, d.rb
	if len(re) != 1 || jsonscan.KindOf(rb, re[0]) != jsonscan.Object {
		d.ps.add(rule, path, "string content became an array of %d blocks", len(re))
		return
	}
	e := re[0]
	text, err := jsonscan.Lookup(rb, e, "text")
	typ, _ := jsonscan.Lookup(rb, e, "type")
	if err != nil || !jsonscan.StringIs(rb, typ, "text") || !bytes.Equal(text.Bytes(rb), s.Bytes(ob)) {
		d.ps.add(rule, path, "string content became a block with other text or type")
		return
	}
	marker := false
	for _, m := range members(rb, e) {
		switch keyName(rb, m.key) {
		case "type", "text":
		case "cache_control":
			marker = true
		default:
			d.ps.add(rule, path, "string content became a text block with member %q", keyName(rb, m.key))
			return
		}
	}
	switch {
	case !marker:
		d.ps.add(rule, path, "string content became an array without a reason (only adding a cache_control marker may wrap it)")
	case !d.opts.AllowCacheMarkers:
		d.ps.add(RuleCacheMarker, path, "cache_control marker added (needs Options.AllowCacheMarkers)")
	}
}

func (d *differ) messages() {
	om, rm := d.o.Messages, d.r.Messages
	d.align()
	if len(om) == len(rm) && !d.msgsO.IsZero() && !d.msgsR.IsZero() {
		oe, re := make([]span, len(om)), make([]span, len(rm))
		for i := range om {
			if d.matchOf[i] != i {
				return
			}
			oe[i], re[i] = om[i].Span, rm[i].Span
		}
		if !sameGaps(d.ob, d.rb, d.msgsO, d.msgsR, oe, re) {
			d.ps.add(RuleMessageChanged, "messages", "formatting between messages changed")
		}
	}
}

func (d *differ) removedMessage(i int) {
	p := "orig." + mpath(i)
	switch {
	case !d.opts.AllowMessageRemoval:
		d.ps.add(RuleMessageRemoved, p, "message removed (needs Options.AllowMessageRemoval)")
	case i >= d.tail:
		d.ps.add(RuleMessageRemoved, p, "message of the current turn removed (the latest assistant message and what follows it are kept)")
	}
}

// removable reports whether a block may vanish from its message by some
// option (thinking removal or tool-round trimming), disregarding which
// message it is in.
func removable(b *block) bool {
	switch b.Kind {
	case conversation.ToolCall, conversation.ToolResult:
		return true
	}
	return b.Type == "thinking" || b.Type == "redacted_thinking"
}

// goes reports whether a block may vanish from its message by some
// option, disregarding which message it is in: a removable block, or with
// message removal a text of white space alone, which a trimmed round may
// take with it (the Messages API refuses it as a message's only text).
// Every other block is an anchor: it disappears only with its message.
func (d *differ) goes(b []byte, blk *block) bool {
	return removable(blk) || d.opts.AllowMessageRemoval && blk.Kind == conversation.Text && jsonscan.Blank(blk.Text.Bytes(b))
}

// uniqueKey returns a key that names a removable block across the request
// (tool ids, thinking bytes), or "".
func (d *differ) uniqueKey(b []byte, blk *block) string {
	switch {
	case blk.Kind == conversation.ToolCall:
		return "u" + string(blk.ID.Bytes(b))
	case blk.Kind == conversation.ToolResult:
		return "r" + string(blk.ID.Bytes(b))
	case removable(blk):
		var h maphash.Hash
		h.SetSeed(d.seed)
		h.Write(blk.Span.Bytes(b))
		var k [9]byte
		k[0] = 't'
		for i, x := 1, h.Sum64(); i < 9; i, x = i+1, x>>8 {
			k[i] = byte(x)
		}
		return string(k[:])
	}
	return ""
}

// fingerprint hashes what identifies a message whose blocks that may go
// are gone: its members other than content, and its anchor blocks (goes)
// as identity sees them, but for block skip (-1: none). ok is false when it
// has no other anchor block.
func (d *differ) fingerprint(b []byte, m *msg, skip int) (h uint64, ok bool) {
	var x maphash.Hash
	x.SetSeed(d.seed)
	x.Write(b[m.Span.Start:m.Content.Start])
	x.WriteByte(0)
	x.Write(b[m.Content.End:m.Span.End])
	for i := range m.Blocks {
		blk := &m.Blocks[i]
		if d.goes(b, blk) || i == skip {
			continue
		}
		ok = true
		x.WriteByte(0)
		switch {
		case blk.Kind == conversation.Text:
			x.WriteByte('T')
			x.Write(blk.Text.Bytes(b))
		case markable(blk):
			x.WriteByte('M')
			p1, p2 := outside(b, blk.Span, ccRegion(b, blk.Span, blk.CacheControl))
			x.Write(p1)
			x.Write(p2)
		default:
			x.WriteByte('O')
			x.Write(blk.Span.Bytes(b))
		}
	}
	return x.Sum64(), ok
}

// markable reports whether a block may gain a cache_control marker.
func markable(b *block) bool {
	switch b.Type {
	case "text", "image", "document", "tool_use", "tool_result":
		return b.Kind != conversation.Opaque
	}
	return false
}

// replacementShaped reports whether a rewritten message could be a
// replacement text: string content or a single text block.
func replacementShaped(m *msg) bool {
	return len(m.Blocks) == 1 && m.Blocks[0].Type == "text"
}

// align pairs rewritten messages with original ones, in order, some of
// the original ones possibly removed: by the tool ids and thinking blocks
// they hold, else by their anchor blocks, else (a replacement text) with
// an original message whose blocks were all removed. Matching runs from
// the end, so that of identical original messages the older ones count as
// removed, as history is trimmed from the start. A rewritten message that
// matches nothing is compared with the original message in its place if no
// other rewritten message matches that one, to say what changed.
func (d *differ) align() {
	ob, rb := d.ob, d.rb
	om, rm := d.o.Messages, d.r.Messages
	at := map[string]int{}
	fps := map[uint64][]int{}
	for i := range om {
		for j := range om[i].Blocks {
			if k := d.uniqueKey(ob, &om[i].Blocks[j]); k != "" {
				if _, dup := at[k]; !dup {
					at[k] = i
				}
			}
		}
		if h, ok := d.fingerprint(ob, &om[i], -1); ok {
			fps[h] = append(fps[h], i)
		}
	}
	used := map[string]bool{} // unique keys present in the rewritten request
	d.usedKeys = used
	// The fingerprints a rewritten message may match an original by: its
	// own, and with round trimming also without each of its text blocks
	// (the note trimming adds to a message whose results were dropped, as
	// blocks() allows: without this, a message whose other text recurs
	// in an earlier message of the dropped run, such as "[Request
	// interrupted by user]", matched nothing, and a message before it
	// took its original).
	rfps := make([][]uint64, len(rm))
	for j := range rm {
		for k := range rm[j].Blocks {
			if key := d.uniqueKey(rb, &rm[j].Blocks[k]); key != "" {
				used[key] = true
			}
		}
		if h, ok := d.fingerprint(rb, &rm[j], -1); ok {
			rfps[j] = append(rfps[j], h)
		}
		for k := range rm[j].Blocks {
			if d.opts.AllowRoundTrimming && d.opts.AllowMessageRemoval && rm[j].Blocks[k].Kind == conversation.Text {
				if h, ok := d.fingerprint(rb, &rm[j], k); ok {
					rfps[j] = append(rfps[j], h)
				}
			}
		}
	}
	// strong finds the original message that rewritten message j is by
	// identity, before limit; late reports a match only at or after it.
	strong := func(j, limit int) (c int, late bool) {
		for k := range rm[j].Blocks {
			if key := d.uniqueKey(rb, &rm[j].Blocks[k]); key != "" {
				if x, ok := at[key]; ok {
					return x, x >= limit
				}
			}
		}
		for _, h := range rfps[j] {
			list := fps[h]
			x, _ := slices.BinarySearch(list, limit)
			if x > 0 {
				return list[x-1], false
			}
			late = late || len(list) > 0
		}
		return -1, late
	}
	claimed := make([]bool, len(om))
	for j, limit := len(rm)-1, len(om); j >= 0; j-- {
		if c, late := strong(j, limit); c >= 0 && !late {
			claimed[c] = true
			limit = c
		}
	}
	const (
		unmatched = -1
		reordered = -2
	)
	match := make([]int, len(rm))
	limit := len(om)
	for j := len(rm) - 1; j >= 0; j-- {
		m := &rm[j]
		c, late := strong(j, limit)
		if c < 0 && !late && replacementShaped(m) {
			for x := limit - 1; x >= 0 && c < 0; x-- {
				if !claimed[x] && d.allRemoved(x, used) && bytes.Equal(header(ob, &om[x]), header(rb, m)) {
					c = x
				}
			}
		}
		if c < 0 && !late {
			// No counterpart: compare with an original in its place, one
			// with the same role if there is one, to say what changed.
			for x := limit - 1; x >= 0 && !claimed[x] && c < 0; x-- {
				if bytes.Equal(header(ob, &om[x]), header(rb, m)) {
					c = x
				}
			}
			if c < 0 && limit > 0 && !claimed[limit-1] {
				c = limit - 1
			}
		}
		switch {
		case late:
			match[j] = reordered
		case c < 0:
			match[j] = unmatched
		default:
			match[j] = c
			limit = c
		}
	}
	next := 0 // the first original message not yet paired or removed
	for j := range rm {
		switch c := match[j]; c {
		case reordered:
			d.ps.add(RuleMessageAdded, mpath(j), "message matches an original message that a later message comes before: messages reordered or duplicated")
		case unmatched:
			d.ps.add(RuleMessageAdded, mpath(j), "message has no counterpart in the original")
		default:
			for x := next; x < c; x++ {
				d.removedMessage(x)
			}
			d.pair(c, j)
			next = c + 1
		}
	}
	for x := next; x < len(om); x++ {
		d.removedMessage(x)
	}
}

// header returns the bytes of a message before its content value, which
// holds its role and any members before content.
func header(b []byte, m *msg) []byte { return b[m.Span.Start:m.Content.Start] }

// allRemoved reports whether original message i has only blocks that may
// go (goes), none of which the rewritten request still holds.
func (d *differ) allRemoved(i int, used map[string]bool) bool {
	m := &d.o.Messages[i]
	if len(m.Blocks) == 0 || m.ContentString {
		return false
	}
	for j := range m.Blocks {
		if !d.goes(d.ob, &m.Blocks[j]) || used[d.uniqueKey(d.ob, &m.Blocks[j])] {
			return false
		}
	}
	return true
}

// pair compares original message oi with rewritten message rj.
func (d *differ) pair(oi, rj int) {
	ob, rb := d.ob, d.rb
	om, rm := &d.o.Messages[oi], &d.r.Messages[rj]
	d.matchOf[oi] = rj
	p := mpath(rj)
	if !bytes.Equal(ob[om.Span.Start:om.Content.Start], rb[rm.Span.Start:rm.Content.Start]) ||
		!bytes.Equal(ob[om.Content.End:om.Span.End], rb[rm.Content.End:rm.Span.End]) {
		diff := compareObjects(ob, rb, om.Span, rm.Span, func(k string) bool { return k == "content" }, nil, nil)
		if diff.What == "" {
			diff = objDiff{"formatting", "content"}
		}
		d.reportMembers(RuleMessageChanged, p, "message (orig."+mpath(oi)+")", diff)
	}
	if bytes.Equal(om.Content.Bytes(ob), rm.Content.Bytes(rb)) {
		for i := range d.kept[oi] {
			d.kept[oi][i] = true
		}
		return
	}
	ok, rk := jsonscan.KindOf(ob, om.Content), jsonscan.KindOf(rb, rm.Content)
	switch {
	case ok == jsonscan.String && rk == jsonscan.String:
		d.kept[oi][0] = true
		d.ps.add(RuleBlockChanged, p+".content", "text content changed (orig.%s)", mpath(oi))
	case ok == jsonscan.String && rk == jsonscan.Array:
		d.kept[oi][0] = true
		re := make([]span, len(rm.Blocks))
		for i := range rm.Blocks {
			re[i] = rm.Blocks[i].Span
		}
		d.wrapped(om.Content, re, p+".content", RuleBlockChanged)
	case ok == jsonscan.Array && rk == jsonscan.String:
		if d.replaceable(oi) {
			for i := range om.Blocks {
				d.removedBlock(oi, i)
			}
			return
		}
		d.ps.add(RuleBlockChanged, p+".content", "content array became a string, but not every block of orig.%s may be removed", mpath(oi))
	case ok == jsonscan.Array && rk == jsonscan.Array:
		d.blocks(oi, rj)
	default:
		d.ps.add(RuleMessageChanged, p+".content", "content changed (orig.%s)", mpath(oi))
	}
}

// replaceable reports whether every block of original message oi may go
// by some rule (goes), so that a replacement text may stand in.
func (d *differ) replaceable(oi int) bool {
	m := &d.o.Messages[oi]
	if len(m.Blocks) == 0 {
		return false
	}
	for i := range m.Blocks {
		if !d.goes(d.ob, &m.Blocks[i]) {
			return false
		}
	}
	return true
}
