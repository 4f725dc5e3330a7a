package compact

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ctxguard/ctxguard/tokens"
)

// extractHeader starts every extractive summary.
const extractHeader = "This is an extractive summary of the earlier conversation, written by ctxguard without a model. What it leaves out is counted, with the blob that holds it."

// appendixHeader starts the facts that follow a model's summary.
const appendixHeader = "## Recorded by ctxguard from the original messages (verbatim)"

// Section headings of an extractive summary, in order.
const (
	hEarlier   = "## Earlier summary"
	hRequests  = "## User requests (verbatim, oldest first)"
	hInjected  = "## Added by the client in the user's turn (not typed by the user)"
	hFiles     = "## Files"
	hFailures  = "## Failures, errors and refusals"
	hMedia     = "## Images and documents"
	hCommands  = "## Commands run, one a line (oldest first; ×N: run N times)"
	hPlan      = "## Latest plan"
	hAssistant = "## Latest assistant messages (oldest first)"
)

// Kinds of omitted items, as a summary names them.
const (
	kRequests    = "user requests"
	kInjected    = "notes"
	kFiles       = "files"
	kSearches    = "searches"
	kFailures    = "failures"
	kMedia       = "images and documents"
	kCommands    = "successful commands"
	kOldCommands = "older commands" // past the cap on stored commands
	kPlan        = "plan items"
	kAssistant   = "earlier assistant messages"
	kEarlier     = "earlier summaries"
)

// parts selects what render writes: the whole extractive summary, or the
// appendix that follows a model's summary.
type parts uint8

const (
	whole    parts = iota
	appendix       // requests, files and searches, failures, images
)

// render writes the summary f holds, in full (whole) or as an appendix.
// Each section ends with a count of what it no longer lists, naming the
// blobs that hold it.
func (f *facts) render(p parts) string {
	var b strings.Builder
	if p == whole {
		b.WriteString(extractHeader)
		if f.Earlier != "" {
			b.WriteString("\n\n" + hEarlier + "\n" + f.Earlier)
			if f.earlierCut > 0 {
				fmt.Fprintf(&b, "\n[… %d bytes of the earlier summary cut here; the messages it summarizes are in %s …]\n", f.earlierCut, f.blobs(allSpans(f.EarlierSpans)))
				b.WriteString(f.earlierTail)
			}
		}
		f.omittedLine(&b, kEarlier)
	} else {
		b.WriteString(appendixHeader)
	}
	if len(f.Requests) > 0 || f.omitted(kRequests) != nil {
		b.WriteString("\n\n" + hRequests)
		for i, n := range f.Requests {
			b.WriteString("\n[" + strconv.Itoa(i+1) + "] ")
			f.writeNote(&b, n)
		}
		f.omittedLine(&b, kRequests)
	}
	if p == whole && (len(f.Injected) > 0 || f.omitted(kInjected) != nil) {
		b.WriteString("\n\n" + hInjected)
		for _, n := range f.Injected {
			b.WriteString("\n- ")
			f.writeNote(&b, n)
		}
		f.omittedLine(&b, kInjected)
	}
	f.renderFiles(&b)
	f.renderFailures(&b)
	f.renderMedia(&b)
	if p == appendix {
		return b.String()
	}
	f.renderCommands(&b)
	if len(f.Plan) > 0 || f.omitted(kPlan) != nil {
		b.WriteString("\n\n" + hPlan)
		for _, s := range f.Plan {
			b.WriteString("\n- " + s)
		}
		f.omittedLine(&b, kPlan)
	}
	if len(f.Assistant) > 0 || f.omitted(kAssistant) != nil {
		b.WriteString("\n\n" + hAssistant)
		f.omittedLine(&b, kAssistant)
		for i, n := range f.Assistant {
			b.WriteString("\n[" + strconv.Itoa(i+1) + "] ")
			f.writeNote(&b, n)
		}
	}
	return b.String()
}

// renderFiles writes the files touched and the searches made.
func (f *facts) renderFiles(b *strings.Builder) {
	if len(f.Files)+len(f.Searches) > 0 || f.omitted(kFiles) != nil || f.omitted(kSearches) != nil {
		b.WriteString("\n\n" + hFiles)
		for _, op := range fileOps {
			first := true
			for _, x := range f.Files {
				if x.Op != op {
					continue
				}
				if first {
					b.WriteString("\n" + strings.ToUpper(op[:1]) + op[1:] + ": ")
					first = false
				} else {
					b.WriteString(", ")
				}
				b.WriteString(x.Path)
			}
		}
		f.omittedLine(b, kFiles)
		for i, s := range f.Searches {
			if i == 0 {
				b.WriteString("\nSearched: ")
			} else {
				b.WriteString("; ")
			}
			b.WriteString(s.Tool)
			if s.Pattern != "" {
				b.WriteString(" `" + s.Pattern + "`")
			}
			if s.Path != "" {
				b.WriteString(" in " + s.Path)
			}
			if s.Glob != "" {
				b.WriteString(" (" + s.Glob + ")")
			}
		}
		f.omittedLine(b, kSearches)
	}
}

