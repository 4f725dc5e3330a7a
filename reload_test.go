package ctxguard

import (
	"testing"

	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/guardtest"
	"github.com/ctxguard/ctxguard/store"
)

// TestReloadHandler: Reload reports a change that concerns the proxy
// (Reloaded.Handler), so that its caller builds a new Handler, and only
// such a change; the keys that changed are named either way.
func TestReloadHandler(t *testing.T) {
	g := newGuard(t, guardtest.AllOff(), WithStore(store.NewMemory()))
	for _, tc := range []struct {
		name    string
		change  func(*config.Config)
		key     string
		handler bool
	}{
		{"upstream", func(c *config.Config) { c.Upstreams.Anthropic = "http://127.0.0.1:9" }, "upstreams", true},
		{"max_body", func(c *config.Config) { c.MaxBody /= 2 }, "max_body", true},
		{"log.dump_bodies", func(c *config.Config) { c.Log.DumpBodies = !c.Log.DumpBodies }, "log", true},
		{"compress", func(c *config.Config) { c.Passes.Switch("compress", !c.Passes.Enabled("compress")) }, "compress", false},
		{"nothing", func(*config.Config) {}, "", false},
	} {
		next := g.Config()
		tc.change(&next)
		rl, err := g.Reload(next)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if rl.Handler != tc.handler || (tc.key == "") != (len(rl.Changed) == 0) || tc.key != "" && rl.Changed[0] != tc.key {
			t.Errorf("%s: %+v; want Handler %v, changed %q", tc.name, rl, tc.handler, tc.key)
		}
	}
}
