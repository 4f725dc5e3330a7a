package replay

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/tools/transcript"
)

// Tool families, by lower-cased name.
var (
	shellTools  = setOf("bash", "shell", "shell_command", "exec_command", "local_shell", "run_shell_command", "container.exec")
	fileTools   = setOf("read", "write", "edit", "multiedit", "notebookedit", "notebookread", "read_file", "write_file", "replace", "edit_file", "create", "view", "str_replace_editor", "str_replace_based_edit_tool")
	patchTools  = setOf("apply_patch", "patch")
	searchTools = setOf("glob", "grep", "search_file_content", "find_files")
)

func setOf(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// call adds the facts of the tool call at block bi of message mi, and of
// its result when one of the messages before to holds it.
func (fs *factSet) call(c *conversation.Conversation, mi, bi, to int) {
	b := &c.Messages[mi].Blocks[bi]
	name := strings.ToLower(c.ToolName(b))
	if name == "" && b.Type == "local_shell_call" {
		name = "local_shell"
	}
	in, text := callInput(c, b)
	switch {
	case fileTools[name]:
		for _, k := range []string{"file_path", "filePath", "path", "notebook_path", "absolute_path"} {
			if s, ok := in[k].(string); ok && s != "" {
				fs.add(FactFile, s, false)
				break
			}
		}
		if list, ok := in["paths"].([]any); ok { // Gemini CLI's read_many_files
			for _, p := range list {
				if s, ok := p.(string); ok {
					fs.add(FactFile, s, false)
				}
			}
		}
	case patchTools[name]:
		fs.patchFiles(text)
		for _, k := range []string{"input", "patch", "patchText"} {
			if s, ok := in[k].(string); ok {
				fs.patchFiles(s)
			}
		}
	case searchTools[name]:
		for _, k := range []string{"pattern", "path", "glob", "include", "dir_path"} {
			if s, ok := in[k].(string); ok {
				fs.add(FactSearch, s, false)
			}
		}
	}
	shell := shellTools[name]
	if shell {
		cmd := commandOf(in)
		if cmd == "" && name == "local_shell" {
			cmd = localShellCommand(c, b)
		}
		if cmd == "" {
			cmd = text
		}
		fs.addHead(FactCommand, headLine(strings.TrimSpace(cmd)))
		fs.patchFiles(cmd)
	}
	res, ok := resultOf(c, mi, bi, to)
	if !ok || strings.HasPrefix(res.text, transcript.RepairNote) {
		return
	}
	out, code, hasCode := unwrapOutput(res.text, shell)
	if words, ok := refusal(out); ok {
		fs.addHead(FactError, words)
		return
	}
	failed := res.isError || hasCode && code != 0
	if shell {
		if failed {
			fs.addHead(FactFailure, lastInformative(out))
		}
		return
	}
	if failed || errorMarked(out) {
		t := strings.ReplaceAll(strings.ReplaceAll(out, "<tool_use_error>", ""), "</tool_use_error>", "")
		fs.addHead(FactError, firstInformative(t))
	}
}

// patchFiles adds the files a patch's headers name.
func (fs *factSet) patchFiles(p string) {
	if !strings.Contains(p, "*** ") {
		return
	}
	for _, l := range strings.Split(p, "\n") {
		l = strings.TrimSpace(l)
		for _, h := range []string{"*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"} {
			if f, ok := strings.CutPrefix(l, h); ok {
				fs.add(FactFile, strings.TrimSpace(f), false)
			}
		}
	}
}

// callInput decodes a tool call's input: a JSON object, or free-form text
// (a custom tool's input string).
func callInput(c *conversation.Conversation, b *conversation.Block) (map[string]any, string) {
	raw := c.Bytes(b.Input)
	if body, sp := c.Input(b); sp.Len() > 0 {
		raw = sp.Bytes(body)
	}
	var in map[string]any
	if len(raw) == 0 {
		return nil, ""
	}
	if err := json.Unmarshal(raw, &in); err == nil {
		return in, ""
	}
	if s, err := jsonscan.Unquote(raw); err == nil {
		return nil, s
	}
	return nil, ""
}

// commandOf returns a shell call's command: a "command" or "cmd" string,
// or an argv (["bash", "-lc", script] gives the script). Like the rest of
// the extraction it is written apart from package compact's extractive
// summary on purpose: a measure that shared the summarizer's reading of
// tool calls could not see that reading's mistakes.
func commandOf(in map[string]any) string {
	for _, k := range []string{"command", "cmd"} {
		switch v := in[k].(type) {
		case string:
			return v
		case []any:
			return argv(v)
		}
	}
	return ""
}

func argv(v []any) string {
	var parts []string
	for _, p := range v {
		if s, ok := p.(string); ok {
			parts = append(parts, s)
		}
	}
	if len(parts) == 3 && (parts[1] == "-lc" || parts[1] == "-c") {
		return parts[2]
	}
	return strings.Join(parts, " ")
}

// localShellCommand reads a Responses local_shell_call item's
// action.command argv.
func localShellCommand(c *conversation.Conversation, b *conversation.Block) string {
	var item struct {
		Action struct {
			Command []any `json:"command"`
		} `json:"action"`
	}
	if json.Unmarshal(c.Bytes(b.Span), &item) != nil {
		return ""
	}
	return argv(item.Action.Command)
}

type callResult struct {
	text    string
	isError bool
}

// resultOf finds the result of the call at (mi, bi) in the messages after
// it, before to.
func resultOf(c *conversation.Conversation, mi, bi, to int) (callResult, bool) {
	for j := mi + 1; j < to && j <= mi+2; j++ {
		for k := range c.Messages[j].Blocks {
			r := &c.Messages[j].Blocks[k]
			if r.Kind == conversation.ToolResult && r.Call == [2]int{mi, bi} {
				t, _ := c.ResultText(r)
				return callResult{text: string(t), isError: r.IsError}, true
			}
		}
	}
	return callResult{}, false
}

var exitLine = regexp.MustCompile(`(?im)^\s*(?:exit code:?|process exited with code|exit status:?)\s*(-?\d+)\s*$|exit_code: (-?\d+)`)

// exitHeader is how far into a shell output its exit code is looked for.
const exitHeader = 512

// unwrapOutput returns a tool output's text (Codex's JSON
// {"output", "metadata": {"exit_code"}} unwrapped) and the exit code it
// states, if any: the JSON's, or for a shell's output (shell set) one its
// first exitHeader bytes state.
func unwrapOutput(s string, shell bool) (out string, code int, ok bool) {
	if t := strings.TrimSpace(s); strings.HasPrefix(t, `{"output"`) {
		var v struct {
			Output   string `json:"output"`
			Metadata struct {
				ExitCode *int `json:"exit_code"`
			} `json:"metadata"`
		}
		if json.Unmarshal([]byte(t), &v) == nil {
			if v.Metadata.ExitCode != nil {
				return v.Output, *v.Metadata.ExitCode, true
			}
			s = v.Output
		}
	}
	if !shell {
		return s, 0, false
	}
	if m := exitLine.FindStringSubmatch(s[:min(len(s), exitHeader)]); m != nil {
		d := m[1]
		if d == "" {
			d = m[2]
		}
		if n, err := strconv.Atoi(d); err == nil {
			return s, n, true
		}
	}
	return s, 0, false
}

// Results of a tool call the user refused or interrupted.
const (
	refusalText   = "The user doesn't want to proceed with this tool use"
	interruptText = "[Request interrupted by user"
)

// refusal reports whether a tool result is the user's refusal: an
// interruption's first line, or the user's own words when a refusal
// carries them, else refusalText.
func refusal(out string) (string, bool) {
	t := strings.TrimSpace(out)
	if strings.HasPrefix(t, interruptText) {
		return headLine(t), true
	}
	if !strings.HasPrefix(t, refusalText) {
		return "", false
	}
	if _, words, ok := strings.Cut(t, "the user said:"); ok {
		if w := firstInformative(words); w != "" {
			return w, true
		}
	}
	return refusalText, true
}

// errorPrefixes start the output of a tool call that failed, for tools
// whose results carry no error flag.
var errorPrefixes = []string{"<tool_use_error>", "apply_patch verification failed", "error:", "error ", "failed to ", "invalid patch"}

func errorMarked(out string) bool {
	t := strings.ToLower(strings.TrimSpace(out))
	for _, p := range errorPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

var framing = regexp.MustCompile(`(?i)^(?:exit code:?\s*-?\d+|process exited with code\s*-?\d+|wall time:.*|output:|chunk id:.*|original token count:.*|total output lines:.*|\[output truncated.*)$`)

// informative reports whether an output line says something: not framing,
// and at least two letters or digits.
func informative(l string) bool {
	if l == "" || framing.MatchString(l) {
		return false
	}
	n := 0
	for _, r := range l {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if n++; n >= 2 {
				return true
			}
		}
	}
	return false
}

// lastInformative returns the last informative line of s, trimmed, or "".
// A carriage return ends a line too (a terminal shows what follows it).
func lastInformative(s string) string {
	s = strings.ReplaceAll(s, "\r", "\n")
	for s != "" {
		i := strings.LastIndexByte(s, '\n')
		l := strings.TrimSpace(s[i+1:])
		if informative(l) {
			return l
		}
		if i < 0 {
			break
		}
		s = s[:i]
	}
	return ""
}

// firstInformative returns the first informative line of s, trimmed, or "".
func firstInformative(s string) string {
	for l := range strings.SplitSeq(strings.ReplaceAll(s, "\r", "\n"), "\n") {
		if l = strings.TrimSpace(l); informative(l) {
			return l
		}
	}
	return ""
}

// headLine returns the first line of s, trimmed.
func headLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// injectedPrefixes start user text that a client adds on its own: not
// what the person typed.
var injectedPrefixes = []string{
	// Claude Code
	"<system-reminder>", "<local-command-caveat>", "<local-command-stdout>", "<local-command-stderr>",
	"<command-name>", "<command-message>", "<command-args>", "<task-notification>", "<user-prompt-submit-hook>",
	"<bash-stdout>", "<bash-stderr>", "Caveat: The messages below were generated", "[Request interrupted",
	"This session is being continued from a previous conversation",
	"Your task is to create a detailed summary of the conversation so far",
	// Codex
	"<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<INSTRUCTIONS>", "<skill>",
	"<turn_aborted>", "<user_shell_command>", "Warning: apply_patch was requested via",
	// ctxguard: its compaction note, and the blocks a replay's repairs
	// insert
	conversation.CompactionNote, transcript.RepairNote,
}

// injectedTexts are whole user texts a client sends on its own.
var injectedTexts = []string{"Warmup"}

func injected(t string) bool {
	for _, p := range injectedPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	for _, x := range injectedTexts {
		if t == x {
			return true
		}
	}
	return false
}

// identifiers returns the identifiers of an assistant text (see
// FactIdentifier), in order, repeats included.
func identifiers(text string) []string {
	var out []string
	var rest strings.Builder
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			rest.WriteByte('\n')
			continue
		}
		// Inline code spans: a run of backticks up to the next run of
		// the same length.
		for {
			i := strings.IndexByte(line, '`')
			if i < 0 {
				break
			}
			n := i
			for n < len(line) && line[n] == '`' {
				n++
			}
			ticks := line[i:n]
			j := strings.Index(line[n:], ticks)
			if j < 0 {
				rest.WriteString(line[:n])
				line = line[n:]
				continue
			}
			rest.WriteString(line[:i])
			rest.WriteByte(' ')
			if code := strings.TrimSpace(line[n : n+j]); utf8.RuneCountInString(code) >= 2 {
				out = append(out, code)
			}
			line = line[n+j+len(ticks):]
		}
		rest.WriteString(line)
		rest.WriteByte('\n')
	}
	words := strings.FieldsFunc(rest.String(), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_./\\-:~", r))
	})
	for _, w := range words {
		w = strings.TrimLeft(strings.TrimRight(w, ".,:-"), ",:-")
		if utf8.RuneCountInString(w) >= 3 && identifierWord(w) {
			out = append(out, w)
		}
	}
	return out
}

