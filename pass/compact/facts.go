package compact

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// facts is what the summarized messages tell, as data: the user's
// requests, the files, searches, commands, failures, images, the latest
// plan and assistant texts, each item with the span (the compaction) whose
// original messages hold it. The extractive summary renders facts (render,
// fit); a model's summary is followed by their essentials (appendix).
// Every compaction record keeps the facts of all the spans it summarizes,
// so the next compaction merges records and never parses text back.
//
// Lists are oldest first. The JSON form is stored; fields are only ever
// added.
type facts struct {
	// Spans holds, for each span summarized so far (oldest first), the
	// blob that keeps its original messages, or "" where they could not
	// be kept. Items name their span by index.
	Spans []string `json:"spans"`
	// Earlier is the prose of an earlier summary that facts do not hold
	// (a model's, a record's of an earlier format, or the one a client
	// put in the conversation when it compacted it itself), about spans
	// [0, EarlierSpans).
	Earlier      string `json:"earlier,omitempty"`
	EarlierSpans int    `json:"earlier_spans,omitempty"`

	Requests  []note    `json:"requests,omitempty"`  // the user's own words
	Injected  []note    `json:"injected,omitempty"`  // what the client added in the user's turn
	Files     []fileOp  `json:"files,omitempty"`     // one per path and operation
	Searches  []search  `json:"searches,omitempty"`  // Glob and Grep calls
	Commands  []command `json:"commands,omitempty"`  // shell commands, one per text
	Failures  []failure `json:"failures,omitempty"`  // failed calls of any tool, refusals
	Media     []media   `json:"media,omitempty"`     // images and documents
	Plan      []string  `json:"plan,omitempty"`      // the latest todo list or plan
	PlanSpan  int       `json:"plan_span,omitempty"` // the span it is from
	Assistant []note    `json:"assistant,omitempty"` // the latest assistant texts
	// Omitted counts what the facts no longer list, by kind, with the
	// spans that hold it.
	Omitted []omitted `json:"omitted,omitempty"`

	// While a summary is fitted to its budget (fit), Earlier may lose
	// its middle: earlierCut bytes, earlierTail the tail after them.
	earlierTail string
	earlierCut  int
}

// note is a text of one span. When Cut > 0, Cut bytes were taken out of
// its middle: Text is the head, Tail the tail.
type note struct {
	Text string `json:"text"`
	Tail string `json:"tail,omitempty"`
	Cut  int    `json:"cut,omitempty"`
	Span int    `json:"span"`
}

// fileOp is a file the agent read, created, edited or deleted.
type fileOp struct {
	Path string `json:"path"`
	Op   string `json:"op"` // one of opRead, opCreated, opEdited, opDeleted
	Span int    `json:"span"`
}

const (
	opCreated = "created"
	opEdited  = "edited"
	opDeleted = "deleted"
	opRead    = "read"
)

// fileOps are the operations in the order a summary lists them.
var fileOps = []string{opCreated, opEdited, opDeleted, opRead}

// search is a Glob or Grep call: its pattern, path and file filter.
type search struct {
	Tool    string `json:"tool"`
	Pattern string `json:"pattern"`
	Path    string `json:"path,omitempty"`
	Glob    string `json:"glob,omitempty"`
	Span    int    `json:"span"`
}

// command is one shell command (its text as run), how often it ran and
// failed, and the spans it ran in.
type command struct {
	Cmd    string `json:"cmd"`
	Runs   int    `json:"runs"`
	Failed int    `json:"failed,omitempty"`
	Spans  []int  `json:"spans"`
}

// failure is a tool call that failed (a command's non-zero exit, any
// tool's error result) or that the user refused: the tool, what it was
// called on, and why, as lines of its output.
type failure struct {
	Tool    string   `json:"tool"`
	What    string   `json:"what,omitempty"`
	Reason  []string `json:"reason,omitempty"`
	Command bool     `json:"command,omitempty"` // What is a shell command
	Exit    string   `json:"exit,omitempty"`    // a command's exit code
	Refused bool     `json:"refused,omitempty"`
	Count   int      `json:"count"`
	Span    int      `json:"span"`
}

// media is an image or document the conversation carried: where it was
// (a tool's result, the user's message) and what it was.
type media struct {
	Kind  string `json:"kind"`  // image, document
	Where string `json:"where"` // "the result of Read /a.png", "a user message"
	What  string `json:"what,omitempty"`
	Count int    `json:"count"`
	Span  int    `json:"span"`
}

// omitted counts items of one kind left out, and the spans holding them.
type omitted struct {
	Kind  string `json:"kind"`
	Count int    `json:"count"`
	Runs  int    `json:"runs,omitempty"` // for commands: their runs
	Spans []int  `json:"spans"`
}

