// Package convbuild is the frame every protocol adapter's request parser
// is built on, so that an adapter holds only what is its own wire format:
//
//   - Frame: the walk of the top-level object (model and stream read, the
//     rest handed to the adapter), the message list (a repeated key
//     replaced, the messages of an earlier parse taken over), a content
//     that is a string or an array, the pairing of tool results with
//     their calls, and shape errors wrapping protocol.ErrShape;
//   - Pool: the pooled parser's lifecycle (a parser reused from one
//     request to the next, holding no body once done);
//   - Builder: the flat arrays messages, blocks and parts are collected
//     in and handed out as the Conversation's slices;
//   - Stable: how many messages of an earlier parse a body repeats.
package convbuild

import (
	"slices"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Builder collects a parse's messages, blocks and parts. Parts are
// appended to Parts directly; a block takes the parts from a given index
// to the end, a message the blocks from a given index to the end.
type Builder struct {
	Blocks  []conversation.Block
	Parts   []conversation.Part
	Msgs    []conversation.Message
	ranges  [][2]int // per message: index range into Blocks
	pranges [][2]int // per block: index range into Parts
	out     []conversation.Message
}

// Reset empties b for a new body of n bytes, keeping the capacity of its
// arrays, or sizing them once for the body (about one block per 700
// bytes in Claude Code sessions) instead of growing them a dozen times.
func (b *Builder) Reset(n int) {
	b.Clear()
	b.out = b.out[:0]
	if c := n/1000 + 8; cap(b.Blocks) < c {
		b.Blocks = make([]conversation.Block, 0, c)
		b.pranges = make([][2]int, 0, c)
		b.Parts = make([]conversation.Part, 0, c/2)
		b.Msgs = make([]conversation.Message, 0, c/2)
		b.ranges = make([][2]int, 0, c/2)
	}
}

// Clear drops everything collected (a repeated messages key: the last one
// wins).
func (b *Builder) Clear() {
	b.Blocks, b.Parts, b.Msgs, b.ranges, b.pranges = b.Blocks[:0], b.Parts[:0], b.Msgs[:0], b.ranges[:0], b.pranges[:0]
}

// Block appends a block holding the parts from firstPart on.
func (b *Builder) Block(blk conversation.Block, firstPart int) {
	b.Blocks = append(b.Blocks, blk)
	b.pranges = append(b.pranges, [2]int{firstPart, len(b.Parts)})
}

// TruncBlocks drops the blocks from n on (not their parts).
func (b *Builder) TruncBlocks(n int) {
	b.Blocks, b.pranges = b.Blocks[:n], b.pranges[:n]
}

// DropParts drops the parts from firstPart on and makes the blocks from
// firstBlock on hold none (an object whose parts turned out not to be
// its blocks').
func (b *Builder) DropParts(firstBlock, firstPart int) {
	b.Parts = b.Parts[:firstPart]
	for i := firstBlock; i < len(b.pranges); i++ {
		b.pranges[i] = [2]int{firstPart, firstPart}
	}
}

// Message appends a message holding the blocks from firstBlock on.
func (b *Builder) Message(m conversation.Message, firstBlock int) {
	b.Msgs = append(b.Msgs, m)
	b.ranges = append(b.ranges, [2]int{firstBlock, len(b.Blocks)})
}

// Extend makes the last message hold every block appended since, and end
// at end (a message made of several wire objects).
func (b *Builder) Extend(end int) {
	last := len(b.Msgs) - 1
	b.Msgs[last].Span.End = end
	b.ranges[last][1] = len(b.Blocks)
}

// Marks counts the cache_control markers of the blocks from firstBlock on
// and of their parts.
func (b *Builder) Marks(firstBlock int) int {
	n := 0
	for bi := firstBlock; bi < len(b.Blocks); bi++ {
		if !b.Blocks[bi].CacheControl.IsZero() {
			n++
		}
		r := b.pranges[bi]
		for _, pt := range b.Parts[r[0]:r[1]] {
			if !pt.CacheControl.IsZero() {
				n++
			}
		}
	}
	return n
}

// Reuse appends the first n messages of prev, an earlier parse of the
// same bytes, as the parser would have built them. It returns where the
// last of them ends and how many cache markers they hold.
func (b *Builder) Reuse(prev *conversation.Conversation, n int) (end, marks int) {
	first := len(b.Blocks)
	for _, m := range prev.Messages[:n] {
		fb := len(b.Blocks)
		for _, blk := range m.Blocks {
			fp := len(b.Parts)
			b.Parts = append(b.Parts, blk.Parts...)
			blk.Parts = nil
			b.Block(blk, fp)
		}
		m.Blocks = nil
		b.Message(m, fb)
	}
	return prev.Messages[n-1].Span.End, b.Marks(first)
}

// Done hands the collected messages out, with their blocks and parts, as
// slices of b's arrays: they are valid until b is reset.
func (b *Builder) Done() []conversation.Message {
	for i := range b.Blocks {
		r := b.pranges[i]
		b.Blocks[i].Parts = b.Parts[r[0]:r[1]:r[1]]
	}
	b.out = slices.Grow(b.out[:0], len(b.ranges))[:len(b.ranges)]
	for i, r := range b.ranges {
		b.out[i] = b.Msgs[i]
		b.out[i].Blocks = b.Blocks[r[0]:r[1]:r[1]]
	}
	return b.out
}

// Stable returns how many leading messages of prev lie wholly within the
// bytes body shares with prev.Body, so a ParseAfter may take them from
// prev: a message counts when the message after it starts in the shared
// bytes too (so the last message of prev, which clients may re-encode,
// never counts), and when open, if not nil, does not say that the
// message could go on in body (see openai/chat).
func Stable(prev *conversation.Conversation, body []byte, open func(k, shared int) bool) int {
	if prev == nil || len(prev.Messages) < 2 {
		return 0
	}
	n := jsonscan.CommonPrefix(prev.Body, body)
	k := 0
	for k+1 < len(prev.Messages) && prev.Messages[k+1].Span.Start < n {
		if open != nil && open(k, n) {
			break
		}
		k++
	}
	return k
}
