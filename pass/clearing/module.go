package clearing

import (
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pipeline"
)

// init registers the pass with package pass, its section under the YAML
// key clear. Clearing runs after the per-result passes: it replaces whole
// old results and so supersedes what they did to them.
func init() {
	pass.Register(pass.Module[Config]{
		Name:     "clear",
		Key:      "clear",
		Order:    50,
		Listed:   40,
		Defaults: Defaults,
		Enabled:  func(c *Config) *bool { return &c.Enabled },
		Compile: func(c Config, env pass.Env) (pipeline.Pass, error) {
			return New(c, env.Blobs)
		},
	})
}
