package clearing

import (
	"bytes"
	"strconv"
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
// message holding their results (a user message, or the tool messages
// some protocols have). A round whose results hold a file read the event
// kept (Config.Reads) is not dropped: it ends a run.
func (p *Pass) trimRuns(c *conversation.Conversation, a *analysis, pl plan) [][2]int {
	if !p.cfg.Trim.Enabled || len(pl.events) == 0 {
		return nil
	}
	msgs := c.Messages
	isRound := func(i int) bool {
		if i+1 >= len(msgs) || msgs[i].Role != conversation.RoleAssistant || (msgs[i+1].Role != conversation.RoleUser && msgs[i+1].Role != conversation.RoleTool) {
			return false
		}
		return hasKind(msgs[i].Blocks, conversation.ToolCall) && hasKind(msgs[i+1].Blocks, conversation.ToolResult)
	}
	var runs [][2]int
	from := 0
	for k, e := range pl.events {
		keeps := func(mi int) bool { // a read the event kept is in message mi
			for _, ri := range pl.kept[k] {
				if a.reads[ri].msg == mi {
					return true
				}
			}
			return false
		}
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
			if i+1 < to && isRound(i) && !keeps(i+1) {
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

// hasKind reports whether any of blocks is of kind k (by index: a Block
// is too large to copy per element).
func hasKind(blocks []conversation.Block, k conversation.Kind) bool {
	for i := range blocks {
		if blocks[i].Kind == k {
			return true
		}
	}
	return false
}

// dropRun drops the tool rounds of messages [a, b], keeping everything
// else they hold, and leaves a note naming the blob that holds the
// dropped messages (and saying how to read it: howto, Blobs.Howto). The result stays a valid, alternating conversation:
//
//   - a round whose messages hold nothing but tool calls, results and
//     thinking goes whole (both messages);
//   - a round whose assistant message also holds text keeps that message
//     with its text, and its user message keeps its own text, or becomes
//     a one-line placeholder when it had none;
//   - the last round of the run always stays, as the place of the note:
//     its user message starts with the note (then its own text, if any),
//     and its assistant message keeps its text or becomes a placeholder.
func (p *Pass) dropRun(r *pipeline.Request, a, b int, howto string) ([]splice.Edit, error) {
	c := r.Conv
	msgs := c.Messages
	whole := splice.Span{Start: msgs[a].Span.Start, End: msgs[b].Span.End}
	kept, err := p.blobs.KeepFrom(r.Context(), c.Bytes(whole), func([]byte) ([]byte, error) { return c.AppendTranscript(nil, a, b) })
	if err != nil {
		return nil, err
	}
	note := "[ctxguard dropped " + strconv.Itoa((b-a+1)/2) + " earlier tool rounds (" + callCounts(c, a, b) +
		") to keep this session small; their calls and results are in blob " + p.blobs.Name(kept.ID) + ": " + howto + "]"

	out := make([]splice.Edit, 0, b-a+1)
	for i := a; i < b; i += 2 {
		asst, user := &msgs[i], &msgs[i+1]
		aKeep, uKeep := keptBlocks(c, asst), keptBlocks(c, user)
		last := i+1 == b
		if !last && len(aKeep) == 0 && len(uKeep) == 0 {
			// The whole round goes, with the separator after it.
			out = append(out, splice.Edit{Span: splice.Span{Start: asst.Span.Start, End: msgs[i+2].Span.Start}})
			continue
		}
		d := c.Dialect
		if len(aKeep) == 0 {
			aKeep = [][]byte{textBlock(d, asst.Role, "[earlier tool work, dropped by ctxguard]")}
		}
		if last {
			uKeep = append([][]byte{textBlock(d, user.Role, note)}, uKeep...)
		} else if len(uKeep) == 0 {
			uKeep = [][]byte{textBlock(d, user.Role, "[tool results dropped by ctxguard]")}
		}
		var blob string // the note's
		if last {
			blob = kept.ID
		}
		aSpan, aRepl := d.ReplaceMessage(c, i, aKeep)
		uSpan, uRepl := d.ReplaceMessage(c, i+1, uKeep)
		out = append(out, splice.Edit{Span: aSpan, Repl: aRepl}, splice.Edit{Span: uSpan, Repl: uRepl, Blob: blob})
	}
	return out, nil
}

// callCounts lists the tools called in messages [a, b] in the order of
// their first call, each with its count: "Read ×3, Bash ×1". A name sent
// without escapes is counted by its raw bytes, so only the first call of
// each tool decodes its name.
func callCounts(c *conversation.Conversation, a, b int) string {
	type count struct {
		name string
		n    int
	}
	var counts []count
	index := map[string]int{} // name → its place in counts
	for i := a; i <= b; i++ {
		for j := range c.Messages[i].Blocks {
			blk := &c.Messages[i].Blocks[j]
			if blk.Kind != conversation.ToolCall {
				continue
			}
			k, ok := 0, false
			raw := c.Bytes(blk.Name)
			plain := len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0
			if plain {
				k, ok = index[string(raw[1:len(raw)-1])] // no allocation
			}
			if !ok {
				n := c.ToolName(blk)
				if k, ok = index[n]; !ok {
					k = len(counts)
					index[n] = k
					counts = append(counts, count{name: n})
				}
			}
			counts[k].n++
		}
	}
	var sb strings.Builder
	for i, ct := range counts {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(ct.name)
		sb.WriteString(" ×")
		sb.WriteString(strconv.Itoa(ct.n))
	}
	return sb.String()
}

// keptBlocks returns the blocks of a message that trimming keeps: all
// but tool calls, tool results and thinking, and those the Dialect drops
// (what cannot stand without the calls, such as the Responses API's
// reasoning items), in the form the Dialect keeps them in a rewritten
// message.
func keptBlocks(c *conversation.Conversation, m *conversation.Message) [][]byte {
	var out [][]byte
	for i := range m.Blocks {
		b := &m.Blocks[i]
		switch b.Kind {
		case conversation.ToolCall, conversation.ToolResult, conversation.Thinking, conversation.RedactedThinking:
			continue
		}
		if kept := c.Dialect.KeptBlock(c, m, b); kept != nil {
			out = append(out, kept)
		}
	}
	return out
}

// textBlock renders text as a block of a message of role r.
func textBlock(d conversation.Dialect, r conversation.Role, text string) []byte {
	return d.AppendText(nil, r, jsonscan.AppendQuote(nil, text), nil)
}
