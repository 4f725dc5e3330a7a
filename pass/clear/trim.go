package clear

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/splice"
)

// trimRuns returns the runs of tool rounds to drop, as [first, last]
// message indexes: maximal sequences of rounds inside the range one event
// cleared ([previous clearTo, clearTo)), outside the newest KeepRounds
// rounds. A round is an assistant message with tool calls followed by the
// user message holding their results.
func (p *Pass) trimRuns(c *conversation.Conversation, pl plan) [][2]int {
	if !p.cfg.Trim.Enabled || len(pl.events) == 0 {
		return nil
	}
	msgs := c.Messages
	isRound := func(i int) bool {
		if i+1 >= len(msgs) || msgs[i].Role != conversation.RoleAssistant || msgs[i+1].Role != conversation.RoleUser {
			return false
		}
		return slices.ContainsFunc(msgs[i].Blocks, func(b conversation.Block) bool { return b.Kind == conversation.ToolCall }) &&
			slices.ContainsFunc(msgs[i+1].Blocks, func(b conversation.Block) bool { return b.Kind == conversation.ToolResult })
	}
	var runs [][2]int
	from := 0
	for _, e := range pl.events {
		// The newest KeepRounds rounds of the event's own request stay
		// (judged at the event, so later turns never move a run).
		limit := e.at
		for i, kept := e.at-2, 0; i >= 0 && kept < p.cfg.Trim.KeepRounds; i-- {
			if isRound(i) {
				kept++
				limit = i
			}
		}
		to := min(e.clearTo, limit)
		start, i := -1, from
		for i < to {
			if i+1 < to && isRound(i) {
				if start < 0 {
					start = i
				}
				i += 2
				continue
			}
			if start >= 0 {
				runs = append(runs, [2]int{start, i - 1})
				start = -1
			}
			i++
		}
		if start >= 0 {
			runs = append(runs, [2]int{start, i - 1})
		}
		from = max(from, e.clearTo)
	}
	return runs
}

// dropRun replaces messages [a, b] (whole tool rounds) with two messages:
// the assistant's text blocks, in order, and a user message with a note
// naming the blob that holds the dropped messages, followed by any text
// the user messages held.
func (p *Pass) dropRun(r *pipeline.Request, a, b int) (splice.Edit, error) {
	c := r.Conv
	msgs := c.Messages[a : b+1]
	whole := splice.Span{Start: msgs[0].Span.Start, End: msgs[len(msgs)-1].Span.End}
	raw := c.Bytes(whole)
	kept, err := p.blobs.KeepFrom(raw, func(raw []byte) ([]byte, error) {
		return append(append([]byte{'['}, raw...), ']'), nil
	})
	if err != nil {
		return splice.Edit{}, err
	}
	tools := map[string]int{}
	var names []string
	var asst, user [][]byte
	rounds := 0
	for _, m := range msgs {
		if m.Role == conversation.RoleAssistant {
			rounds++
		}
		for i := range m.Blocks {
			blk := &m.Blocks[i]
			switch {
			case blk.Kind == conversation.ToolCall:
				n := c.ToolName(blk)
				if tools[n] == 0 {
					names = append(names, n)
				}
				tools[n]++
			case blk.Kind == conversation.Text && m.Role == conversation.RoleAssistant:
				asst = append(asst, textBlock(c, m, blk))
			case blk.Kind == conversation.Text && m.Role == conversation.RoleUser:
				user = append(user, textBlock(c, m, blk))
			}
		}
	}
	var calls []string
	for _, n := range names {
		calls = append(calls, fmt.Sprintf("%s ×%d", n, tools[n]))
	}
	note := fmt.Sprintf("[ctxguard dropped %d earlier tool rounds (%s) to keep this session small; their calls and results are in blob %s: %s]",
		rounds, strings.Join(calls, ", "), kept.ID, p.blobs.Howto())
	if len(asst) == 0 {
		asst = append(asst, []byte(`{"type":"text","text":"[earlier tool work, dropped by ctxguard]"}`))
	}
	out := []byte(`{"role":"assistant","content":[`)
	out = appendJoined(out, asst)
	out = append(out, `]},{"role":"user","content":[{"type":"text","text":`...)
	out = jsonscan.AppendQuote(out, note)
	out = append(out, '}')
	for _, u := range user {
		out = append(append(out, ','), u...)
	}
	out = append(out, "]}"...)
	return splice.Edit{Span: whole, Repl: out}, nil
}

// textBlock returns a text block as a block object without its
// cache_control (a plain string content becomes one).
func textBlock(c *conversation.Conversation, m conversation.Message, b *conversation.Block) []byte {
	if m.ContentString || !b.CacheControl.IsZero() {
		return append(append([]byte(`{"type":"text","text":`), c.Bytes(b.Text)...), '}')
	}
	return c.Bytes(b.Span)
}

func appendJoined(dst []byte, parts [][]byte) []byte {
	for i, p := range parts {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, p...)
	}
	return dst
}