// renderFailures writes what failed and why.
func (f *facts) renderFailures(b *strings.Builder) {
	if len(f.Failures) > 0 || f.omitted(kFailures) != nil {
		b.WriteString("\n\n" + hFailures)
		for _, x := range f.Failures {
			// A command is named by itself, any other call by its tool
			// and what it was called on.
			switch {
			case x.Command:
				b.WriteString("\n- `")
				f.writeCommand(b, x.What, x.Span)
				b.WriteString("`")
			case x.What != "":
				b.WriteString("\n- " + x.Tool + " " + x.What)
			default:
				b.WriteString("\n- " + x.Tool)
			}
			var tags []string
			if x.Exit != "" {
				tags = append(tags, "exit "+x.Exit)
			}
			if x.Count > 1 {
				tags = append(tags, strconv.Itoa(x.Count)+" times")
			}
			if len(tags) > 0 {
				b.WriteString(" (" + strings.Join(tags, ", ") + ")")
			}
			if x.Refused {
				b.WriteString(" — refused by the user")
			}
			if len(x.Reason) > 0 {
				b.WriteString(": " + strings.Join(x.Reason, " | "))
			}
		}
		f.omittedLine(b, kFailures)
	}
}

// renderMedia writes the images and documents the span held.
func (f *facts) renderMedia(b *strings.Builder) {
	if len(f.Media) > 0 || f.omitted(kMedia) != nil {
		b.WriteString("\n\n" + hMedia)
		for _, m := range f.Media {
			b.WriteString("\n- ")
			switch {
			case m.Count > 1:
				b.WriteString(strconv.Itoa(m.Count) + " " + m.Kind + "s")
			case m.Kind == "image":
				b.WriteString("an image")
			default:
				b.WriteString("a " + m.Kind)
			}
			if m.What != "" {
				b.WriteString(" (" + m.What + ")")
			}
			b.WriteString(" in " + m.Where + ", kept in " + f.blobs([]int{m.Span}))
		}
		f.omittedLine(b, kMedia)
	}
}

// renderCommands writes the commands that succeeded (failed ones are with the failures).
func (f *facts) renderCommands(b *strings.Builder) {
	if f.succeeded() > 0 || f.omitted(kCommands) != nil || f.omitted(kOldCommands) != nil {
		b.WriteString("\n\n" + hCommands)
		for _, x := range f.Commands {
			if x.Runs <= x.Failed {
				continue // listed with the failures
			}
			b.WriteString("\n")
			f.writeCommand(b, x.Cmd, x.Spans[len(x.Spans)-1])
			if x.Runs > 1 {
				b.WriteString(" ×" + strconv.Itoa(x.Runs))
			}
			if x.Failed > 0 {
				b.WriteString(" (failed " + strconv.Itoa(x.Failed) + ")")
			}
		}
		f.omittedLine(b, kOldCommands)
		f.omittedLine(b, kCommands)
	}
}

// notIn returns a copy of f without the requests, files, searches and
// failures that text (a model's summary) already holds word for word, for
// the appendix that follows it.
func (f *facts) notIn(text string) *facts {
	g := f.clone()
	g.Requests = slices.DeleteFunc(g.Requests, func(n note) bool { return n.Cut == 0 && strings.Contains(text, n.Text) })
	g.Files = slices.DeleteFunc(g.Files, func(x fileOp) bool { return strings.Contains(text, x.Path) })
	g.Searches = slices.DeleteFunc(g.Searches, func(x search) bool {
		return strings.Contains(text, x.Pattern) && strings.Contains(text, x.Path)
	})
	g.Failures = slices.DeleteFunc(g.Failures, func(x failure) bool {
		return x.What != "" && strings.Contains(text, x.What) && (len(x.Reason) == 0 || strings.Contains(text, x.Reason[len(x.Reason)-1]))
	})
	return g
}

// succeeded counts the commands that ran at least once without failing.
func (f *facts) succeeded() int {
	n := 0
	for _, x := range f.Commands {
		if x.Runs > x.Failed {
			n++
		}
	}
	return n
}

