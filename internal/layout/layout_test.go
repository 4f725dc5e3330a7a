// Package layout holds the tests that keep the repository's layout what
// its folders promise: the request path (adapter → conversation →
// pipeline and passes → splice → proxy) free of offline tooling and of
// the layers above it, and its files and functions small enough to read.
//
// TestDeps is a dependency test in the manner of Tailscale's deptest: a
// table of rules, each with its reason, checked against `go list`; a
// rule whose package no longer exists fails too, so that a move cannot
// make a rule silently vacuous. TestSizes checks the size limits and logs
// the figures (`go test ./internal/layout -run TestSizes -v`).
package layout

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"iter"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/internal/module"
)

// pkg is one package of the module, as go list reports it.
type pkg struct {
	path    string   // import path, relative to the module ("." for the root)
	dir     string   // absolute folder
	files   []string // non-test Go files (GoFiles), names only
	imports []string // direct imports, module-relative ("" prefix dropped) for the module's own
	deps    []string // all dependencies, module-relative for the module's own
}

// listPackages returns the module's packages (non-test), keyed by their
// module-relative path.
func listPackages(t *testing.T, patterns ...string) map[string]*pkg {
	t.Helper()
	root := moduleRoot(t)
	args := append([]string{"list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}\t{{join .Imports \" \"}}\t{{join .Deps \" \"}}"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string]*pkg{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			t.Fatalf("go list: unexpected line %q", line)
		}
		p := &pkg{path: rel(f[0]), dir: f[1], files: strings.Fields(f[2])}
		for _, i := range strings.Fields(f[3]) {
			p.imports = append(p.imports, rel(i))
		}
		for _, d := range strings.Fields(f[4]) {
			p.deps = append(p.deps, rel(d))
		}
		m[p.path] = p
	}
	return m
}

