package replay

import (
	"context"
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tools/transcript"
)

// Quote retention (what the agent keeps of what it read): where an answer
// quotes a distinctive line of an earlier tool result, was that line still
// in the request that produced the answer, or retrievable?
//
// Lines. A tool result's text is split into lines; each line is trimmed
// and loses a line-number prefix ("  12→" as Claude Code's Read prints it,
// or "12<TAB>" as cat -n does). A line is distinctive when it has at least
// QuoteMinChars characters, QuoteMinLetters of them letters, is not code
// boilerplate a model writes from memory (shebang, import, include,
// package and use lines), and appears in fewer than QuoteBoilerplate tool
// results of the history so far (more makes it boilerplate: a tool's
// fixed reply). Lines the request also
// carries where ctxguard never edits — system prompt, tool definitions,
// any text block of a user, assistant or system message — are not
// counted: their presence says nothing about retention.
//
// Quotes. Request k produced answer k. Every line of the answer's text,
// thinking and tool_use input strings (an Edit's old_string quotes the
// file it read) is trimmed and tried as is, without a Markdown list or
// quote marker, without surrounding backticks, and each inline `code`
// span of it on its own. A candidate that equals a distinctive tool-result
// line of request k's original history is a quote (each line once per
// answer).
//
// Verdict, against the request ctxguard sent: Kept if the line occurs in
// any of its decoded JSON strings; else Retrievable if a blob the request
// names ("blob <id>" or ".../blobs/<id>", as ctxguard's stubs and previews
// say) holds it in the session's store; else Lost.
//
// Cause. A line not kept was either replaced by a compaction (Compacted:
// every tool result of the history that held it is in the span a
// compaction summary of the sent request replaced, which the summary's
// note names with its blobs) or removed where it was (Cleared: the
// message holding it is still in the request, but its result was cleared,
// persisted or shortened into a stub or preview). Each cause counts its
// retrievable lines too.

// Quote detection thresholds.
const (
	QuoteMinChars    = 20
	QuoteMinLetters  = 8
	QuoteBoilerplate = 5
	// MaxLostExamples is how many lost quotes a SessionStat lists.
	MaxLostExamples = 5
	lostLineMax     = 160
)

// QuoteStats counts quotes and what became of them.
type QuoteStats struct {
	Quotes      int `json:"quotes"`
	Kept        int `json:"kept"`        // the line was in the sent request
	Retrievable int `json:"retrievable"` // not in it, but in a blob it names
	Lost        int `json:"lost"`
	// Not kept, by cause (Cleared + Compacted = Retrievable + Lost): its
	// tool result was cleared or shortened in place, or its message was
	// replaced by a compaction summary; and of each, the retrievable.
	Cleared              int `json:"cleared"`
	ClearedRetrievable   int `json:"cleared_retrievable"`
	Compacted            int `json:"compacted"`
	CompactedRetrievable int `json:"compacted_retrievable"`
}

// Add adds o to q.
func (q *QuoteStats) Add(o QuoteStats) {
	q.Quotes += o.Quotes
	q.Kept += o.Kept
	q.Retrievable += o.Retrievable
	q.Lost += o.Lost
	q.Cleared += o.Cleared
	q.ClearedRetrievable += o.ClearedRetrievable
	q.Compacted += o.Compacted
	q.CompactedRetrievable += o.CompactedRetrievable
}

// Retention is the share of quotes kept or retrievable; 1 with no quotes.
func (q QuoteStats) Retention() float64 {
	return Ratio(float64(q.Kept+q.Retrievable), float64(q.Quotes))
}

// LostQuote is a quoted line that the sent request no longer had.
type LostQuote struct {
	Request int    `json:"request"` // index of the request in its session
	Line    string `json:"line"`    // the line, clipped
}

