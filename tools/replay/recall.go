package replay

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/tokens"
	"github.com/ctxguard/ctxguard/tools/transcript"
)

// Fact recall of compaction summaries: for every compaction a replay
// performs, the facts of the messages its summary replaced, each looked up
// in the summary message's text.
//
// The span. A summary stands for every message from the first user
// message up to its cut, earlier compactions folded in: facts are taken
// from all of those messages of the original request, not only from those
// the last fold added.
//
// The facts, by kind (FactKind), each kind a set (a fact counts once per
// summary, by its normalized text), in order of first appearance:
//
//   - FactRequest: the user's own requests. Every text block of a user
//     message (tool results are not text blocks), trimmed, unless it is
//     text a client injects: it starts with one of injectedPrefixes
//     (Claude Code's <system-reminder>, <local-command-caveat>,
//     <task-notification>, slash-command echoes, "[Request interrupted",
//     its own compaction summary and prompt; Codex's <environment_context>,
//     <user_instructions>, AGENTS.md, <skill>, its warnings; ctxguard's
//     compaction note and a replay's repair placeholders) or is one of
//     injectedTexts ("Warmup"). A request is matched whole (a short one,
//     "1" or "yes", is found wherever the summary has that word).
//   - FactFile: the files a tool call read, created, edited or deleted:
//     the path input (file_path, filePath, path, notebook_path,
//     absolute_path) of a file tool (fileTools: Claude Code's Read, Write,
//     Edit, MultiEdit, NotebookEdit, opencode's and Gemini CLI's
//     counterparts), and every "*** Add/Update/Delete File:" and "*** Move
//     to:" header of a patch (Codex's apply_patch, opencode's patch, a
//     patch fed to a shell command).
//   - FactSearch: a Glob or Grep call's pattern, and its path, glob or
//     include filter when it has one (searchTools).
//   - FactCommand: the commands of shell calls (shellTools: Bash, Codex's
//     shell, shell_command, exec_command and local_shell_call, opencode's
//     bash, Gemini CLI's run_shell_command): a command string, or an argv
//     (["bash", "-lc", script] is its script; any other argv is its
//     arguments joined by spaces). A command is identified by its first
//     non-blank line, at most FactHeadChars characters.
//   - FactFailure: why a shell call failed. A call failed when its result
//     is an error (is_error), or states a non-zero exit code (Codex's
//     {"output": …, "metadata": {"exit_code": N}}, or in the output's
//     first exitHeader bytes a line "Exit code N", "Exit code: N",
//     "Process exited with code N", or "exit_code: N"). Its reason is the
//     last informative line of the output (Codex's JSON unwrapped; a
//     carriage return ends a line): blank lines, lines with fewer than two
//     letters or digits, and framing ("Exit code …", "Wall time: …",
//     "Output:", "Chunk ID: …", "Original token count: …", "Process exited
//     with code …", "[Output truncated …]") are skipped. A failure whose
//     output has no informative line has no reason fact (its command is
//     still a FactCommand). At most FactHeadChars characters.
//   - FactError: errors of every other tool and the user's refusals. A
//     non-shell call's result is an error when it says so (is_error), or
//     its Codex JSON states a non-zero exit code, or it starts with an
//     error marker (errorPrefixes: "<tool_use_error>", "apply_patch
//     verification failed", "Error:", …). The fact is the first
//     informative line of its text, <tool_use_error> tags removed, at most
//     FactHeadChars characters. A refusal is a result of any tool, the
//     shell included, that starts "The user doesn't want to proceed with
//     this tool use" (the fact: the user's own words when the result
//     carries them, the first informative line after "the user said:",
//     else that sentence) or "[Request interrupted by user" (the fact: its
//     first line). Results a replay's repairs inserted say nothing.
//   - FactIdentifier: identifiers in the last three non-empty text blocks
//     of assistant messages in the span (thinking excluded): every inline
//     code span (single line, at least two characters, at most
//     FactHeadChars), and, outside code spans (fenced code blocks
//     included), every word that is a path (a slash or backslash and
//     either a leading /, ./, ../, ~/, a drive letter, a URL scheme, two
//     or more separators, or a dot in its last segment), a dotted name
//     (letters, digits, underscores and hyphens joined by dots, with a
//     letter and a part of two or more characters: os.Exit, README.md,
//     prd-validation.md), a snake_case name (an underscore and a letter)
//     or a camelCase name (a lower-case letter followed by an upper-case
//     one). A word is a run of letters, digits and _ . / \ - : ~, less
//     the . , : - that end it and the , : - that start it; words shorter
//     than three characters are not identifiers.
//
// Matching. A fact is found when its normalized text occurs in the
// normalized summary text, not inside a longer word: where the fact starts
// (ends) with a letter, digit or underscore, the summary's character
// before (after) the occurrence is none of those. Normalization
// (normFact) lower-cases, deletes quote characters (' " ` and their
// typographic forms), turns every run of backslashes into one slash and
// every run of white space into one space, and trims. A fact cut to its
// first FactHeadChars characters is matched as a prefix (no boundary
// check at its end).

