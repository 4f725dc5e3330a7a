package compact

import (
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pipeline"
)

// init registers the pass with package pass, its section under the YAML
// key compact. Compaction runs last: it replaces the oldest part of a long
// history, cleared or not, with a summary.
func init() {
	pass.Register(pass.Module[Config]{
		Name:     "compact",
		Key:      "compact",
		Order:    60,
		Listed:   60,
		Defaults: Defaults,
		Enabled:  func(c *Config) *bool { return &c.Enabled },
		Compile: func(c Config, env pass.Env) (pipeline.Pass, error) {
			if p, ok := env.Previous.(*Pass); ok {
				return p, nil // same section, same collaborators: keep the summaries being written
			}
			return New(c, Options{Blobs: env.Blobs, Summarizer: env.Summarizer, Log: env.Log, Now: env.Now})
		},
	})
}
