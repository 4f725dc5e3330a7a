package replay

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/tokens"
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