// FactKind is a kind of fact a summary should keep.
type FactKind uint8

const (
	FactRequest FactKind = iota
	FactFile
	FactSearch
	FactCommand
	FactFailure
	FactError
	FactIdentifier
	numFactKinds
)

// factKinds name the kinds: the JSON key, and the short and long labels
// of the text report.
var factKinds = [numFactKinds]struct{ key, short, label string }{
	{"user_requests", "requests", "the user's requests"},
	{"files", "files", "files read, created, edited, deleted"},
	{"searches", "searches", "Glob/Grep patterns and paths"},
	{"commands", "commands", "unique commands"},
	{"failure_reasons", "failures", "why a failed command failed"},
	{"tool_errors", "errors", "other tools' errors, refusals"},
	{"identifiers", "identifiers", "identifiers of the last 3 assistant texts"},
}

func (k FactKind) String() string {
	if k < numFactKinds {
		return factKinds[k].key
	}
	return "fact(" + strconv.Itoa(int(k)) + ")"
}

// FactHeadChars is how much of a command, a failure reason, an error or a
// code span identifies it: its first FactHeadChars characters.
const FactHeadChars = 120

// assistantTexts is how many of the span's last assistant texts give
// identifiers.
const assistantTexts = 3

// Fact is one thing a summary should keep.
type Fact struct {
	Kind FactKind
	Text string // as the span said it (cut to FactHeadChars where the kind says)
	// Head is set when Text was cut: it is matched as a prefix.
	Head bool
}

// FactCount is how many facts of a kind there were and how many a summary
// kept.
type FactCount struct {
	Found int `json:"found"`
	Total int `json:"total"`
}

// Recall is the share found, 1 when there were none.
func (c FactCount) Recall() float64 { return Ratio(float64(c.Found), float64(c.Total)) }

// Recall counts facts by kind.
type Recall [numFactKinds]FactCount

// Add adds o to r.
func (r *Recall) Add(o Recall) {
	for k := range r {
		r[k].Found += o[k].Found
		r[k].Total += o[k].Total
	}
}

// Facts returns the number of facts of every kind together.
func (r Recall) Facts() int {
	n := 0
	for _, c := range r {
		n += c.Total
	}
	return n
}

// MarshalJSON writes r as an object keyed by kind (FactKind.String), each
// {"found", "total", "recall"}.
func (r Recall) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for k, c := range r {
		if k > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, FactKind(k).String())
		b = fmt.Appendf(b, `:{"found":%d,"total":%d,"recall":%s}`, c.Found, c.Total, strconv.FormatFloat(c.Recall(), 'f', -1, 64))
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes; unknown kinds are ignored.
func (r *Recall) UnmarshalJSON(b []byte) error {
	var m map[string]FactCount
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*r = Recall{}
	for k := range r {
		r[k] = m[FactKind(k).String()]
	}
	return nil
}

// MaxMissedExamples is how many missed facts of each kind a compaction's
// report lists.
const MaxMissedExamples = 3

// Missed lists, by kind, the first facts a summary did not keep.
type Missed [numFactKinds][]string

