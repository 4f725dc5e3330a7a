// Package compress is ctxguard's per-result compression pass: it shrinks
// the text of every tool_result in a request (string content, and text
// blocks inside array content) with cheap deterministic rules, and can
// replace image blocks inside tool results with a text placeholder.
//
// The rules, in the order they run on one text:
//
//   - ansi: ANSI escape sequences removed;
//   - carriage_returns: lines overwritten with bare carriage returns
//     (progress bars) keep their final state;
//   - html: a whole HTML document becomes Markdown (or keeps its markup
//     minus script and style contents);
//   - base64: base64 data: URIs and bare base64 images become a placeholder
//     naming media type and size;
//   - snapshot: a long browser page snapshot keeps head and tail;
//   - line_clip: overlong lines keep their start;
//   - head_lines: only the first lines are kept;
//   - cap: a result over its character limit keeps head and tail.
//
// Config documents every default and why it was chosen. Results of tools
// whose text the agent copies into later calls (Read, Edit, ...) get only
// the cap; Claude Code's own <persisted-output> notices are never touched.
// Whatever a rule cuts is replaced by a short marker that says how much was
// cut and by which rule, e.g.
//
//	[... ctxguard cut 12,345 chars (lines 251-4,000); cap 20,000 chars for Grep ...]
//
// Every rule is a pure function of the result's text, its tool's name and
// the Config: the same request always gets the same bytes, so each later
// request of a session repeats an earlier rewrite exactly and prompt
// caching keeps working. A rule never makes a text longer; a result whose
// rewrite would not be shorter is left as it was.
//
// Run decides from the raw JSON bytes of each result, with one walk over
// its escapes, length bounds and a few searches anchored on rare bytes,
// whether any rule could apply, and decodes only the results that may
// change; its allocations are proportional to what it rewrites, not to the
// request (none at all when nothing changes). A *Pass is safe for
// concurrent use; its only mutable state is a bounded memo of HTML
// conversions (html.cache_bytes), which saves CPU on the requests that
// repeat a page and never changes an output.
package compress
