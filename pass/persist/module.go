package persist

import (
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pipeline"
)

// init registers the pass with package pass, its section under the YAML
// key persist. Persistence runs after compression and the digest: it
// stores the original of what is still too large and previews the
// compressed text.
func init() {
	pass.Register(pass.Module[Config]{
		Name:     "persist",
		Key:      "persist",
		Order:    30,
		Listed:   30,
		Defaults: Defaults,
		Enabled:  func(c *Config) *bool { return &c.Enabled },
		Compile: func(c Config, env pass.Env) (pipeline.Pass, error) {
			return New(c, env.Blobs)
		},
	})
}
