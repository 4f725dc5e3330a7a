// Package validate checks Anthropic Messages requests against the rules the
// API enforces and ctxguard promises (valid by construction: tool pairs
// kept, at most 4 cache markers, the latest thinking byte-identical), and
// compares a rewritten body with its original (unchanged bytes forwarded
// exactly, no signature kept on a block whose prefix changed). Every test of a
// pass runs its output through Rewrite.
//
// It is test and diagnostic code, not the request path: it favours
// precise reports over speed, but stays linear in the body size: on the
// development machine a 1 MB request takes about 0.5 ms to check, a 1 MB
// rewrite about 1 ms (BenchmarkRequest1MB, BenchmarkRewrite1MB).
//
// # What Request checks
//
//   - The body is valid JSON (exactly as encoding/json accepts it) and a
//     Messages request: an object with a non-empty "model" string and a
//     "messages" array of message objects that all have "content";
//     "max_tokens", if present, is a positive integer; "stream", if
//     present, a boolean; "system" a string or an array of text blocks with
//     non-empty text; "tools" an array of objects with a string "name".
//   - Every message has role "user", "assistant" or "system" (a
//     system-role message inside messages is legal; Claude Code sends one).
//   - Content is a string or an array of block objects, each with a string
//     "type". Content is non-empty ("" and [] are rejected) except in the
//     final assistant message (a prefill), which may be empty but must not
//     end with whitespace. A text block has a string "text" that is not
//     "", and a message whose blocks are all text may not be all
//     whitespace, as the API rejects both.
//   - tool_use blocks appear only in assistant messages, have a string id
//     matching ^[a-zA-Z0-9_-]+$ that is unique in the request, a string
//     name and an object input. tool_result blocks appear only in user
//     messages, have a string tool_use_id and, if present, string or array
//     content.
//   - Pairing: the tool_use blocks of assistant message i are answered by
//     exactly one tool_result each in message i+1, which must be a user
//     message, and every tool_result of user message i answers a tool_use
//     of message i-1. In a user message the tool_result blocks come before
//     any other block. System-role messages are NOT transparent here: the
//     API's own check speaks of "the next message", so a system message
//     between a tool_use and its results is reported. Claude Code places
//     its system message at messages[1], right after the first user
//     message, where no tool round can straddle it.
//   - At most 4 cache_control markers in system, tools and messages
//     (including inside tool_result content, as the parser counts them);
//     every marker this package can see is an object with a string "type";
//     thinking blocks carry no marker.
//   - thinking blocks (assistant messages only) have a string "thinking"
//     (which may be empty) and a non-empty string "signature";
//     redacted_thinking blocks a non-empty string "data". Two thinking
//     blocks with the same signature but different text mean one of them
//     was edited.
//
// Not checked: the order of roles (the API merges consecutive turns of one
// role), the first message's role, that an assistant turn under extended
// thinking starts with a thinking block, that no block follows the
// tool_use blocks of an assistant message, and fields this package does not
// know (they are the client's business and Rewrite keeps them identical).
//
// # What Rewrite allows
//
// The two bodies are parsed and aligned structurally; everything outside
// the changes listed here must be byte-identical, including key order,
// escapes, whitespace, unknown fields and unknown block types.
//
//   - Top level: members whose key is in Options.AllowTopLevel may be
//     added or changed (not removed); "system" and "tools" listed there may
//     change freely, "messages" is always compared. Otherwise "system" and
//     "tools" may only gain cache_control markers
//     (Options.AllowCacheMarkers); a string system prompt may then become
//     one text block with the same text bytes.
//   - Messages stay in order. With Options.AllowMessageRemoval whole
//     messages may be removed, and tool_use / tool_result blocks may be
//     removed from messages that stay, but only as whole tool rounds: a
//     removed tool_use takes every tool_result answering it with it, and
//     the other way round; a text block of white space alone may go with
//     a tool round removed from its message (the API refuses a message
//     left with nothing else). Nothing of the current turn (the latest
//     assistant message and everything after it; the last message if
//     there is no assistant message) is ever removed. Messages are
//     aligned by the tool ids and thinking blocks they hold, else by
//     their other blocks, matching from the end: of identical original
//     messages the older ones count as removed.
//   - Within a message, members other than content are byte-identical, and
//     blocks are byte-identical except:
//     tool_result content may change (it stays a string or an array, with
//     the same tool_use_id and is_error; cache_control markers inside it
//     may not disappear, and new ones need AllowCacheMarkers);
//     tool_use input may change with Options.AllowInputEdits (id and name
//     unchanged);
//     text, image, document, tool_use and tool_result blocks may gain a
//     cache_control member with Options.AllowCacheMarkers, and a string
//     content may then become one text block with the same text bytes and
//     the marker (the shape Claude Code itself sends);
//     thinking and redacted_thinking blocks of assistant messages other
//     than the latest one may be removed with
//     Options.AllowThinkingRemoval, but a thinking block that is present is
//     byte-identical, and the latest assistant message's thinking blocks
//     are always present and byte-identical.
//   - Replacement text: where every block of a message was removed by the
//     rules above, the message may keep a single non-blank text block (or
//     a string content) in their place instead of being removed. Its
//     members are limited to type, text and (with AllowCacheMarkers)
//     cache_control.
//
// Existing cache_control markers never change or disappear. Unknown block
// types never change, gain markers or go away except with their message.
// Rewrite does not hold the original to Request's rules: only the
// rewritten body must be valid.
//
// # Reports
//
// Both functions return an *Error whose Problems name a Rule (stable
// values tests may compare), a Path in the API's own notation
// ("messages.3.content.1"; "orig." in front for a place in the original,
// for what a rewrite removed) and a Detail saying what is wrong.
package validate