// commandShown is how long a command of several lines (a heredoc, a
// commit message) may be to be shown whole; a longer one shows its first
// line.
const commandShown = 240

// writeCommand writes cmd (of span) on one line: whole, or when it is a
// long one of several lines, its first line and how much more there is
// in which blob.
func (f *facts) writeCommand(b *strings.Builder, cmd string, span int) {
	first, rest, multi := strings.Cut(cmd, "\n")
	if !multi || len(cmd) <= commandShown {
		b.WriteString(oneLine(cmd))
		return
	}
	b.WriteString(oneLine(first))
	fmt.Fprintf(b, " [… %d more bytes, in %s …]", len(rest)+1, f.blobs([]int{span}))
}

// writeNote writes n, with a marker where its middle was cut.
func (f *facts) writeNote(b *strings.Builder, n note) {
	b.WriteString(n.Text)
	if n.Cut > 0 {
		fmt.Fprintf(b, " [… %d bytes cut here; the whole is in %s …] ", n.Cut, f.blobs([]int{n.Span}))
		b.WriteString(n.Tail)
	}
}

// omittedLine writes the count of kind left out, if any, with the blobs
// that hold it.
func (f *facts) omittedLine(b *strings.Builder, kind string) {
	o := f.omitted(kind)
	if o == nil {
		return
	}
	runs := ""
	if o.Runs > o.Count {
		runs = ", run " + strconv.Itoa(o.Runs) + " times in all,"
	}
	fmt.Fprintf(b, "\n[%d %s%s not listed here: they are in %s]", o.Count, kind, runs, f.blobs(o.Spans))
}

// blobs names the blobs of spans: "blob x, blob y".
func (f *facts) blobs(spans []int) string {
	var names []string
	lost := false
	for _, s := range spans {
		if s >= 0 && s < len(f.Spans) && f.Spans[s] != "" {
			if n := "blob " + f.Spans[s]; !slices.Contains(names, n) {
				names = append(names, n)
			}
		} else {
			lost = true
		}
	}
	if lost {
		names = append(names, "the original messages (which could not be kept)")
	}
	return strings.Join(names, ", ")
}

// fit renders f (as p) within budget tokens (tokens.EstimateText), giving
// things up in a fixed order until it fits, every one of them counted
// with the blob that holds it. f does not change. The order keeps what
// matters most for last: every user request verbatim, every failure with
// its reason, every file and search, the latest assistant text whole,
// then the commands. Given up first: notes the client added, an earlier
// summary's prose beyond a quarter of the budget, the middle of older
// assistant messages, the plan's completed items, the oldest successful
// commands (collapsed to counts), older assistant messages, the rest of
// an earlier summary; then the middle of the latest assistant message,
// failures' reasons down to their last line, images, searches, files
// read, failures, the middle of long requests, other files, requests
// other than the first and the last; at the end, what is left down to
// the counts alone. Past that, the text is cut, the cut marked with its
// size and every blob.
func fit(src *facts, p parts, budget int) string {
	_, s := shrink(src, p, budget)
	return s
}

// shrink is fit, and returns the facts that are left as well (src does
// not change).
func shrink(src *facts, p parts, budget int) (*facts, string) {
	f := src.clone()
	render := func() (string, bool) {
		s := f.render(p)
		return s, tokens.EstimateText(s) <= budget
	}
	if s, ok := render(); ok {
		return f, s
	}
	for _, step := range f.shrinkSteps(budget) {
		for step() {
			if s, ok := render(); ok {
				return f, s
			}
		}
	}
	// Still over: the head and tail of what is left, the cut counted.
	s, _ := render()
	n := budget * 3
	h, t := headTail(s, n)
	return f, h + fmt.Sprintf("\n[… %d bytes of this summary cut here to fit its budget; everything it summarizes is in %s …]\n", len(s)-len(h)-len(t), f.blobs(allSpans(len(f.Spans)))) + t
}

// bounded returns f within a record's share of the store: the facts of a
// summary of storeFactor times budget tokens (f itself when they fit).
// What goes is counted as in fit, so a later summary still says where
// it is.
func bounded(f *facts, budget int) *facts {
	if tokens.EstimateText(f.render(whole)) <= storeFactor*budget {
		return f
	}
	g, _ := shrink(f, whole, storeFactor*budget)
	if g.earlierCut > 0 {
		// The stored prose keeps the cut's marker.
		g.Earlier += fmt.Sprintf("\n[… %d bytes of the earlier summary cut here; the messages it summarizes are in %s …]\n", g.earlierCut, g.blobs(allSpans(g.EarlierSpans))) + g.earlierTail
		g.earlierTail, g.earlierCut = "", 0
	}
	return g
}

