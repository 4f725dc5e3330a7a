package ctxguard

import (
	"os/exec"
	"strings"
	"testing"
)

// badDeps maps a package to the packages it must not depend on, even
// indirectly, and why (in the manner of Tailscale's deptest). The
// request path runs proxy → engine (through the proxy's hooks) → passes;
// serve wires them to the network and observe watches the records.
var badDeps = map[string]map[string]string{
	"proxy": {
		"engine":  "the proxy calls the engine through its hooks (Rewriter, Outcome.Recover, Options.Record), never by name",
		"serve":   "serve wires the proxy, not the other way round",
		"observe": "the proxy hands records to a hook; it does not know who observes them",
		"":        "the root package is a facade over the proxy",
	},
	"engine": {
		"serve":   "the engine rewrites bodies; the HTTP side is serve's",
		"observe": "the engine publishes records; what observes them is not its concern",
		"":        "the root package is a facade over the engine",
	},
	"observe": {
		"engine": "observers see records only",
		"serve":  "observers see records only",
		"":       "the root package is a facade over observe",
	},
	"serve": {
		"": "the root package is a facade over serve",
	},
}

// TestRoles: each package of the request path depends only on those its
// role allows (badDeps), and every package named still exists.
func TestRoles(t *testing.T) {
	const mod = "github.com/ctxguard/ctxguard"
	name := func(p string) string {
		if p == "" {
			return mod
		}
		return mod + "/" + p
	}
	for pkg, bad := range badDeps {
		out, err := exec.Command("go", "list", "-deps", "./"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		if !deps[name(pkg)] {
			t.Fatalf("package %s is gone: update badDeps", name(pkg))
		}
		for b, why := range bad {
			if out, err := exec.Command("go", "list", "./"+b).CombinedOutput(); err != nil {
				t.Errorf("package %s is gone: update badDeps (%s)", name(b), out)
			}
			if deps[name(b)] {
				t.Errorf("%s depends on %s: %s", name(pkg), name(b), why)
			}
		}
	}
}