// rel turns an import path of the module into a module-relative one
// ("." for the root); other paths are returned as they are, prefixed by
// "ext:" so that they never match a module pattern.
func rel(path string) string {
	switch {
	case path == module.Path:
		return "."
	case strings.HasPrefix(path, module.Path+"/"):
		return strings.TrimPrefix(path, module.Path+"/")
	}
	return "ext:" + path
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := module.Root(wd)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// match reports whether the module-relative path p matches pattern: a
// path, or a path followed by "/..." for it and everything under it.
func match(p, pattern string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

func matchAny(p string, patterns []string) bool {
	return slices.ContainsFunc(patterns, func(pat string) bool { return match(p, pat) })
}

// offline are the packages that only tests, the replay and the load test
// use: tooling, fake model APIs and test helpers. The library and the
// server never link them.
var offline = []string{
	"tools/...",
	"anthropic/anthropictest",
	"openai/openaitest",
	"gemini/geminitest",
	"store/storetest",
	"store/redis/redistest",
	"internal/testtool",
	"internal/guardtest",
	"internal/testclock",
	"internal/imagetest",
	"internal/shareddata",
	"internal/procs",
	"internal/fault",
	"internal/fleet",
	"internal/e2e",
	"internal/browser",
	"internal/layout",
}

// offlineFiles are files of runtime packages that hold offline code: the
// OpenAI validators, which read their adapter's parser internals and so
// stay in the adapter's package. The figure of offline lines a library
// user links counts them; the limit (no offline package linked) does not.
var offlineFiles = []string{
	"openai/chat/validate.go",
	"openai/responses/validate.go",
	"gemini/validate.go",
}

// protocols are the protocol adapters.
var protocols = []string{"anthropic/...", "openai/...", "gemini/..."}

// rule forbids the packages matching from to depend on those matching to.
// direct limits it to direct imports; else any dependency counts.
type rule struct {
	from, to []string
	except   []string // packages matching to that from may use all the same
	direct   bool
	why      string
}

var rules = []rule{
	{
		from: []string{"...runtime"}, to: []string{"tools/..."},
		why: "offline tooling (replay, transcripts, validators, load test) never ships in the library or the server",
	},
	{
		from: []string{"pass/...", "pipeline/...", "conversation/...", "proxy/...", "splice/...", "protocol/...", "dashboard/...", "observe/..."},
		to:   protocols,
		why:  "the request path's layers are protocol-neutral: they know a protocol only through package protocol and conversation.Dialect; the adapters are chosen at the edge (the root, serve, cmd/)",
	},
	{
		from: []string{"proxy/..."}, to: []string{"engine/...", "serve/...", "observe/...", "."},
		why: "the proxy calls the engine through its hooks and hands records to a hook; it never calls up into the layers that wire it",
	},
	{
		from: []string{"engine/..."}, to: []string{"serve/...", "observe/...", "."},
		why: "the engine rewrites bodies and publishes records; serving them over HTTP and observing the records are layers above it",
	},
	{
		from: []string{"observe/..."}, to: []string{"engine/...", "serve/...", "."},
		why: "observers see records only",
	},
	{
		from: []string{"serve/..."}, to: []string{"."},
		why: "the root package is a facade over serve, not the other way round",
	},
	{
		from: []string{"config"}, to: []string{"pass/..."}, except: []string{"pass"},
		why: "config decodes the passes' sections through package pass's registry and never names a pass; a pass registers itself (pass/all)",
	},
	{
		from: []string{"pass/..."}, to: []string{"config"},
		why: "a pass is configured by its own section, which it defines; config depends on the registry, not the other way round",
	},
}

// runtimeExempt are the packages that are not runtime code: the commands,
// which link the offline subcommands, and everything offline.
var runtimeExempt = append([]string{"cmd/...", "tools/loadtest/cmd/..."}, offline...)

// TestDeps checks every rule against the packages' dependencies, and that
// every package a rule names still exists.
func TestDeps(t *testing.T) {
	pkgs := listPackages(t, "./...")
	for _, r := range rules {
		for _, pats := range [][]string{r.from, r.to} {
			for _, pat := range pats {
				if pat == "...runtime" {
					continue
				}
				if !slices.ContainsFunc(slices.Collect(mapsKeys(pkgs)), func(p string) bool { return match(p, pat) }) {
					t.Errorf("rule %q names %s, which matches no package: update the rule with the move", r.why, pat)
				}
			}
		}
		for _, p := range sortedKeys(pkgs) {
			if !applies(r, p) {
				continue
			}
			deps := pkgs[p].deps
			if r.direct {
				deps = pkgs[p].imports
			}
			for _, d := range deps {
				if d != p && matchAny(d, r.to) && !matchAny(d, r.except) {
					t.Errorf("%s depends on %s: %s", p, d, r.why)
				}
			}
		}
	}
	// The library and the server link nothing offline.
	for _, top := range []string{".", "serve"} {
		p := pkgs[top]
		if p == nil {
			t.Errorf("package %s is gone: update TestDeps", top)
			continue
		}
		for _, d := range append([]string{top}, p.deps...) {
			if matchAny(d, offline) {
				t.Errorf("go list -deps ./%s contains the offline package %s", top, d)
			}
		}
	}
}

func applies(r rule, p string) bool {
	for _, f := range r.from {
		if f == "...runtime" {
			if !matchAny(p, runtimeExempt) && !strings.HasPrefix(p, "ext:") {
				return true
			}
			continue
		}
		if match(p, f) {
			return true
		}
	}
	return false
}

// Size limits: a file or a function longer than these is split into named
// parts. The root package is a facade.
const (
	maxRootLines     = 400
	maxFileLines     = 700
	maxFuncLines     = 100
	generatedMarker  = "Code generated"
	requestPathWords = "the request path"
)

// requestPath are the packages a request goes through when it is served.
var requestPath = []string{".", "engine/...", "serve/...", "proxy/...", "pipeline/...", "pass/...", "splice/...",
	"conversation/...", "protocol/...", "anthropic", "openai", "openai/chat", "openai/responses", "internal/jsonscan",
	"internal/convbuild", "internal/tap", "tokens", "store", "store/redis", "summarize", "session", "record", "observe/..."}

// TestSizes checks the size limits and logs the layout's figures: lines
// of non-test Go in the root package, offline lines a library user links
// (go list -deps .), files over the limit, functions of the request path
// over the limit.
func TestSizes(t *testing.T) {
	pkgs := listPackages(t, "./...")
	fset := token.NewFileSet()
	rootLines, offlineLines, offlineFileLines := 0, 0, 0
	var bigFiles, bigFuncs []string
	lib := pkgs["."]
	linked := map[string]bool{".": true}
	for _, d := range lib.deps {
		linked[d] = true
	}
	for _, p := range sortedKeys(pkgs) {
		pk := pkgs[p]
		for _, name := range pk.files {
			file := filepath.Join(pk.dir, name)
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			lines := bytes.Count(src, []byte("\n"))
			relFile := filepath.ToSlash(filepath.Join(p, name))
			if p == "." {
				rootLines += lines
				relFile = name
			}
			switch {
			case linked[p] && matchAny(p, offline):
				offlineLines += lines
			case linked[p] && slices.Contains(offlineFiles, relFile):
				offlineFileLines += lines
			}
			if bytes.Contains(src[:min(len(src), 400)], []byte(generatedMarker)) {
				continue
			}
			if lines > maxFileLines {
				bigFiles = append(bigFiles, relFile+" "+itoa(lines))
			}
			if !matchAny(p, requestPath) {
				continue
			}
			f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				if n > maxFuncLines {
					name := fd.Name.Name
					if fd.Recv != nil && len(fd.Recv.List) > 0 {
						name = recvName(fd.Recv.List[0].Type) + "." + name
					}
					bigFuncs = append(bigFuncs, relFile+":"+name+" "+itoa(n))
				}
			}
		}
	}
	t.Logf("root package: %d lines of non-test Go (limit %d)", rootLines, maxRootLines)
	t.Logf("offline code linked by the library (go list -deps .): %d lines in offline packages, %d in the adapters' validators", offlineLines, offlineFileLines)
	t.Logf("files over %d lines: %d %v", maxFileLines, len(bigFiles), bigFiles)
	t.Logf("functions over %d lines on %s: %d %v", maxFuncLines, requestPathWords, len(bigFuncs), bigFuncs)
	if rootLines > maxRootLines {
		t.Errorf("the root package has %d lines of non-test Go; it is a facade of at most %d", rootLines, maxRootLines)
	}
	if offlineLines > 0 {
		t.Errorf("the library links %d lines of offline packages", offlineLines)
	}
	for _, f := range bigFiles {
		t.Errorf("file over %d lines: %s", maxFileLines, f)
	}
	for _, f := range bigFuncs {
		t.Errorf("function over %d lines on %s: %s", maxFuncLines, requestPathWords, f)
	}
}

func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.IndexListExpr:
		return recvName(x.X)
	}
	return "?"
}

func itoa(n int) string { return strconv.Itoa(n) }

func mapsKeys(m map[string]*pkg) iter.Seq[string] { return maps.Keys(m) }

func sortedKeys(m map[string]*pkg) []string { return slices.Sorted(maps.Keys(m)) }