var (
	dottedName = regexp.MustCompile(`^[\pL_][\pL\pN_-]*(?:\.[\pL\pN_-]+)+$`)
	wordName   = regexp.MustCompile(`^[\pL\pN_]+$`)
	driveRoot  = regexp.MustCompile(`^[A-Za-z]:[\\/]`)
	camelHump  = regexp.MustCompile(`[a-z][A-Z]`)
)

// identifierWord reports whether a word is a path, a dotted, snake_case
// or camelCase name.
func identifierWord(w string) bool {
	letters := strings.IndexFunc(w, unicode.IsLetter) >= 0
	if !letters {
		return false
	}
	if strings.ContainsAny(w, "/\\") {
		seps := strings.Count(w, "/") + strings.Count(w, "\\")
		lastSeg := w[strings.LastIndexAny(w, "/\\")+1:]
		return strings.HasPrefix(w, "/") || strings.HasPrefix(w, "./") || strings.HasPrefix(w, "../") ||
			strings.HasPrefix(w, "~/") || driveRoot.MatchString(w) || strings.Contains(w, "://") ||
			seps >= 2 || strings.Contains(strings.Trim(lastSeg, "."), ".")
	}
	if dottedName.MatchString(w) {
		for part := range strings.SplitSeq(w, ".") {
			if utf8.RuneCountInString(part) >= 2 {
				return true
			}
		}
		return false
	}
	if !wordName.MatchString(w) {
		return false
	}
	return strings.Contains(w, "_") && strings.Trim(w, "_") != "" || camelHump.MatchString(w)
}
