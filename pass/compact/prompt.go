package compact

import (
	"fmt"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
)

// systemPrompt is the summarizer's instructions, in the session's own
// language, within about target tokens: the five sections of a structured
// summary (the user's requests verbatim, the goal, what was done, what is
// in progress and left, what not to forget), plus what the agent
// discovered from tool output and the files it read and changed, under
// the headings of OpenCode's template (Goal, Instructions, Discoveries,
// Accomplished, Relevant files).
func systemPrompt(target int) string {
	return fmt.Sprintf(`You summarize the earlier part of a long working session between a user and an AI coding agent, so that the agent can continue the work with only your summary and the newest messages. The agent will not see the messages you summarize again.

Write the summary in the language the user writes in. Be specific: keep file paths, function and variable names, commands, error messages, numbers and decisions exactly as they appear. Do not invent anything. If a previous summary is given, fold it in: everything it says that still matters must be in your summary.

Use exactly these sections, as Markdown headings, in this order:

## User requests
Every request and instruction the user gave, quoted word for word, oldest first.

## Goal
What the user wants in the end, and how they will judge it.

## Instructions
Constraints, preferences and decisions, by the user or the agent, and why; approaches that failed and must not be retried, with the reason each failed.

## Discoveries
What the agent learned from tool output that it will need again: how the code or system works, where things are, which commands work and which do not, error messages and their causes.

## Accomplished
What has been done, with every file created, changed or deleted and why.

## In progress and left
What was being done when the part you summarize ends, what remains, and the next step.

## Relevant files
Every file and directory the agent read or changed that still matters, one a line: its exact path and why it matters.

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
				label := "(tool result)"
				if blk.IsError {
					label = "(tool error)"
				}
				sb.WriteString(label + " " + capText(resultText(c, blk), resultCap))
			case conversation.Image:
				sb.WriteString("(an image)")
			case conversation.Document:
				sb.WriteString("(a document)")
			default:
				continue // thinking and opaque items: not for the summary
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

// capText keeps s's head and tail when it is longer than n bytes, with a
// marker saying how much went.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	h, t := headTail(s, n)
	return h + fmt.Sprintf(" [… %d bytes cut …] ", len(s)-len(h)-len(t)) + t
}

// resultText is a tool result's text as the summarizer reads it: its text
// parts, with images and documents named instead of their data.
func resultText(c *conversation.Conversation, b *conversation.Block) string {
	if len(b.Parts) == 0 {
		t, _ := c.ResultText(b)
		return string(t)
	}
	var sb strings.Builder
	for i, pt := range b.Parts {
		if i > 0 {
			sb.WriteByte('\n')
		}
		switch pt.Kind {
		case conversation.Text:
			sb.WriteString(c.String(pt.Text))
		case conversation.Image:
			sb.WriteString("(an image)")
		case conversation.Document:
			sb.WriteString("(a document)")
		default:
			sb.Write(c.Bytes(pt.Span))
		}
	}
	return sb.String()
}