// quoteTracker follows one session's history.
type quoteTracker struct {
	store     store.Store
	results   map[string]int  // distinctive line -> tool results holding it
	last      map[string]int  // distinctive line -> the last message holding it in a tool result
	elsewhere map[string]bool // distinctive lines in parts never edited
	done      int             // messages of the current history read
	blobs     map[string]string
}

func newQuoteTracker(st store.Store) *quoteTracker {
	return &quoteTracker{store: st, blobs: map[string]string{}}
}

// observe reads the messages of c (a request's original body) that it has
// not read yet; restart starts a new history.
func (q *quoteTracker) observe(c *conversation.Conversation, restart bool) {
	if restart || q.results == nil || len(c.Messages) < q.done {
		q.results, q.last, q.elsewhere, q.done = map[string]int{}, map[string]int{}, map[string]bool{}, 0
		for _, sp := range []conversation.Span{c.System, c.Tools} {
			if !sp.IsZero() {
				q.markElsewhere(string(decodedStrings(nil, c.Bytes(sp))))
			}
		}
	}
	for i := q.done; i < len(c.Messages); i++ {
		for _, b := range c.Messages[i].Blocks {
			switch b.Kind {
			case conversation.ToolResult:
				seen := map[string]bool{}
				eachLine(resultText(c, &b), func(l string) {
					if k := normLine(l); distinctive(k) && !seen[k] {
						seen[k] = true
						q.results[k]++
						q.last[k] = i
					}
				})
			case conversation.Text:
				q.markElsewhere(unquote(c.Bytes(b.Text)))
			}
		}
	}
	q.done = len(c.Messages)
}

func (q *quoteTracker) markElsewhere(text string) {
	eachLine(text, func(l string) {
		if k := normLine(l); distinctive(k) {
			q.elsewhere[k] = true
		}
	})
}

