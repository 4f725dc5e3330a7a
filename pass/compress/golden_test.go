package compress

import (
	"github.com/ctxguard/ctxguard/internal/stub"

	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenCases are the text transforms on real tool outputs (testdata/real)
// and on synthetic ones, with default settings. Each output is kept in
// testdata/golden/<name>.golden; run `go test -run TestGolden -update` to
// rewrite them after an intended change, and review the diff.
func goldenCases(t *testing.T) []struct{ name, tool, in string } {
	var snap strings.Builder
	snap.WriteString("### Ran Playwright code\n```js\nawait page.goto('https://example.com');\n```\n### Page state\n- Page URL: https://example.com/\n- Page Title: Example\n- Page Snapshot:\n```yaml\n")
	snap.WriteString("- generic [active] [ref=e1]:\n  - banner [ref=e2]:\n    - navigation [ref=e3]:\n")
	for i := 4; snap.Len() < 24_000; i++ {
		snap.WriteString("      - listitem [ref=e" + stub.Commas(i) + "]:\n        - link \"Product " + stub.Commas(i) + "\" [ref=e" + stub.Commas(i) + "a] [cursor=pointer]:\n          - /url: /products/" + stub.Commas(i) + "\n")
	}
	snap.WriteString("  - contentinfo [ref=e9999]:\n    - paragraph [ref=e10000]: © Example\n```\n")
	var grep strings.Builder
	for i := 1; i <= 300; i++ {
		grep.WriteString("internal/jsonscan/scan.go:" + stub.Commas(i) + ":\tfunc f" + stub.Commas(i) + "() {}\n")
		if i == 7 {
			grep.WriteString("web/dist/app.min.js:1:" + strings.Repeat("var a=function(){return 1};", 40) + "\n")
		}
	}
	return []struct{ name, tool, in string }{
		{"bash-ansi", "Bash", readFixture(t, "bash-ansi.txt")},
		{"bash-curl-progress", "Bash", readFixture(t, "bash-curl-progress.txt")},
		{"bash-error", "Bash", readFixture(t, "bash-error.txt")},
		{"bash-plain", "Bash", readFixture(t, "bash-plain.txt")},
		{"grep-crlf", "Grep", readFixture(t, "grep-crlf.txt")},
		{"grep", "Grep", readFixture(t, "grep.txt")},
		{"webfetch", "WebFetch", readFixture(t, "webfetch.txt")},
		{"read-numbered", "Read", readFixture(t, "read-numbered.txt")},
		{"html-page", "Bash", htmlPage(12)},
		{"html-page-strip", "Bash", htmlPage(3)},
		{"snapshot", "mcp__playwright__browser_snapshot", snap.String()},
		{"grep-long", "Grep", grep.String()},
		{"data-uri", "Bash", "<svg><image href=\"data:image/png;base64," + b64([]byte("\x89PNG\r\n\x1a\n"), 1200) + "\"/></svg>\n"},
	}
}

func TestGolden(t *testing.T) {
	md := mustNew(t, Defaults())
	stripCfg := Defaults()
	stripCfg.HTML.Markdown = false
	stripCfg.HTML.MinChars = 256
	strip := mustNew(t, stripCfg)
	for _, tc := range goldenCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			p := md
			if strings.HasSuffix(tc.name, "-strip") {
				p = strip
			}
			got := p.Text(tc.tool, tc.in)
			if len(got) > len(tc.in) {
				t.Errorf("longer: %d -> %d", len(tc.in), len(got))
			}
			file := filepath.Join("testdata", "golden", tc.name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("(-golden +got):\n%s", diff)
			}
		})
	}
}