import (
	"fmt"
	"strings"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/internal/uncompact"
)

// Options says which changes a rewrite may make, beyond editing tool
// results.
type Options struct {
	// AllowInputEdits permits changed tool_use inputs (clear_tool_inputs).
	AllowInputEdits bool
	// AllowThinkingRemoval permits removing thinking blocks from assistant
	// messages other than the latest one.
	AllowThinkingRemoval bool
	// AllowMessageRemoval permits removing whole messages (tool-round
	// trimming) and tool_use / tool_result blocks in whole rounds, as long
	// as pairing stays valid and the current turn is kept.
	AllowMessageRemoval bool
	// AllowRoundTrimming, with AllowMessageRemoval, permits a text block
	// (the trimming note) in a message whose tool results were dropped.
	AllowRoundTrimming bool
	// AllowCacheMarkers permits adding cache_control markers (total <= 4).
	AllowCacheMarkers bool
	// AllowTopLevel lists top-level keys that may be added or changed
	// (e.g. "thinking" for the binding setting). It has no effect on
	// "messages".
	AllowTopLevel []string
	// AllowCompaction permits a compaction: the messages from the first
	// user message up to an assistant message replaced by one summary
	// message (see uncompact.Undo); the rest is checked against the original
	// with that span replaced the same way.
	AllowCompaction bool
}

// Rule names the rule a Problem breaks. The values are stable: tests may
// compare them.
type Rule string

// Rules checked by Request.
const (
	RuleJSON         Rule = "json"          // not valid JSON
	RuleShape        Rule = "shape"         // not a Messages request, or a field of the wrong type
	RuleRole         Rule = "role"          // a role other than user, assistant, system
	RuleEmpty        Rule = "empty"         // no messages, empty content or text, whitespace-only text
	RuleBlock        Rule = "block"         // a malformed block, or one in a role that may not hold it
	RuleToolID       Rule = "tool-id"       // a bad or duplicated tool_use id
	RuleToolPairing  Rule = "tool-pairing"  // tool_use / tool_result pairing broken
	RuleCacheControl Rule = "cache-control" // too many markers, a malformed or misplaced one
	RuleThinking     Rule = "thinking"      // a thinking block without signature, or visibly edited
)

