package ctxguard

import (
	"os/exec"
	"strings"
	"testing"
)

// protocolPackages are the protocol adapters: only the orchestration (this
// package, cmd/, replay and the tests' tools) may depend on them.
var protocolPackages = []string{
	"github.com/ctxguard/ctxguard/anthropic",
	"github.com/ctxguard/ctxguard/openai",
}

// TestLayering keeps the request path's layers protocol-neutral, as
// Tailscale's deptest does: no package under pass/, pipeline/,
// conversation/, proxy/, dashboard/ (or protocol/, the seam itself) depends, even
// indirectly, on a protocol adapter. They know protocols only through
// package protocol and conversation.Dialect.
func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Deps \" \"}}",
		"./pass/...", "./pipeline/...", "./conversation/...", "./proxy/...", "./protocol/...", "./splice/...", "./dashboard/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, " ")
		if !neutral(pkg) {
			continue
		}
		checked++
		for _, d := range strings.Fields(deps) {
			for _, p := range protocolPackages {
				if d == p || strings.HasPrefix(d, p+"/") {
					t.Errorf("%s depends on the protocol package %s", pkg, d)
				}
			}
		}
	}
	if checked < 6 {
		t.Fatalf("only %d packages checked", checked)
	}
}

// neutral reports whether pkg is one of the layers that must not know a
// protocol.
func neutral(pkg string) bool {
	for _, dir := range []string{"pass", "pipeline", "conversation", "proxy", "protocol", "splice", "dashboard"} {
		p := "github.com/ctxguard/ctxguard/" + dir
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}
