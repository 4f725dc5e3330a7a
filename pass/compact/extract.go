package compact

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/tokens"
)

// extractHeader starts every extractive summary; Extract recognizes its
// own earlier output by it when folding.
const extractHeader = "This is an extractive summary of the earlier conversation, written by ctxguard without a model: the user's requests word for word, the files and commands the agent worked with, its latest plan and its latest messages."

// Section headings of an extractive summary, in order.
const (
	hRequests  = "## User requests (verbatim)"
	hFiles     = "## Files"
	hCommands  = "## Commands run"
	hTodo      = "## Latest plan"
	hAssistant = "## Latest assistant messages"
	hEarlier   = "## Earlier summary"
)

// Caps on one item of a section, in bytes.
const (
	requestCap   = 2000
	commandCap   = 300
	errorCap     = 300
	assistantCap = 1500
	assistantMax = 3 // latest assistant texts kept
)

// extract is an extractive summary being built: each section a list of
// items, oldest first.
type extract struct {
	requests  []string
	read      []string
	created   []string
	edited    []string
	deleted   []string
	commands  []string
	todo      []string
	assistant []string
	earlier   string // a previous summary Extract did not write
}

// Extract returns the LLM-free summary of messages [from, to) of c, with
// prev (the previous summary, or "") folded in, in at most budget tokens
// (as tokens.EstimateText counts them). It is deterministic: the same
// messages and prev give the same text.
//
// It keeps, in this order: every user request verbatim (each capped, head
// and tail kept; injected context such as system reminders left out); the
// files read, created, edited and deleted, from tool inputs and patches;
// the commands run, each with its error when it failed; the latest todo
// list or plan; the latest assistant texts. Over budget, it gives up, in
// turn: older assistant texts, older commands, the middle of long user
// requests (never the first and the last request whole), older files.
func Extract(c *conversation.Conversation, from, to int, prev string, budget int) string {
	var e extract
	e.fold(prev)
	e.scan(c, max(from, 0), min(to, len(c.Messages)))
	return e.fit(max(budget, 50))
}

// fold takes what a previous summary said: the sections of one Extract
// wrote, or the whole of any other as an earlier summary.
func (e *extract) fold(prev string) {
	prev = strings.TrimSpace(prev)
	if prev == "" {
		return
	}
	if !strings.HasPrefix(prev, extractHeader) {
		e.earlier = prev
		return
	}
	for _, sec := range splitSections(prev) {
		switch sec.head {
		case hRequests:
			e.requests = append(e.requests, splitItems(sec.body, "\n---\n")...)
		case hFiles:
			for _, line := range strings.Split(sec.body, "\n") {
				kind, list, ok := strings.Cut(line, ": ")
				if !ok {
					continue
				}
				files := strings.Split(list, ", ")
				switch kind {
				case "Read":
					e.read = append(e.read, files...)
				case "Created":
					e.created = append(e.created, files...)
				case "Edited":
					e.edited = append(e.edited, files...)
				case "Deleted":
					e.deleted = append(e.deleted, files...)
				}
			}
		case hCommands:
			e.commands = append(e.commands, splitItems(sec.body, "\n")...)
		case hTodo:
			e.todo = splitItems(sec.body, "\n")
		case hAssistant:
			e.assistant = append(e.assistant, splitItems(sec.body, "\n---\n")...)
		case hEarlier:
			e.earlier = sec.body
		}
	}
}

type section struct{ head, body string }

// splitSections cuts an extractive summary at its "## " headings.
func splitSections(s string) []section {
	var out []section
	for _, part := range strings.Split(s, "\n\n## ")[1:] {
		head, body, _ := strings.Cut(part, "\n")
		out = append(out, section{head: "## " + head, body: strings.TrimSpace(body)})
	}
	return out
}

func splitItems(s, sep string) []string {
	var out []string
	for _, it := range strings.Split(s, sep) {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, strings.TrimPrefix(it, "- "))
		}
	}
	return out
}

// scan reads messages [from, to).
func (e *extract) scan(c *conversation.Conversation, from, to int) {
	// Tool results by the call they answer, for commands' errors.
	type res struct {
		text    string
		isError bool
	}
	results := map[[2]int]res{}
	for mi := from; mi < to; mi++ {
		for bi := range c.Messages[mi].Blocks {
			b := &c.Messages[mi].Blocks[bi]
			if b.Kind == conversation.ToolResult && b.Call[0] >= 0 {
				t, _ := c.ResultText(b)
				results[b.Call] = res{text: string(t), isError: b.IsError}
			}
		}
	}
	for mi := from; mi < to; mi++ {
		m := &c.Messages[mi]
		for bi := range m.Blocks {
			b := &m.Blocks[bi]
			switch {
			case b.Kind == conversation.Text && m.Role == conversation.RoleUser:
				if t := strings.TrimSpace(c.String(b.Text)); t != "" && !injected(t) {
					e.requests = append(e.requests, t)
				}
			case b.Kind == conversation.Text && m.Role == conversation.RoleAssistant:
				if t := strings.TrimSpace(c.String(b.Text)); t != "" {
					e.assistant = append(e.assistant, capText(t, assistantCap))
				}
			case b.Kind == conversation.ToolCall:
				r, ok := results[[2]int{mi, bi}]
				e.call(c, b, r.text, r.isError, ok)
			}
		}
	}
	if n := len(e.assistant); n > assistantMax {
		e.assistant = e.assistant[n-assistantMax:]
	}
}