// Caps on one stored item, in bytes: past them an item keeps its head and
// tail (note.Cut says how much went).
const (
	requestCap   = 16 << 10
	injectedCap  = 400
	commandCap   = 2000
	lineCap      = 300 // one line of a failure's reason
	reasonLines  = 3
	whatCap      = 300
	assistantCap = 24 << 10
	assistantMax = 3 // latest assistant texts kept
	planItemCap  = 300
)

// Caps on the number of stored items of one kind: past them the oldest
// are counted in Omitted, so a record stays bounded however long the
// session.
const (
	maxRequests = 400
	maxInjected = 40
	maxFiles    = 2000
	maxSearches = 400
	maxCommands = 1500
	maxFailures = 400
	maxMedia    = 200
)

// addFile records an operation on path, once per path and operation.
func (f *facts) addFile(path, op string, span int) {
	if path = strings.TrimSpace(path); path == "" {
		return
	}
	for _, x := range f.Files {
		if x.Path == path && x.Op == op {
			return
		}
	}
	f.Files = append(f.Files, fileOp{Path: path, Op: op, Span: span})
}

// addSearch records a search, once per tool, pattern, path and filter.
func (f *facts) addSearch(s search) {
	for _, x := range f.Searches {
		if x.Tool == s.Tool && x.Pattern == s.Pattern && x.Path == s.Path && x.Glob == s.Glob {
			return
		}
	}
	f.Searches = append(f.Searches, s)
}

// addCommand counts a run of cmd.
func (f *facts) addCommand(cmd string, failed bool, span int) {
	c := command{Cmd: cmd, Runs: 1, Spans: []int{span}}
	if failed {
		c.Failed = 1
	}
	f.addRuns(c)
}

// addRuns adds c's runs to those of the same command; a command run again
// moves to the end (the list is in order of last run).
func (f *facts) addRuns(c command) {
	for i, x := range f.Commands {
		if x.Cmd == c.Cmd {
			c.Runs += x.Runs
			c.Failed += x.Failed
			for _, s := range x.Spans {
				c.Spans = addSpan(c.Spans, s)
			}
			f.Commands = slices.Delete(f.Commands, i, i+1)
			break
		}
	}
	f.Commands = append(f.Commands, c)
}

// addFailure records a failure; the same failure again (same tool, call
// and reason) is counted, and moves to the end.
func (f *facts) addFailure(x failure) {
	for i, y := range f.Failures {
		if y.Tool == x.Tool && y.What == x.What && slices.Equal(y.Reason, x.Reason) && y.Refused == x.Refused && y.Command == x.Command {
			x.Count += y.Count
			f.Failures = slices.Delete(f.Failures, i, i+1)
			break
		}
	}
	f.Failures = append(f.Failures, x)
}

// addMedia records an image or document, counted by where and what.
func (f *facts) addMedia(m media) {
	for i, y := range f.Media {
		if y.Kind == m.Kind && y.Where == m.Where && y.What == m.What && y.Span == m.Span {
			f.Media[i].Count += m.Count
			return
		}
	}
	f.Media = append(f.Media, m)
}

// omit counts n items of kind (and runs, for commands) in spans as left
// out.
func (f *facts) omit(kind string, n, runs int, spans []int) {
	if n <= 0 {
		return
	}
	for i := range f.Omitted {
		if f.Omitted[i].Kind == kind {
			o := &f.Omitted[i]
			o.Count += n
			o.Runs += runs
			for _, s := range spans {
				o.Spans = addSpan(o.Spans, s)
			}
			return
		}
	}
	o := omitted{Kind: kind, Count: n, Runs: runs}
	for _, s := range spans {
		o.Spans = addSpan(o.Spans, s)
	}
	f.Omitted = append(f.Omitted, o)
}

// omitted returns the count of kind left out, or nil.
func (f *facts) omitted(kind string) *omitted {
	for i := range f.Omitted {
		if f.Omitted[i].Kind == kind {
			return &f.Omitted[i]
		}
	}
	return nil
}

// addSpan adds s to the sorted set spans.
func addSpan(spans []int, s int) []int {
	i, found := slices.BinarySearch(spans, s)
	if found {
		return spans
	}
	return slices.Insert(spans, i, s)
}