// storeFactor is how many summaries' worth of facts a record keeps: more
// than one summary shows, so that what matters later (a file, a request
// the next summary has room for) is still there, and bounded, so that a
// record of a long session stays small.
const storeFactor = 4

func allSpans(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// shrinkSteps are fit's steps, in order: each gives up a little and
// reports whether it could.
func (f *facts) shrinkSteps(budget int) []func() bool {
	room := budget * 4 // bytes, roughly
	return []func() bool{
		func() bool { return f.dropNotes(&f.Injected, kInjected, 1+len(f.Injected)/4, 0) },
		func() bool { return f.shortenEarlier(room / 4) },
		func() bool { return f.shortenAssistant(false, 1200) },
		func() bool { return f.shortenPlan() },
		func() bool { return f.collapseCommands(1 + f.succeeded()/8) },
		func() bool { return f.dropNotes(&f.Assistant, kAssistant, 1, 1) },
		func() bool { return f.shortenEarlier(600) },
		func() bool { return f.dropEarlier() },
		func() bool { return f.shortenAssistant(true, 800) },
		func() bool { return f.shortenReasons() },
		func() bool { return f.dropMedia() },
		func() bool { return f.dropSearches(1 + len(f.Searches)/8) },
		func() bool { return f.dropFiles(opRead, 1+len(f.Files)/8) },
		func() bool { return f.dropFailures(1 + len(f.Failures)/8) },
		func() bool { return f.shortenRequests(400) },
		func() bool { return f.dropFiles("", 1+len(f.Files)/8) },
		func() bool { return f.dropMiddleRequest() },
		func() bool { return f.dropNotes(&f.Assistant, kAssistant, 1, 0) },
		// Last: what is left, down to the counts.
		func() bool { return f.dropNotes(&f.Injected, kInjected, len(f.Injected), 0) },
		func() bool { return f.dropPlan() },
		func() bool { return f.shortenRequests(120) },
		func() bool { return f.dropFailures(len(f.Failures)) },
		func() bool { return f.dropMedia() || f.dropSearches(len(f.Searches)) },
		func() bool { return f.dropNotes(&f.Requests, kRequests, 1, 0) },
	}
}

// dropNotes counts and removes the n oldest notes of list, keeping at
// least keep.
func (f *facts) dropNotes(list *[]note, kind string, n, keep int) bool {
	n = min(n, len(*list)-keep)
	if n <= 0 {
		return false
	}
	for _, x := range (*list)[:n] {
		f.omit(kind, 1, 0, []int{x.Span})
	}
	*list = (*list)[n:]
	return true
}

// shortenEarlier halves an earlier summary's prose while it is over n
// bytes.
func (f *facts) shortenEarlier(n int) bool {
	e := note{Text: f.Earlier, Tail: f.earlierTail, Cut: f.earlierCut}
	if !f.halve(&e, n) {
		return false
	}
	f.Earlier, f.earlierTail, f.earlierCut = e.Text, e.Tail, e.Cut
	return true
}

// dropEarlier counts and removes an earlier summary's prose.
func (f *facts) dropEarlier() bool {
	if f.Earlier == "" {
		return false
	}
	f.omit(kEarlier, 1, 0, allSpans(f.EarlierSpans))
	f.Earlier, f.earlierTail, f.earlierCut = "", "", 0
	return true
}

// shortenAssistant halves the longest assistant text over n bytes: the
// older ones (latest false) or the latest.
func (f *facts) shortenAssistant(latest bool, n int) bool {
	end := len(f.Assistant) - 1
	if latest {
		if end < 0 {
			return false
		}
		return f.halve(&f.Assistant[end], n)
	}
	best := -1
	for i := 0; i < end; i++ {
		if l := len(f.Assistant[i].Text) + len(f.Assistant[i].Tail); l > n && (best < 0 || l > len(f.Assistant[best].Text)+len(f.Assistant[best].Tail)) {
			best = i
		}
	}
	return best >= 0 && f.halve(&f.Assistant[best], n)
}

// halve cuts the middle of n down to half its length, not below min bytes.
func (f *facts) halve(n *note, min int) bool {
	l := len(n.Text) + len(n.Tail)
	if l <= min {
		return false
	}
	// Join head and tail again, less the marker, and cut anew.
	cut := n.Cut
	*n = cutNote(note{Text: n.Text, Tail: n.Tail, Span: n.Span}, max(l/2, min))
	n.Cut += cut
	return true
}

// collapseCommands counts the n oldest successful commands as omitted.
func (f *facts) collapseCommands(n int) bool {
	done := 0
	kept := f.Commands[:0]
	for _, x := range f.Commands {
		if done < n && x.Runs > x.Failed {
			f.omit(kCommands, 1, x.Runs-x.Failed, x.Spans)
			done++
			if x.Failed == 0 {
				continue
			}
			x.Runs = x.Failed // the failed runs stay with the failures
		}
		kept = append(kept, x)
	}
	f.Commands = kept
	return done > 0
}

// shortenPlan drops the plan's completed items, counted.
func (f *facts) shortenPlan() bool {
	kept := f.Plan[:0]
	n := 0
	for _, s := range f.Plan {
		if strings.HasPrefix(s, "[completed]") {
			n++
			continue
		}
		kept = append(kept, s)
	}
	f.Plan = kept
	f.omit(kPlan, n, 0, []int{f.PlanSpan})
	return n > 0
}

// shortenReasons cuts the reasons of the oldest failures (an eighth of
// those with more than one line, at least one) to their last line,
// saying how many lines went and where they are.
func (f *facts) shortenReasons() bool {
	n := 0
	for _, x := range f.Failures {
		if len(x.Reason) > 1 {
			n++
		}
	}
	n = min(n, 1+n/8)
	done := 0
	for i := range f.Failures {
		x := &f.Failures[i]
		if done == n {
			break
		}
		if len(x.Reason) > 1 {
			x.Reason = []string{fmt.Sprintf("[%d lines cut, in %s] %s", len(x.Reason)-1, f.blobs([]int{x.Span}), x.Reason[len(x.Reason)-1])}
			done++
		}
	}
	return done > 0
}

// dropMedia counts and removes the oldest images and documents (an
// eighth, at least one).
func (f *facts) dropMedia() bool {
	n := min(len(f.Media), 1+len(f.Media)/8)
	for _, m := range f.Media[:n] {
		f.omit(kMedia, m.Count, 0, []int{m.Span})
	}
	f.Media = f.Media[n:]
	return n > 0
}

func (f *facts) dropSearches(n int) bool {
	n = min(n, len(f.Searches))
	for _, x := range f.Searches[:n] {
		f.omit(kSearches, 1, 0, []int{x.Span})
	}
	f.Searches = f.Searches[n:]
	return n > 0
}

// dropFiles counts and removes the n oldest files of operation op (any,
// when op is "").
func (f *facts) dropFiles(op string, n int) bool {
	done := 0
	kept := f.Files[:0]
	for _, x := range f.Files {
		if done < n && (op == "" || x.Op == op) {
			f.omit(kFiles, 1, 0, []int{x.Span})
			done++
			continue
		}
		kept = append(kept, x)
	}
	f.Files = kept
	return done > 0
}

func (f *facts) dropFailures(n int) bool {
	n = min(n, len(f.Failures))
	for _, x := range f.Failures[:n] {
		f.omit(kFailures, x.Count, 0, []int{x.Span})
	}
	f.Failures = f.Failures[n:]
	return n > 0
}

// shortenRequests halves the longest user requests (those over half the
// longest's length), down to n bytes.
func (f *facts) shortenRequests(n int) bool {
	longest := 0
	for _, r := range f.Requests {
		longest = max(longest, len(r.Text)+len(r.Tail))
	}
	done := false
	for i := range f.Requests {
		r := &f.Requests[i]
		if l := len(r.Text) + len(r.Tail); l > longest/2 && f.halve(r, n) {
			done = true
		}
	}
	return done
}

// dropPlan counts and removes the plan.
func (f *facts) dropPlan() bool {
	if len(f.Plan) == 0 {
		return false
	}
	f.omit(kPlan, len(f.Plan), 0, []int{f.PlanSpan})
	f.Plan = nil
	return true
}

// dropMiddleRequest counts and removes the oldest requests after the
// first (an eighth, at least one), never the first and the last.
func (f *facts) dropMiddleRequest() bool {
	n := min(len(f.Requests)-2, 1+(len(f.Requests)-2)/8)
	if n <= 0 {
		return false
	}
	for _, r := range f.Requests[1 : 1+n] {
		f.omit(kRequests, 1, 0, []int{r.Span})
	}
	f.Requests = slices.Delete(f.Requests, 1, 1+n)
	return true
}
