// Package allow says, in the Anthropic validator's terms, what a rewrite
// under a configuration may change: tests and replays check every
// rewritten request with validate.Rewrite(orig, sent, allow.For(cfg)).
// It is apart from package validate, which the passes' tests import, so
// that validate knows no configuration.
package allow

import (
	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/pass/thinking"
	"github.com/ctxguard/ctxguard/tools/validate"
)

// For returns what a rewrite under cfg may change besides tool results,
// in the validator's terms: tests and replays check every rewritten
// request with validate.Rewrite(orig, sent, For(cfg)).
func For(cfg config.Config) validate.Options {
	c := pass.Get[clearing.Config](cfg.Passes)
	o := validate.Options{AllowTopLevel: anthropic.SettingsMembers}
	if c.Enabled {
		o.AllowInputEdits = len(c.ClearInputs) > 0
		o.AllowThinkingRemoval = c.Thinking
		o.AllowCacheMarkers = c.CacheMarker
		o.AllowMessageRemoval = c.Trim.Enabled
		o.AllowRoundTrimming = c.Trim.Enabled
	}
	o.AllowCompaction = pass.Get[compact.Config](cfg.Passes).Enabled
	o.AllowThinkingRemoval = o.AllowThinkingRemoval || pass.Get[thinking.Config](cfg.Passes).Enabled
	return o
}
