package compact

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// scanSpan returns the facts of messages [from, to) of c, all of span
// index span. It is deterministic.
func scanSpan(c *conversation.Conversation, from, to, span int) *facts {
	from, to = max(from, 0), min(to, len(c.Messages))
	f := &facts{}
	s := scanner{c: c, f: f, span: span, results: map[[2]int]*conversation.Block{}}
	for mi := from; mi < to; mi++ {
		for bi := range c.Messages[mi].Blocks {
			b := &c.Messages[mi].Blocks[bi]
			if b.Kind == conversation.ToolResult && b.Call[0] >= 0 {
				s.results[b.Call] = b
			}
		}
	}
	for mi := from; mi < to; mi++ {
		m := &c.Messages[mi]
		for bi := range m.Blocks {
			b := &m.Blocks[bi]
			switch {
			case b.Kind == conversation.Text && m.Role == conversation.RoleUser:
				s.userText(strings.TrimSpace(c.String(b.Text)))
			case b.Kind == conversation.Text && m.Role == conversation.RoleAssistant:
				if t := strings.TrimSpace(c.String(b.Text)); t != "" {
					f.Assistant = append(f.Assistant, cutNote(note{Text: t, Span: span}, assistantCap))
				}
			case b.Kind == conversation.ToolCall:
				s.call(b, s.results[[2]int{mi, bi}])
			case (b.Kind == conversation.Image || b.Kind == conversation.Document) && m.Role != conversation.RoleAssistant:
				s.media(b.Kind, b.Span, "a user message")
			}
		}
	}
	if n := len(f.Assistant) - assistantMax; n > 0 {
		f.omit(kAssistant, n, 0, []int{span})
		f.Assistant = f.Assistant[n:]
	}
	return f
}

// scanner reads one span.
type scanner struct {
	c       *conversation.Conversation
	f       *facts
	span    int
	results map[[2]int]*conversation.Block // by the call they answer
}

// userText records a text block of a user message: the user's request, or
// what the client injected.
func (s *scanner) userText(t string) {
	if t == "" {
		return
	}
	if strings.HasPrefix(t, continuation) {
		// The client's own summary of what came before.
		s.f.Earlier = strings.TrimSpace(s.f.Earlier + "\n\n" + t)
		return
	}
	if n, ok := injectedNote(t); ok {
		if n != "" {
			s.f.Injected = append(s.f.Injected, cutNote(note{Text: n, Span: s.span}, injectedCap))
		}
		return
	}
	s.f.Requests = append(s.f.Requests, cutNote(note{Text: t, Span: s.span}, requestCap))
}

// continuation starts the summary Claude Code puts in the first message
// of a session it compacted itself.
const continuation = "This session is being continued from a previous conversation"

// injectedPrefixes start user text a client adds on its own, not the
// user's words: Claude Code's interruptions, caveats and continuation
// summaries, Codex's AGENTS.md, and ctxguard's own compaction note.
var injectedPrefixes = []string{
	"[Request interrupted", "Caveat: The messages below were generated", "# AGENTS.md instructions",
	continuation, conversation.CompactionNote,
}

// knownTags are tags that wrap injected text whether or not their name
// says so: Claude Code's system reminders, slash commands, hook output,
// shell escapes and task notifications; Codex's environment, instructions
// and skills.
var knownTags = []string{
	"system-reminder", "local-command-caveat", "local-command-stdout", "local-command-stderr", "command-name",
	"command-message", "command-args", "task-notification", "user-prompt-submit-hook", "bash-input", "bash-stdout",
	"bash-stderr", "environment_context", "user_instructions", "skill", "turn_aborted", "user_shell_command",
}

var (
	leadingTag = regexp.MustCompile(`^<([a-zA-Z][a-zA-Z0-9_-]*)>`)
	innerTag   = regexp.MustCompile(`(?s)<(command-name|command-args|summary|bash-input|status)>(.*?)</(?:command-name|command-args|summary|bash-input|status)>`)
)

// injectedNote reports whether t is text the client injected into the
// user's turn rather than what the user typed, and what of it a summary
// keeps: a slash command with its arguments, a shell escape, a task
// notification's summary, the head of anything else ("" when nothing is
// worth a note: caveats, empty output, environment context).
//
// Injected text starts with a known prefix, or with a tag that is known or
// has '-' or '_' in its name (HTML a user pastes rarely does) and is
// closed in the text.
func injectedNote(t string) (string, bool) {
	for _, p := range injectedPrefixes {
		if strings.HasPrefix(t, p) {
			switch p {
			case "[Request interrupted":
				return oneLine(t), true
			}
			return "", true
		}
	}
	m := leadingTag.FindStringSubmatch(t)
	if m == nil {
		return "", false
	}
	tag := m[1]
	if !slices.Contains(knownTags, tag) && !strings.ContainsAny(tag, "-_") || !strings.Contains(t, "</"+tag+">") {
		return "", false
	}
	inner := map[string]string{}
	for _, im := range innerTag.FindAllStringSubmatch(t, -1) {
		if _, ok := inner[im[1]]; !ok {
			inner[im[1]] = strings.TrimSpace(im[2])
		}
	}
	switch tag {
	case "command-name", "command-message":
		if name := inner["command-name"]; name != "" {
			return strings.TrimSpace("the user ran " + name + " " + inner["command-args"]), true
		}
		return "", true
	case "bash-input":
		return "the user ran the shell command `" + oneLine(inner["bash-input"]) + "`", true
	case "task-notification":
		if sum := inner["summary"]; sum != "" {
			return "task notification: " + oneLine(sum), true
		}
		return "task notification: " + inner["status"], true
	case "system-reminder", "local-command-caveat", "environment_context", "user_instructions", "skill", "command-args", "user-prompt-submit-hook":
		return "", true
	case "local-command-stdout", "local-command-stderr", "bash-stdout", "bash-stderr":
		body := strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(t, "<"+tag+">"), "</"+tag+">"))
		if body == "" {
			return "", true
		}
		return tag + ": " + oneLine(body), true
	}
	return oneLine(t), true
}

