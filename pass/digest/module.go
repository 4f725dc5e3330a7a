package digest

import (
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pipeline"
)

// init registers the pass with package pass, its section under the YAML
// key digest. The digest runs after compression, on what compression left
// of a large result.
func init() {
	pass.Register(pass.Module[Config]{
		Name:     "digest",
		Key:      "digest",
		Order:    20,
		Listed:   20,
		Defaults: Defaults,
		Enabled:  func(c *Config) *bool { return &c.Enabled },
		Compile: func(c Config, env pass.Env) (pipeline.Pass, error) {
			return New(c, env.Blobs, env.Summarizer, env.Log)
		},
	})
}