// MarshalJSON writes m as an object keyed by kind, kinds with none left
// out.
func (m Missed) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	n := 0
	for k, list := range m {
		if len(list) == 0 {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = strconv.AppendQuote(b, FactKind(k).String())
		b = append(b, ':')
		v, err := json.Marshal(list)
		if err != nil {
			return nil, err
		}
		b = append(b, v...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *Missed) UnmarshalJSON(b []byte) error {
	var v map[string][]string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*m = Missed{}
	for k := range m {
		m[k] = v[FactKind(k).String()]
	}
	return nil
}

// RecallOf looks every fact up in summary and counts them by kind; missed
// lists the first MaxMissedExamples of each kind that it lacks (clipped).
func RecallOf(facts []Fact, summary string) (r Recall, missed Missed) {
	hay := normFact(summary)
	for _, f := range facts {
		r[f.Kind].Total++
		if containsFact(hay, normFact(f.Text), f.Head) {
			r[f.Kind].Found++
		} else if len(missed[f.Kind]) < MaxMissedExamples {
			missed[f.Kind] = append(missed[f.Kind], clip(oneLine(f.Text), lostLineMax))
		}
	}
	return r, missed
}

// containsFact reports whether needle occurs in hay at word boundaries
// (the end's only when !head); both are normalized.
func containsFact(hay, needle string, head bool) bool {
	if needle == "" {
		return true
	}
	first, _ := utf8.DecodeRuneInString(needle)
	last, _ := utf8.DecodeLastRuneInString(needle)
	checkStart, checkEnd := isWordRune(first), isWordRune(last) && !head
	for off := 0; ; {
		i := strings.Index(hay[off:], needle)
		if i < 0 {
			return false
		}
		i += off
		j := i + len(needle)
		ok := true
		if checkStart && i > 0 {
			r, _ := utf8.DecodeLastRuneInString(hay[:i])
			ok = !isWordRune(r)
		}
		if ok && checkEnd && j < len(hay) {
			r, _ := utf8.DecodeRuneInString(hay[j:])
			ok = !isWordRune(r)
		}
		if ok {
			return true
		}
		_, size := utf8.DecodeRuneInString(hay[i:])
		off = i + size
	}
}

func isWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// normFact normalizes a fact or a summary for matching: lower case, no
// quote characters, a run of backslashes as one slash, a run of white
// space as one space, trimmed.
func normFact(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space, slash := false, false
	for _, r := range s {
		switch {
		case strings.ContainsRune("'\"`‘’‚‛“”„‟«»", r):
			continue
		case r == '\\':
			if !slash {
				if space && b.Len() > 0 {
					b.WriteByte(' ')
				}
				b.WriteByte('/')
			}
			slash, space = true, false
			continue
		case unicode.IsSpace(r):
			space, slash = true, false
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space, slash = false, false
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// summaryRecall measures the summary of compaction comp, which request
// req (whose original conversation is c) carried first.
func summaryRecall(req int, c *conversation.Conversation, comp Compaction) *SummaryRecall {
	var facts []Fact
	if first := firstUserIndex(c); first >= 0 {
		facts = SpanFacts(c, first, first+comp.Messages)
	}
	r, missed := RecallOf(facts, comp.Text)
	return &SummaryRecall{Request: req, Messages: comp.Messages, Tokens: tokens.EstimateText(comp.Text), Recall: r, Missed: missed}
}

// firstUserIndex returns the index of c's first user message, where a
// compaction's summary goes, or -1.
func firstUserIndex(c *conversation.Conversation) int {
	for i := range c.Messages {
		if c.Messages[i].Role == conversation.RoleUser {
			return i
		}
	}
	return -1
}

// compactionEnd returns the index, in the original conversation oc, of
// the first message that the compaction summary of sc (a rewrite of oc)
// did not replace; 0 when sc carries no summary. The summary is sc's first
// user message, one text block starting with conversation.CompactionNote,
// which says how many messages it replaced.
func compactionEnd(oc, sc *conversation.Conversation) int {
	first := firstUserIndex(sc)
	if first < 0 {
		return 0
	}
	m := &sc.Messages[first]
	if len(m.Blocks) != 1 || m.Blocks[0].Kind != conversation.Text {
		return 0
	}
	rest, ok := strings.CutPrefix(sc.String(m.Blocks[0].Text), conversation.CompactionNote)
	if !ok {
		return 0
	}
	var n int
	if _, err := fmt.Sscanf(rest, "%d messages", &n); err != nil || n <= 0 {
		return 0
	}
	return max(firstUserIndex(oc), 0) + n
}

// SpanFacts returns the facts of messages [from, to) of c (see the
// package's fact recall notes), each once, in order of first appearance.
// It is a deterministic function of those messages.
func SpanFacts(c *conversation.Conversation, from, to int) []Fact {
	from, to = max(from, 0), min(to, len(c.Messages))
	fs := factSet{seen: map[string]bool{}}
	var texts []string // assistant texts, oldest first
	for mi := from; mi < to; mi++ {
		m := &c.Messages[mi]
		for bi := range m.Blocks {
			b := &m.Blocks[bi]
			switch {
			case b.Kind == conversation.Text && m.Role == conversation.RoleUser:
				if t := strings.TrimSpace(c.String(b.Text)); t != "" && !injected(t) {
					fs.add(FactRequest, t, false)
				}
			case b.Kind == conversation.Text && m.Role == conversation.RoleAssistant:
				if t := strings.TrimSpace(c.String(b.Text)); t != "" {
					texts = append(texts, t)
				}
			case b.Kind == conversation.ToolCall:
				fs.call(c, mi, bi, to)
			}
		}
	}
	for _, t := range texts[max(len(texts)-assistantTexts, 0):] {
		for _, id := range identifiers(t) {
			fs.addHead(FactIdentifier, id)
		}
	}
	return fs.list
}

type factSet struct {
	list []Fact
	seen map[string]bool
}

func (fs *factSet) add(k FactKind, text string, head bool) {
	if text == "" {
		return
	}
	key := string(rune('0'+k)) + normFact(text)
	if fs.seen[key] {
		return
	}
	fs.seen[key] = true
	fs.list = append(fs.list, Fact{Kind: k, Text: text, Head: head})
}

// addHead adds text cut to FactHeadChars characters.
func (fs *factSet) addHead(k FactKind, text string) {
	text = strings.TrimSpace(text)
	n := 0
	for i := range text {
		if n == FactHeadChars {
			fs.add(k, strings.TrimSpace(text[:i]), true)
			return
		}
		n++
	}
	fs.add(k, text, false)
}

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