// call records what a tool call and its result tell: files, searches,
// commands, failures, images.
func (s *scanner) call(b *conversation.Block, res *conversation.Block) {
	c, f := s.c, s.f
	tool := c.ToolName(b)
	name := strings.ToLower(tool)
	var in map[string]any
	raw := c.Bytes(b.Input)
	if body, sp := c.Input(b); sp.Len() > 0 {
		raw = sp.Bytes(body)
	}
	var text string // free-form input (a custom tool's)
	if err := json.Unmarshal(raw, &in); err != nil {
		if u, err := jsonscan.Unquote(raw); err == nil {
			text = u
		}
	}
	file := firstString(in, "file_path", "path", "filePath", "notebook_path")
	switch name {
	case "read", "view", "read_file", "cat":
		f.addFile(file, opRead, s.span)
	case "write", "create", "write_file":
		f.addFile(file, opCreated, s.span)
	case "edit", "multiedit", "str_replace", "str_replace_editor", "notebookedit", "edit_file", "patch":
		f.addFile(file, opEdited, s.span)
	case "apply_patch":
		if text == "" {
			text = firstString(in, "input", "patch")
		}
		for _, op := range patchFiles(text) {
			f.addFile(op.Path, op.Op, s.span)
		}
	case "glob", "grep":
		if p := firstString(in, "pattern"); p != "" || file != "" {
			f.addSearch(search{Tool: tool, Pattern: p, Path: file, Glob: firstString(in, "glob", "include"), Span: s.span})
		}
	case "todowrite", "update_plan":
		if list := planItems(in); len(list) > 0 {
			f.Plan = list
		}
	}
	cmd := commandOf(in)
	if cmd == "" && (name == "bash" || name == "shell") {
		cmd = text
	}
	cmd = capText(strings.TrimSpace(cmd), commandCap)
	if res == nil {
		if cmd != "" {
			f.addCommand(cmd, false, s.span)
		}
		return
	}
	t, _ := c.ResultText(res)
	for _, pt := range res.Parts {
		if pt.Kind == conversation.Image || pt.Kind == conversation.Document {
			s.media(pt.Kind, pt.Span, "the result of "+tool+" "+callWhat(in, cmd, text))
		}
	}
	x := failure{Tool: tool, Command: cmd != "", Count: 1, Span: s.span}
	failed, exit, out := resultFailed(string(t), res.IsError, x.Command)
	x.Exit, x.Refused = exit, res.IsError && refused(out)
	if x.Command {
		f.addCommand(cmd, failed, s.span)
		x.What = cmd
	} else {
		x.What = callWhat(in, "", text)
		if name == "apply_patch" {
			// Codex says so in the output only.
			failed = failed || strings.HasPrefix(out, "apply_patch verification failed")
			var paths []string
			for _, op := range patchFiles(text) {
				paths = append(paths, op.Path)
			}
			x.What = capText(strings.Join(paths, ", "), whatCap)
		}
	}
	if failed || x.Refused {
		x.Reason = reasonOf(out)
		f.addFailure(x)
	}
}

// refusalPrefixes start the result Claude Code sends for a tool call the
// user refused.
var refusalPrefixes = []string{"The user doesn't want to proceed with this tool use", "The user doesn't want to take this action"}

func refused(out string) bool {
	out = strings.TrimSpace(out)
	for _, p := range refusalPrefixes {
		if strings.HasPrefix(out, p) {
			return true
		}
	}
	return false
}

// callWhat says what a call was about, in a few words: its file, pattern,
// URL, query or command, else its input in short.
func callWhat(in map[string]any, cmd, text string) string {
	if cmd != "" {
		return "`" + capText(oneLine(cmd), whatCap) + "`"
	}
	if s := firstString(in, "file_path", "path", "filePath", "notebook_path", "pattern", "url", "query", "description", "prompt"); s != "" {
		return capText(oneLine(s), whatCap)
	}
	if text != "" {
		return capText(oneLine(text), whatCap)
	}
	if len(in) == 0 {
		return ""
	}
	b, _ := json.Marshal(in) // sorted keys: deterministic
	return capText(string(b), whatCap)
}

