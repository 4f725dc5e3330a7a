// Package allow says, in the Anthropic validator's terms, what a rewrite
// under a configuration may change: tests and replays check every
// rewritten request with validate.Rewrite(orig, sent, allow.For(cfg)).
// It is apart from package validate, which the passes' tests import and
// which therefore stays free of config (config imports the passes).
package allow

import (
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/tools/validate"
)

// For returns what a rewrite under cfg may change besides tool results,
// in the validator's terms: tests and replays check every rewritten
// request with validate.Rewrite(orig, sent, For(cfg)).
func For(cfg config.Config) validate.Options {
	c := cfg.Clear
	o := validate.Options{AllowTopLevel: []string{"thinking"}} // the binding setting
	if c.Enabled {
		o.AllowInputEdits = len(c.ClearInputs) > 0
		o.AllowThinkingRemoval = c.Thinking
		o.AllowCacheMarkers = c.CacheMarker
		o.AllowMessageRemoval = c.Trim.Enabled
		o.AllowRoundTrimming = c.Trim.Enabled
	}
	o.AllowCompaction = cfg.Compact.Enabled
	o.AllowThinkingRemoval = o.AllowThinkingRemoval || cfg.ThinkingGuard.Enabled
	return o
}