// quoted returns the distinctive tool-result lines answer quotes.
func (q *quoteTracker) quoted(answer []byte) []string {
	var out []string
	seen := map[string]bool{}
	try := func(s string) {
		k := normLine(s)
		if n := q.results[k]; n > 0 && n < QuoteBoilerplate && !q.elsewhere[k] && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, text := range answerTexts(answer) {
		eachLine(text, func(l string) {
			l = strings.TrimSpace(l)
			try(l)
			if m := stripMarker(l); m != l {
				try(m)
			}
			if strings.Count(l, "`") >= 2 {
				parts := strings.Split(l, "`")
				for j := 1; j < len(parts); j += 2 {
					try(parts[j])
				}
			}
		})
	}
	return out
}

// check finds the quotes in answer and judges each against sent. end
// returns the index of the first original message that a compaction
// summary in sent did not replace (0 for none); it is called only for a
// line sent lacks. check returns the counts and the lost lines.
func (q *quoteTracker) check(answer, sent []byte, end func() int) (QuoteStats, []string) {
	lines := q.quoted(answer)
	var st QuoteStats
	if len(lines) == 0 {
		return st, nil
	}
	text := string(decodedStrings(nil, sent))
	var ids []string
	idsDone := false
	compacted := -1 // end(), once known
	var lost []string
	for _, l := range lines {
		st.Quotes++
		if strings.Contains(text, l) {
			st.Kept++
			continue
		}
		if !idsDone {
			ids, idsDone = blobIDs(text), true
		}
		found := false
		for _, id := range ids {
			if strings.Contains(q.blob(id), l) {
				found = true
				break
			}
		}
		if compacted < 0 {
			compacted = 0
			if end != nil {
				compacted = end()
			}
		}
		byCompaction := q.last[l] < compacted
		if byCompaction {
			st.Compacted++
		} else {
			st.Cleared++
		}
		if found {
			st.Retrievable++
			if byCompaction {
				st.CompactedRetrievable++
			} else {
				st.ClearedRetrievable++
			}
		} else {
			st.Lost++
			lost = append(lost, l)
		}
	}
	return st, lost
}

// blob returns a blob's content from the store ("" if absent).
func (q *quoteTracker) blob(id string) string {
	if s, ok := q.blobs[id]; ok {
		return s
	}
	s := ""
	if q.store != nil {
		if rc, err := q.store.OpenBlob(context.Background(), id); err == nil {
			b, _ := io.ReadAll(rc)
			rc.Close()
			s = string(b)
		}
	}
	q.blobs[id] = s
	return s
}

var blobRef = regexp.MustCompile(`blobs?[/ ]([a-z]{13})\b`)

// blobIDs returns the blob ids text names, each once.
func blobIDs(text string) []string {
	var ids []string
	seen := map[string]bool{}
	for _, m := range blobRef.FindAllStringSubmatch(text, -1) {
		if id := m[1]; store.ValidID(id) && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}

// resultText is a tool result's text: a string content, or the text parts
// of an array, one after another.
func resultText(c *conversation.Conversation, b *conversation.Block) string {
	if jsonscan.KindOf(c.Body, b.Content) == jsonscan.String {
		return unquote(c.Bytes(b.Content))
	}
	var sb strings.Builder
	for _, p := range b.Parts {
		if p.Kind == conversation.Text {
			sb.WriteString(unquote(c.Bytes(p.Text)))
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

// answerTexts returns the texts of an assistant message: its text and
// thinking, and every string in its tool_use inputs.
func answerTexts(msg []byte) []string {
	root, err := jsonscan.Root(msg)
	if err != nil {
		return nil
	}
	content, err := jsonscan.Lookup(msg, root, "content")
	if err != nil {
		return nil
	}
	if jsonscan.KindOf(msg, content) == jsonscan.String {
		return []string{unquote(content.Bytes(msg))}
	}
	var out []string
	it := jsonscan.Elements(msg, content)
	for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
		if jsonscan.KindOf(msg, v) != jsonscan.Object {
			continue
		}
		for _, key := range []string{"text", "thinking"} {
			if s, err := jsonscan.Lookup(msg, v, key); err == nil && jsonscan.KindOf(msg, s) == jsonscan.String {
				out = append(out, unquote(s.Bytes(msg)))
			}
		}
		if in, err := jsonscan.Lookup(msg, v, "input"); err == nil {
			out = append(out, string(decodedStrings(nil, in.Bytes(msg))))
		}
	}
	return out
}

// codexAnswer writes the output items of a Codex turn as the assistant
// message answerTexts reads: every part of its messages (their "text"),
// every reasoning summary as "thinking", and every tool call's arguments,
// free-form input or shell action as "input". Items it cannot read are
// left out; a turn with nothing readable is an empty message (an answer
// all the same, so that quote retention follows the history).
func codexAnswer(items []transcript.CodexItem) []byte {
	parts := []json.RawMessage{}
	add := func(key string, v any) {
		if b, err := json.Marshal(map[string]any{key: v}); err == nil {
			parts = append(parts, b)
		}
	}
	for _, it := range items {
		var x struct {
			Content   []json.RawMessage       `json:"content"`
			Summary   []struct{ Text string } `json:"summary"`
			Arguments string                  `json:"arguments"`
			Input     json.RawMessage         `json:"input"`
			Action    json.RawMessage         `json:"action"`
		}
		if json.Unmarshal(it.Raw, &x) != nil {
			continue
		}
		switch it.Type {
		case "message":
			parts = append(parts, x.Content...)
		case "reasoning":
			for _, s := range x.Summary {
				add("thinking", s.Text)
			}
		case "function_call":
			if json.Valid([]byte(x.Arguments)) {
				add("input", json.RawMessage(x.Arguments))
			} else {
				add("input", x.Arguments)
			}
		case "custom_tool_call":
			if len(x.Input) > 0 {
				add("input", x.Input)
			}
		case "local_shell_call":
			if len(x.Action) > 0 {
				add("input", x.Action)
			}
		}
	}
	b, err := json.Marshal(map[string]any{"role": "assistant", "content": parts})
	if err != nil {
		return []byte(`{"role":"assistant","content":[]}`)
	}
	return b
}

// geminiAnswer writes the parts of a Gemini model content as the
// assistant message answerTexts reads: text parts as "text", function
// calls' args as "input"; other parts are left out.
func geminiAnswer(parts [][]byte) []byte {
	out := []json.RawMessage{}
	for _, p := range parts {
		var x struct {
			Text         *string `json:"text"`
			FunctionCall *struct {
				Args json.RawMessage `json:"args"`
			} `json:"functionCall"`
		}
		if json.Unmarshal(p, &x) != nil {
			continue
		}
		var b []byte
		switch {
		case x.Text != nil:
			b, _ = json.Marshal(map[string]string{"text": *x.Text})
		case x.FunctionCall != nil && len(x.FunctionCall.Args) > 0:
			b, _ = json.Marshal(map[string]json.RawMessage{"input": x.FunctionCall.Args})
		}
		if b != nil {
			out = append(out, b)
		}
	}
	b, err := json.Marshal(map[string]any{"role": "assistant", "content": out})
	if err != nil {
		return []byte(`{"role":"assistant","content":[]}`)
	}
	return b
}

// decodedStrings appends every JSON string in b (keys included), decoded,
// each followed by a newline. b need not be valid JSON: the scan only
// tracks string boundaries.
func decodedStrings(dst, b []byte) []byte {
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		j := i + 1
		for j < len(b) && b[j] != '"' {
			if b[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(b) {
			break
		}
		if d, err := jsonscan.AppendUnquote(dst, b[i:j+1]); err == nil {
			dst = d
		} else {
			dst = append(dst, b[i+1:j]...)
		}
		dst = append(dst, '\n')
		i = j
	}
	return dst
}

func unquote(q []byte) string {
	s, err := jsonscan.Unquote(q)
	if err != nil {
		return ""
	}
	return s
}

func eachLine(text string, fn func(string)) {
	for len(text) > 0 {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			fn(text)
			return
		}
		fn(text[:i])
		text = text[i+1:]
	}
}

// normLine trims a line and removes a line-number prefix ("  12→" or
// "12\t").
func normLine(l string) string {
	l = strings.TrimSpace(l)
	i := 0
	for i < len(l) && l[i] >= '0' && l[i] <= '9' {
		i++
	}
	if i > 0 {
		switch {
		case strings.HasPrefix(l[i:], "→"):
			l = strings.TrimSpace(l[i+len("→"):])
		case strings.HasPrefix(l[i:], "\t"):
			l = strings.TrimSpace(l[i+1:])
		}
	}
	return l
}

// stripMarker removes a Markdown quote or list marker and surrounding
// backticks.
func stripMarker(l string) string {
	for _, p := range []string{"> ", "- ", "* ", "+ "} {
		if strings.HasPrefix(l, p) {
			l = strings.TrimSpace(l[len(p):])
			break
		}
	}
	if len(l) >= 2 && l[0] == '`' && l[len(l)-1] == '`' {
		l = strings.TrimSpace(l[1 : len(l)-1])
	}
	return l
}

var boilerplatePrefixes = []string{"#!", "import ", "package ", "#include ", "using ", "require(", "use "}

// distinctive reports whether a normalized line is long and wordy enough
// to count as a quote when repeated verbatim, and not code boilerplate a
// model writes from memory (a shebang, an import, include or package
// line).
func distinctive(l string) bool {
	if len(l) < QuoteMinChars || utf8.RuneCountInString(l) < QuoteMinChars {
		return false
	}
	for _, p := range boilerplatePrefixes {
		if strings.HasPrefix(l, p) {
			return false
		}
	}
	if strings.HasPrefix(l, "from ") && strings.Contains(l, " import ") {
		return false
	}
	letters := 0
	for _, r := range l {
		if unicode.IsLetter(r) {
			letters++
			if letters >= QuoteMinLetters {
				return true
			}
		}
	}
	return false
}

// clip shortens s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