// merge returns the facts of prev's spans followed by cur's (whose items
// name span 0, and become span len(prev.Spans)), with blob the blob that
// holds cur's originals. Neither argument changes.
func merge(prev, cur *facts, blob string) *facts {
	f := prev.clone()
	k := len(f.Spans)
	f.Spans = append(f.Spans, blob)
	for _, n := range cur.Requests {
		n.Span = k
		f.Requests = append(f.Requests, n)
	}
	for _, n := range cur.Injected {
		n.Span = k
		f.Injected = append(f.Injected, n)
	}
	for _, x := range cur.Files {
		f.addFile(x.Path, x.Op, k)
	}
	for _, x := range cur.Searches {
		x.Span = k
		f.addSearch(x)
	}
	for _, x := range cur.Commands {
		f.addRuns(command{Cmd: x.Cmd, Runs: x.Runs, Failed: x.Failed, Spans: []int{k}})
	}
	for _, x := range cur.Failures {
		x.Span = k
		x.Reason = slices.Clone(x.Reason)
		f.addFailure(x)
	}
	for _, x := range cur.Media {
		x.Span = k
		f.addMedia(x)
	}
	if len(cur.Plan) > 0 {
		f.Plan, f.PlanSpan = slices.Clone(cur.Plan), k
	}
	if len(cur.Assistant) > 0 {
		// The latest texts are cur's, then prev's newest, up to
		// assistantMax; the older ones are counted.
		var next []note
		for _, n := range cur.Assistant {
			n.Span = k
			next = append(next, n)
		}
		keep := max(assistantMax-len(next), 0)
		drop := max(len(f.Assistant)-keep, 0)
		for _, n := range f.Assistant[:drop] {
			f.omit(kAssistant, 1, 0, []int{n.Span})
		}
		f.Assistant = append(f.Assistant[drop:], next...)
	}
	if cur.Earlier != "" {
		// A summary the span itself holds (a client's compaction).
		f.Earlier = strings.TrimSpace(f.Earlier + "\n\n" + cur.Earlier)
		f.EarlierSpans = k + 1
	}
	for _, o := range cur.Omitted {
		f.omit(o.Kind, o.Count, o.Runs, []int{k})
	}
	f.bound()
	return f
}

// bound counts the oldest items past each list's cap as omitted.
func (f *facts) bound() {
	dropNotes := func(list *[]note, n int, kind string) {
		for _, x := range (*list)[:max(len(*list)-n, 0)] {
			f.omit(kind, 1, 0, []int{x.Span})
		}
		*list = (*list)[max(len(*list)-n, 0):]
	}
	dropNotes(&f.Requests, maxRequests, kRequests)
	dropNotes(&f.Injected, maxInjected, kInjected)
	if n := len(f.Files) - maxFiles; n > 0 {
		for _, x := range f.Files[:n] {
			f.omit(kFiles, 1, 0, []int{x.Span})
		}
		f.Files = f.Files[n:]
	}
	if n := len(f.Searches) - maxSearches; n > 0 {
		for _, x := range f.Searches[:n] {
			f.omit(kSearches, 1, 0, []int{x.Span})
		}
		f.Searches = f.Searches[n:]
	}
	if n := len(f.Commands) - maxCommands; n > 0 {
		for _, x := range f.Commands[:n] {
			f.omit(kOldCommands, 1, x.Runs, x.Spans)
		}
		f.Commands = f.Commands[n:]
	}
	if n := len(f.Failures) - maxFailures; n > 0 {
		for _, x := range f.Failures[:n] {
			f.omit(kFailures, x.Count, 0, []int{x.Span})
		}
		f.Failures = f.Failures[n:]
	}
	if n := len(f.Media) - maxMedia; n > 0 {
		for _, x := range f.Media[:n] {
			f.omit(kMedia, x.Count, 0, []int{x.Span})
		}
		f.Media = f.Media[n:]
	}
}

// clone returns a deep copy of f (nil: empty facts).
func (f *facts) clone() *facts {
	if f == nil {
		return &facts{}
	}
	g := *f
	g.Spans = slices.Clone(f.Spans)
	g.Requests = slices.Clone(f.Requests)
	g.Injected = slices.Clone(f.Injected)
	g.Files = slices.Clone(f.Files)
	g.Searches = slices.Clone(f.Searches)
	g.Commands = slices.Clone(f.Commands)
	for i := range g.Commands {
		g.Commands[i].Spans = slices.Clone(g.Commands[i].Spans)
	}
	g.Failures = slices.Clone(f.Failures)
	for i := range g.Failures {
		g.Failures[i].Reason = slices.Clone(g.Failures[i].Reason)
	}
	g.Media = slices.Clone(f.Media)
	g.Plan = slices.Clone(f.Plan)
	g.Assistant = slices.Clone(f.Assistant)
	g.Omitted = slices.Clone(f.Omitted)
	for i := range g.Omitted {
		g.Omitted[i].Spans = slices.Clone(g.Omitted[i].Spans)
	}
	return &g
}

// cutNote keeps n's head and tail when its text is longer than max bytes.
func cutNote(n note, max int) note {
	whole := n.Text + n.Tail
	if len(whole) <= max {
		return n
	}
	h, t := headTail(whole, max)
	n.Cut += len(whole) - len(h) - len(t)
	n.Text, n.Tail = h, t
	return n
}

// headTail returns the first two thirds and the last third of n bytes of
// s, cut at character boundaries.
func headTail(s string, n int) (head, tail string) {
	if len(s) <= n {
		return s, ""
	}
	h, t := n*2/3, n/3
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	ts := len(s) - t
	for ts < len(s) && !utf8.RuneStart(s[ts]) {
		ts++
	}
	return s[:h], s[ts:]
}