// Rules checked by Rewrite on top of Request.
const (
	RuleOriginal        Rule = "original"         // the original body does not parse
	RuleTopLevel        Rule = "top-level"        // a top-level member changed, added, removed or moved
	RuleSystem          Rule = "system"           // the system prompt changed
	RuleTools           Rule = "tools"            // the tool definitions changed
	RuleMessageRemoved  Rule = "message-removed"  // a message removed where that is not allowed
	RuleMessageAdded    Rule = "message-added"    // a message with no counterpart in the original
	RuleMessageChanged  Rule = "message-changed"  // role or another member of a message changed
	RuleBlockRemoved    Rule = "block-removed"    // a block removed where that is not allowed
	RuleBlockAdded      Rule = "block-added"      // a block with no counterpart in the original
	RuleBlockChanged    Rule = "block-changed"    // a block changed in a way no option allows
	RuleInputChanged    Rule = "input-changed"    // a tool_use input changed without AllowInputEdits
	RuleThinkingChanged Rule = "thinking-changed" // a thinking block altered, or the latest one removed
	RuleCacheMarker     Rule = "cache-marker"     // a marker added without AllowCacheMarkers, or one changed or removed
	RuleHalfRound       Rule = "half-round"       // a tool_use removed without its tool_result, or the reverse
)

// Problem is one broken rule.
type Problem struct {
	Rule Rule
	// Path locates the problem the way the API's errors do, e.g.
	// "messages.3.content.1" or "tools.2"; empty for the whole request.
	// For Rewrite it is a path in the rewritten body, except that a path
	// starting with "orig." is in the original (for what was removed).
	Path   string
	Detail string
}

func (p Problem) String() string {
	if p.Path == "" {
		return fmt.Sprintf("[%s] %s", p.Rule, p.Detail)
	}
	return fmt.Sprintf("%s: [%s] %s", p.Path, p.Rule, p.Detail)
}

// Error is what Request and Rewrite return: every problem found, in body
// order (Request's problems first), up to a limit of 50.
type Error struct {
	Problems []Problem
	Omitted  int // problems found beyond the limit and not listed
}

func (e *Error) Error() string {
	var sb strings.Builder
	n := len(e.Problems) + e.Omitted
	if n == 1 {
		return "validate: " + e.Problems[0].String()
	}
	fmt.Fprintf(&sb, "validate: %d problems:", n)
	for _, p := range e.Problems {
		sb.WriteString("\n\t")
		sb.WriteString(p.String())
	}
	if e.Omitted > 0 {
		fmt.Fprintf(&sb, "\n\t(and %d more)", e.Omitted)
	}
	return sb.String()
}

// Rules returns the rule of every listed problem, in order, for tests.
func (e *Error) Rules() []Rule {
	r := make([]Rule, len(e.Problems))
	for i, p := range e.Problems {
		r[i] = p.Rule
	}
	return r
}

const maxProblems = 50

type problems struct {
	list    []Problem
	omitted int
}

func (p *problems) add(rule Rule, path, format string, args ...any) {
	if len(p.list) >= maxProblems {
		p.omitted++
		return
	}
	p.list = append(p.list, Problem{Rule: rule, Path: path, Detail: fmt.Sprintf(format, args...)})
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &Error{Problems: p.list, Omitted: p.omitted}
}

// Request checks one request body and returns an *Error listing every
// problem found, or nil. It never panics, whatever the input.
func Request(body []byte) error {
	var ps problems
	checkRequest(body, &ps)
	return ps.err()
}

// Rewrite checks that rewritten is a valid request (Request) and differs
// from orig only in the ways opts allows (see the package documentation):
// unknown fields, unknown block types, other messages and blocks
// byte-identical; every tool_use keeps its tool_result; the latest
// assistant message's thinking blocks unchanged. It returns an *Error
// listing Request's problems with rewritten and then the first
// differences, or nil. It never panics, whatever the input.
func Rewrite(orig, rewritten []byte, opts Options) error {
	var ps problems
	if opts.AllowCompaction {
		o, err := uncompact.Bodies(anthropic.Parse, orig, rewritten)
		if err != nil {
			ps.add(RuleMessageRemoved, "messages", "%v", err)
			return ps.err()
		}
		orig = o
	}
	rc := checkRequest(rewritten, &ps)
	if rc == nil {
		return ps.err()
	}
	oc, err := parse(orig)
	if err != nil {
		ps.add(RuleOriginal, "", "original body: %v", err)
		return ps.err()
	}
	if string(orig) != string(rewritten) {
		d := newDiffer(oc, rc, opts, &ps)
		d.run()
	}
	return ps.err()
}
