package compact

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/ctxguard/ctxguard/conversation"
)

var errEmpty = errors.New("compact: the summarizer answered with no text")

// systemPrompt is the summarizer's instructions: the five sections of a
// structured summary (OpenCode's and Claude Code's), in the session's own
// language, within about target tokens.
func systemPrompt(target int) string {
	return fmt.Sprintf(`You summarize the earlier part of a long working session between a user and an AI coding agent, so that the agent can continue the work with only your summary and the newest messages. The agent will not see the messages you summarize again.

Write the summary in the language the user writes in. Be specific: keep file paths, function names, commands, error messages, numbers and decisions exactly as they appear. Do not invent anything. If a previous summary is given, fold it in: everything it says that still matters must be in your summary.

Use exactly these five sections:

1. User requests (verbatim): every request and instruction the user gave, quoted word for word, oldest first.
2. Goal and expected result: what the user wants in the end, and how they will judge it.
3. Work done: what has been done, including every file created or changed and why.
4. Work in progress and work left: what was being done when the part you summarize ends, and what remains.
5. Important context: failed approaches not to retry (and why they failed), constraints, key decisions, and anything else the agent must not forget.

Keep it under about %d tokens. Answer with the summary only.`, target)
}

// Caps on what the summarizer reads of one block, so that its input stays
// within a small model's window: a tool result's head and tail, a tool
// call's input.
const (
	resultCap = 3000
	inputCap  = 1500
	textCap   = 12000
	inputMax  = 480_000 // bytes of transcript at most (~120K tokens)
)

// userPrompt renders the summarizer's input: the previous summary and the
// messages [from, to) of c, each block capped.
func userPrompt(prev string, c *conversation.Conversation, from, to int) string {
	var b strings.Builder
	if prev != "" {
		b.WriteString("<previous-summary>\n")
		b.WriteString(prev)
		b.WriteString("\n</previous-summary>\n\n")
	}
	b.WriteString("<conversation>\n")
	var parts []string
	for i := from; i < to; i++ {
		m := &c.Messages[i]
		var sb strings.Builder
		sb.WriteString("[" + m.Role.String() + "]\n")
		for j := range m.Blocks {
			blk := &m.Blocks[j]
			switch blk.Kind {
			case conversation.Text:
				sb.WriteString(capText(c.String(blk.Text), textCap))
			case conversation.ToolCall:
				in := c.Bytes(blk.Input)
				if body, sp := c.Input(blk); sp.Len() > 0 {
					in = sp.Bytes(body)
				}
				sb.WriteString("(tool call " + c.ToolName(blk) + ") " + capText(string(in), inputCap))
			case conversation.ToolResult:
				t, _ := c.ResultText(blk)
				label := "(tool result)"
				if blk.IsError {
					label = "(tool error)"
				}
				sb.WriteString(label + " " + capText(string(t), resultCap))
			default:
				continue // thinking, images and opaque items: not for the summary
			}
			sb.WriteByte('\n')
		}
		parts = append(parts, sb.String())
	}
	// Over the cap, the middle goes: the start (the task) and the end
	// (the latest work) matter most.
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	if total > inputMax {
		head, tail := 0, len(parts)
		used := 0
		for head < tail && used+len(parts[head]) <= inputMax/3 {
			used += len(parts[head])
			head++
		}
		for tail > head && used+len(parts[tail-1]) <= inputMax {
			used += len(parts[tail-1])
			tail--
		}
		omitted := tail - head
		parts = append(parts[:head:head], append([]string{fmt.Sprintf("[... %d messages omitted here ...]\n", omitted)}, parts[tail:]...)...)
	}
	for _, p := range parts {
		b.WriteString(p)
		b.WriteByte('\n')
	}
	b.WriteString("</conversation>\n\nWrite the summary now.")
	return b.String()
}

// capText keeps s's head and tail when it is longer than n bytes.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	h, t := n*2/3, n/3
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	ts := len(s) - t
	for ts < len(s) && !utf8.RuneStart(s[ts]) {
		ts++
	}
	return s[:h] + fmt.Sprintf("\n[... %d bytes cut ...]\n", ts-h) + s[ts:]
}