// injectedPrefixes start user text a client adds on its own, not the
// user's request: Claude Code's reminders and command echoes, Codex's
// environment and instructions.
var injectedPrefixes = []string{
	"<system-reminder>", "<environment_context>", "<user_instructions>", "# AGENTS.md", "<local-command-stdout>",
	"<local-command-stderr>", "<command-name>", "<command-message>", "Caveat: The messages below were generated",
	"[Request interrupted", "<user-prompt-submit-hook>", conversation.CompactionNote,
}

func injected(t string) bool {
	for _, p := range injectedPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// call records what a tool call tells: files and commands.
func (e *extract) call(c *conversation.Conversation, b *conversation.Block, result string, isError, answered bool) {
	name := strings.ToLower(c.ToolName(b))
	var in map[string]any
	raw := c.Bytes(b.Input)
	if body, sp := c.Input(b); sp.Len() > 0 {
		raw = sp.Bytes(body)
	}
	var text string // free-form input (a custom tool's)
	if err := json.Unmarshal(raw, &in); err != nil {
		if s, err := jsonscan.Unquote(raw); err == nil {
			text = s
		}
	}
	file := firstString(in, "file_path", "path", "filePath", "notebook_path")
	switch name {
	case "read", "view", "read_file", "cat":
		e.read = appendNew(e.read, file)
	case "write", "create", "write_file":
		e.created = appendNew(e.created, file)
	case "edit", "multiedit", "str_replace", "str_replace_editor", "notebookedit", "edit_file", "patch":
		e.edited = appendNew(e.edited, file)
	case "apply_patch":
		patch := text
		if patch == "" {
			patch = firstString(in, "input", "patch")
		}
		e.patch(patch)
	case "todowrite", "update_plan":
		if list := planItems(in); len(list) > 0 {
			e.todo = list
		}
	}
	cmd := command(in)
	if cmd == "" && (name == "bash" || name == "shell") {
		cmd = text
	}
	if cmd == "" {
		return
	}
	line := "`" + oneLine(capText(cmd, commandCap)) + "`"
	if answered {
		if failed, msg := failure(result, isError); failed {
			line += " — failed: " + oneLine(capText(msg, errorCap))
		}
	}
	e.commands = append(e.commands, line)
}

func firstString(in map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := in[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// command returns a shell call's command: Claude Code's and opencode's
// "command" string, Codex's "command" or "cmd" argv array or string.
func command(in map[string]any) string {
	for _, k := range []string{"command", "cmd"} {
		switch v := in[k].(type) {
		case string:
			return v
		case []any:
			var parts []string
			for _, p := range v {
				if s, ok := p.(string); ok {
					parts = append(parts, s)
				}
			}
			// Codex wraps commands as ["bash", "-lc", "..."].
			if len(parts) == 3 && (parts[1] == "-lc" || parts[1] == "-c") {
				return parts[2]
			}
			return strings.Join(parts, " ")
		}
	}
	return ""
}

var exitCode = regexp.MustCompile(`(?i)(?:exit code|exit_code|exited with code|exit status)["=: ]+(-?\d+)`)

// failure reports whether a command's result says it failed, and the
// first lines of what it said.
func failure(result string, isError bool) (bool, string) {
	failed := isError
	if m := exitCode.FindStringSubmatch(result); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil && n != 0 {
			failed = true
		}
	}
	if !failed {
		return false, ""
	}
	var lines []string
	for _, l := range strings.Split(result, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || exitCode.MatchString(l) && len(l) < 40 || strings.HasPrefix(l, "Wall time") || strings.HasPrefix(l, "Output:") {
			continue
		}
		lines = append(lines, l)
		if len(lines) == 2 {
			break
		}
	}
	return true, strings.Join(lines, " | ")
}

// patch records the files an apply_patch input names.
func (e *extract) patch(p string) {
	for _, l := range strings.Split(p, "\n") {
		switch {
		case strings.HasPrefix(l, "*** Add File: "):
			e.created = appendNew(e.created, strings.TrimSpace(strings.TrimPrefix(l, "*** Add File: ")))
		case strings.HasPrefix(l, "*** Update File: "):
			e.edited = appendNew(e.edited, strings.TrimSpace(strings.TrimPrefix(l, "*** Update File: ")))
		case strings.HasPrefix(l, "*** Delete File: "):
			e.deleted = appendNew(e.deleted, strings.TrimSpace(strings.TrimPrefix(l, "*** Delete File: ")))
		}
	}
}

// planItems reads a todo list (TodoWrite's and opencode's "todos") or a
// plan (Codex's update_plan "plan").
func planItems(in map[string]any) []string {
	var out []string
	for _, k := range []string{"todos", "plan"} {
		list, _ := in[k].([]any)
		for _, it := range list {
			m, _ := it.(map[string]any)
			text := firstString(m, "content", "step", "text", "title")
			if text == "" {
				continue
			}
			if st := firstString(m, "status"); st != "" {
				text = "[" + st + "] " + text
			}
			out = append(out, oneLine(capText(text, 300)))
		}
	}
	return out
}

func appendNew(list []string, s string) []string {
	if s == "" {
		return list
	}
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// render writes the summary.
func (e *extract) render() string {
	var b strings.Builder
	b.WriteString(extractHeader)
	if e.earlier != "" {
		b.WriteString("\n\n" + hEarlier + "\n" + e.earlier)
	}
	if len(e.requests) > 0 {
		b.WriteString("\n\n" + hRequests + "\n")
		b.WriteString(strings.Join(e.requests, "\n---\n"))
	}
	if len(e.read)+len(e.created)+len(e.edited)+len(e.deleted) > 0 {
		b.WriteString("\n\n" + hFiles)
		for _, f := range []struct {
			kind  string
			files []string
		}{{"Created", e.created}, {"Edited", e.edited}, {"Deleted", e.deleted}, {"Read", e.read}} {
			if len(f.files) > 0 {
				b.WriteString("\n" + f.kind + ": " + strings.Join(f.files, ", "))
			}
		}
	}
	if len(e.commands) > 0 {
		b.WriteString("\n\n" + hCommands + "\n- " + strings.Join(e.commands, "\n- "))
	}
	if len(e.todo) > 0 {
		b.WriteString("\n\n" + hTodo + "\n- " + strings.Join(e.todo, "\n- "))
	}
	if len(e.assistant) > 0 {
		b.WriteString("\n\n" + hAssistant + "\n" + strings.Join(e.assistant, "\n---\n"))
	}
	return b.String()
}

// fit renders the summary within budget tokens, giving things up in a
// fixed order until it fits.
func (e *extract) fit(budget int) string {
	for i := range e.requests {
		e.requests[i] = capText(e.requests[i], requestCap)
	}
	fits := func() (string, bool) {
		s := e.render()
		return s, tokens.EstimateText(s) <= budget
	}
	if s, ok := fits(); ok {
		return s
	}
	steps := []func() bool{
		func() bool { return drop(&e.assistant, 1) },
		func() bool { return drop(&e.commands, 1+len(e.commands)/8) },
		func() bool { return e.shortenRequests() },
		func() bool { return drop(&e.read, 1+len(e.read)/8) },
		func() bool { return e.shortenEarlier() },
		func() bool { return drop(&e.todo, 1) },
		func() bool { return dropMiddle(&e.requests) },
		func() bool {
			return drop(&e.edited, 1+len(e.edited)/8) || drop(&e.created, 1+len(e.created)/8) || drop(&e.deleted, 1)
		},
	}
	for _, step := range steps {
		for step() {
			if s, ok := fits(); ok {
				return s
			}
		}
	}
	// Still over: the head of what is left.
	s := e.render()
	return capText(s, budget*3)
}

// drop removes the n oldest items of list, reporting whether any went.
func drop(list *[]string, n int) bool {
	if len(*list) == 0 {
		return false
	}
	*list = (*list)[min(n, len(*list)):]
	return true
}

// shortenRequests halves the longest user request other than the first
// and the last, down to 200 bytes.
func (e *extract) shortenRequests() bool {
	best := -1
	for i := 1; i < len(e.requests)-1; i++ {
		if len(e.requests[i]) > 200 && (best < 0 || len(e.requests[i]) > len(e.requests[best])) {
			best = i
		}
	}
	if best < 0 {
		return false
	}
	e.requests[best] = capText(e.requests[best], len(e.requests[best])/2)
	return true
}

// dropMiddle removes the request after the first (never the first and
// the last).
func dropMiddle(list *[]string) bool {
	if len(*list) <= 2 {
		return false
	}
	*list = append((*list)[:1], (*list)[2:]...)
	return true
}

func (e *extract) shortenEarlier() bool {
	if len(e.earlier) <= 400 {
		return false
	}
	e.earlier = capText(e.earlier, len(e.earlier)/2)
	return true
}
