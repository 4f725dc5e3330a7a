package thinking

import (
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pipeline"
)

// init registers the pass with package pass, its section under the YAML
// key thinking_guard. The guard runs before clearing, on the history as
// the client sent it. Its settings size the signature cache, which
// outlives reloads: only a restart changes them.
func init() {
	pass.Register(pass.Module[Config]{
		Name:     "thinking",
		Key:      "thinking_guard",
		Order:    40,
		Listed:   50,
		Defaults: Defaults,
		Enabled:  func(c *Config) *bool { return &c.Enabled },
		Compile: func(c Config, env pass.Env) (pipeline.Pass, error) {
			sigs := env.Signatures
			if sigs == nil {
				sigs = NewSignatures(c, env.Now)
			}
			return New(sigs)
		},
		RestartOnly: []string{"ttl", "max_entries"},
	})
}