// media records an image or document block (or result part) at sp.
func (s *scanner) media(k conversation.Kind, sp conversation.Span, where string) {
	kind := "document"
	var what string
	if k == conversation.Image {
		kind = "image"
		if d := s.c.Dialect; d != nil {
			if img, ok := d.Image(s.c, sp); ok {
				switch {
				case img.Inline:
					what = strings.TrimSpace(img.Media + " " + kb(img.Base64*3/4))
				case img.URL != "":
					what = capText(img.URL, whatCap)
				}
			}
		}
	}
	s.f.addMedia(media{Kind: kind, Where: strings.TrimSpace(where), What: what, Count: 1, Span: s.span})
}

func kb(n int) string {
	if n < 1024 {
		return strconv.Itoa(n) + " bytes"
	}
	return strconv.Itoa((n+512)/1024) + " KB"
}

func firstString(in map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := in[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// commandOf returns a shell call's command: Claude Code's and opencode's
// "command" string, Codex's "command" or "cmd" argv array or string.
func commandOf(in map[string]any) string {
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

// resultFailed reports whether a tool's result says the call failed, the
// exit code when it states one, and its output: for Codex's JSON results
// ({"output": ..., "metadata": {"exit_code": ...}}), the output inside.
// The API's error flag says so for any tool, and so does a non-zero exit
// code in Codex's metadata; a command's output also by an exit-code line
// ("Exit code 1", "Exit code: 1", ...).
func resultFailed(result string, isError, command bool) (failed bool, exit, out string) {
	out = result
	if strings.HasPrefix(result, `{"output":`) {
		var r struct {
			Output   string `json:"output"`
			Metadata struct {
				ExitCode *int `json:"exit_code"`
			} `json:"metadata"`
		}
		if json.Unmarshal([]byte(result), &r) == nil {
			out = r.Output
			if r.Metadata.ExitCode != nil {
				exit = strconv.Itoa(*r.Metadata.ExitCode)
				return isError || *r.Metadata.ExitCode != 0, exit, out
			}
		}
	}
	if !command {
		return isError, "", out
	}
	if m := exitCode.FindStringSubmatch(out); m != nil {
		exit = m[1]
		if n, err := strconv.Atoi(m[1]); err == nil && n != 0 {
			return true, exit, out
		}
	}
	return isError, exit, out
}

// errorLine matches a line of output that says what went wrong.
var errorLine = regexp.MustCompile(`(?i)(\berror|\bfail|fatal|panic|exception|traceback|denied|refused|not found|no such|cannot|can't|could not|couldn't|unable|invalid|unknown|missing|timed out|timeout|unreachable|forbidden|unauthori[sz]ed|conflict|abort|killed|segmentation|undefined|doesn't want|rejected|\bE\d{3,5}\b)`)

// informative reports whether a line of output says something: not blank,
// not an exit-code or wall-time line, not a rule of punctuation.
func informative(l string) bool {
	if l == "" || exitCode.MatchString(l) && len(l) < 40 || strings.HasPrefix(l, "Wall time") || l == "Output:" {
		return false
	}
	return strings.IndexFunc(l, func(r rune) bool {
		return r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 0x7f && r != '─' && r != '━' && r != '│' && r != '…'
	}) >= 0
}

// reasonOf returns why a call failed, from its output: the lines that
// match error patterns and the output's last informative line (the
// reason is often there, not on the first lines), in the output's order,
// at most reasonLines, each at most lineCap bytes. When fewer lines match,
// the lines before the last fill in.
func reasonOf(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if l = oneLine(l); informative(l) {
			lines = append(lines, capText(l, lineCap))
		}
	}
	if len(lines) <= reasonLines {
		return slices.Compact(lines)
	}
	keep := make([]bool, len(lines))
	keep[len(lines)-1] = true
	room := reasonLines - 1
	for i := 0; i < len(lines)-1 && room > 0; i++ {
		if errorLine.MatchString(lines[i]) {
			keep[i] = true
			room--
		}
	}
	for i := len(lines) - 2; i >= 0 && room > 0; i-- {
		if !keep[i] {
			keep[i] = true
			room--
		}
	}
	var r []string
	for i, l := range lines {
		if keep[i] && !slices.Contains(r, l) {
			r = append(r, l)
		}
	}
	return r
}

// patchFiles returns the files an apply_patch input names, with what it
// does to each.
func patchFiles(p string) []fileOp {
	var out []fileOp
	for _, l := range strings.Split(p, "\n") {
		for _, op := range []struct{ prefix, op string }{
			{"*** Add File: ", opCreated}, {"*** Update File: ", opEdited}, {"*** Delete File: ", opDeleted}, {"*** Move to: ", opCreated},
		} {
			if path, ok := strings.CutPrefix(l, op.prefix); ok && strings.TrimSpace(path) != "" {
				out = append(out, fileOp{Path: strings.TrimSpace(path), Op: op.op})
			}
		}
	}
	return out
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
			out = append(out, capText(oneLine(text), planItemCap))
		}
	}
	return out
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
