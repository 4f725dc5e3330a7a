package ctxguard

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// depRule forbids the packages From names to depend, even indirectly, on
// the packages Bad names, each for its reason; Allow names packages that
// Bad's patterns match and From may use all the same. A name is a path
// relative to the module: "config" is that package, "pass/..." the
// package pass and every package under it, as go list reads it.
type depRule struct {
	From  []string
	Bad   map[string]string
	Allow []string
}

// depRules are the layering of the module, as Tailscale's deptest keeps
// its own. Every name must still match a package: a rule about a package
// that was renamed or removed fails rather than checking nothing.
var depRules = []depRule{
	{
		// The request path's layers know protocols only through package
		// protocol and conversation.Dialect; the adapters are chosen at
		// the edge (the root, cmd/, replay, the tests' tools).
		From: []string{"pass/...", "pipeline/...", "conversation/...", "proxy/...", "protocol/...", "splice/...", "dashboard/..."},
		Bad: map[string]string{
			"anthropic/...": "a protocol adapter: the layers of the request path are protocol-neutral",
			"openai/...":    "a protocol adapter: the layers of the request path are protocol-neutral",
		},
	},
	{
		// Passes plug in by registering with package pass (Caddy's
		// modules); the configuration reaches them through the registry.
		From: []string{"config"},
		Bad: map[string]string{
			"pass/...": "config decodes the passes' sections by key through package pass's registry and never names a pass; a pass registers itself (pass/all)",
		},
		Allow: []string{"pass"},
	},
	{
		From: []string{"pass/..."},
		Bad: map[string]string{
			"config": "a pass is configured by its own section, which it defines; config depends on the passes' registry, not the other way round",
		},
	},
}

// TestLayering checks depRules against go list's view of the module
// (non-test dependencies).
func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const module = "github.com/ctxguard/ctxguard"
	deps := map[string][]string{} // package → its dependencies
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, ds, _ := strings.Cut(line, " ")
		deps[pkg] = strings.Fields(ds)
	}
	matches := func(pattern, pkg string) bool {
		p := module + "/" + pattern
		if tree, ok := strings.CutSuffix(p, "/..."); ok {
			return pkg == tree || strings.HasPrefix(pkg, tree+"/")
		}
		return pkg == p
	}
	exists := func(pattern string) bool {
		for pkg := range deps {
			if matches(pattern, pkg) {
				return true
			}
		}
		return false
	}
	for _, r := range depRules {
		for _, name := range append(slices.Clone(r.From), r.Allow...) {
			if !exists(name) {
				t.Errorf("rule about %s: no package %s in the module; update the rule", name, name)
			}
		}
		for name := range r.Bad {
			if !exists(name) {
				t.Errorf("rule forbidding %s: no package %s in the module; update the rule", name, name)
			}
		}
		for pkg, ds := range deps {
			if !slices.ContainsFunc(r.From, func(f string) bool { return matches(f, pkg) }) {
				continue
			}
			for _, d := range ds {
				if slices.ContainsFunc(r.Allow, func(a string) bool { return matches(a, d) }) {
					continue
				}
				for bad, why := range r.Bad {
					if matches(bad, d) {
						t.Errorf("%s depends on %s: %s", strings.TrimPrefix(pkg, module+"/"), strings.TrimPrefix(d, module+"/"), why)
					}
				}
			}
		}
	}
}
