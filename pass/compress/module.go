package compress

import (
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pipeline"
)

// init registers the pass with package pass, its section under the YAML
// key compress. Per-result compression runs first: it shortens a result
// the same way on every request, and the passes after it see the
// compressed text.
func init() {
	pass.Register(pass.Module[Config]{
		Name:     Name,
		Key:      "compress",
		Order:    10,
		Listed:   10,
		Defaults: Defaults,
		Enabled:  func(c *Config) *bool { return &c.Enabled },
		Compile: func(c Config, _ pass.Env) (pipeline.Pass, error) {
			return New(c)
		},
	})
}
