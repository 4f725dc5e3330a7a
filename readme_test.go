package ctxguard_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/internal/module"
)

// TestREADMEExample: the README's Go example is the code of Example
// (example_readme_test.go, which runs it against a fake API) between its
// "README:" markers, word for word, so what the README shows compiles,
// declares what it uses and handles its errors.
func TestREADMEExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- README example: begin[^>]*-->\n```go\n(.*?)```\n<!-- README example: end -->").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README: no ```go block between the README example markers")
	}
	src, err := os.ReadFile("example_readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	e := regexp.MustCompile(`(?s)\n[\t ]*// README: begin\n(.*?\n)[\t ]*// README: end\n`).FindSubmatch(src)
	if e == nil {
		t.Fatal("example_readme_test.go: no README: begin and end markers")
	}
	if d := cmp.Diff(dedent(string(e[1])), string(m[1])); d != "" {
		t.Errorf("the README's Go example differs from Example's code (-example +README):\n%s", d)
	}
}

// dedent removes the tabs every non-empty line of s starts with.
func dedent(s string) string {
	lines := strings.SplitAfter(s, "\n")
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if common < 0 || n < common {
			common = n
		}
	}
	for i, l := range lines {
		if len(l) >= common && common > 0 {
			lines[i] = l[common:]
		}
	}
	return strings.Join(lines, "")
}

// TestREADMEInstall: the README's install and go get lines name this
// module, and the quick start builds the binary before it serves.
func TestREADMEInstall(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ") // lines wrap anywhere
	for _, want := range []string{
		"go install " + module.Path + "/cmd/ctxguard@latest",
		"go get " + module.Path + "@latest",
		"go work init . ../ctxguard",
		"go mod edit -replace " + module.Path + "=../ctxguard && go mod tidy",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("README lacks %q", want)
		}
	}
	// The binary is built before any shell block starts it, and no
	// block serves with go run, which would compile for minutes in
	// silence before the client's first request.
	build := strings.Index(string(readme), "go build -o ctxguard ./cmd/ctxguard")
	starts := 0
	for _, loc := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllSubmatchIndex(readme, -1) {
		block := string(readme[loc[2]:loc[3]])
		start := regexp.MustCompile(`ctxguard (serve|run)\b`).FindStringIndex(block)
		if start == nil {
			continue
		}
		starts++
		if strings.Contains(block, "go run ./cmd/ctxguard serve") || build < 0 || build > loc[2]+start[0] {
			t.Errorf("a quick start serves without building first:\n%s", block)
		}
	}
	if starts == 0 {
		t.Error("README: no shell block starts ctxguard")
	}
}

// TestREADMEShort: the README starts short. Its first screen (the first
// 45 lines) says what ctxguard is, gives the two commands, `ctxguard run
// claude` and where to look; the reference lives in docs/, and every
// document the README points to exists.
func TestREADMEShort(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(readme), "\n")
	first := strings.Join(lines[:min(45, len(lines))], "\n")
	for _, want := range []string{
		"ctxguard keeps long-running LLM agent sessions",
		"go build -o ctxguard ./cmd/ctxguard && ./ctxguard serve",
		"go test ./...",
		"./ctxguard run claude",
		"## Where to look",
		"(docs/configuration.md)",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("the README's first screen lacks %q", want)
		}
	}
	if len(lines) > 150 {
		t.Errorf("the README has %d lines; the reference belongs in docs/", len(lines))
	}
	for _, m := range regexp.MustCompile(`\]\((docs/[a-z-]+\.(?:md|png))`).FindAllStringSubmatch(string(readme), -1) {
		if _, err := os.Stat(m[1]); err != nil {
			t.Errorf("the README points to %s: %v", m[1], err)
		}
	}
}
