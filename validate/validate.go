// Package validate checks Anthropic Messages requests against the rules the
// API enforces and ctxguard promises (BRIEF principle 2), and compares a
// rewritten body with its original. Every test of a pass runs its output
// through Rewrite.
package validate

// Options says which changes a rewrite may make, beyond editing tool
// results.
type Options struct {
	// AllowInputEdits permits changed tool_use inputs (clear_tool_inputs).
	AllowInputEdits bool
	// AllowThinkingRemoval permits removing thinking blocks from assistant
	// messages other than the latest one.
	AllowThinkingRemoval bool
	// AllowMessageRemoval permits removing whole messages (tool-round
	// trimming) as long as pairing stays valid.
	AllowMessageRemoval bool
	// AllowCacheMarkers permits adding cache_control markers (total <= 4).
	AllowCacheMarkers bool
	// AllowTopLevel lists top-level keys that may be added or changed
	// (e.g. "thinking" for the binding setting).
	AllowTopLevel []string
}

// Request checks one request body and returns an error listing every
// problem found, or nil.
func Request(body []byte) error { return nil }

// Rewrite checks that rewritten is a valid request (Request) and differs
// from orig only in the ways opts allows: unknown fields, unknown block
// types, other messages and blocks byte-identical; every tool_use keeps its
// tool_result; the latest assistant message's thinking blocks unchanged.
func Rewrite(orig, rewritten []byte, opts Options) error { return nil }
