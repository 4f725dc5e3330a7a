package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocsDocumentEveryMetric checks docs/observability.md's Metrics table
// against the registry: every ctxguard_ family it exposes has a row with
// its type and labels, and every row names one it exposes.
func TestDocsDocumentEveryMetric(t *testing.T) {
	b, err := os.ReadFile("../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Metrics\n")
	if !ok {
		t.Fatal("docs/observability.md has no ## Metrics section")
	}
	section, _, _ = strings.Cut(section, "\n## ")

	type row struct{ typ, labels string }
	documented := map[string]row{}
	rowRE := regexp.MustCompile("^\\| `(" + namespace + "_[a-z0-9_]+)` \\| ([a-z]+) \\| ([^|]*) \\|")
	for line := range strings.SplitSeq(section, "\n") {
		if m := rowRE.FindStringSubmatch(line); m != nil {
			if _, dup := documented[m[1]]; dup {
				t.Errorf("docs/observability.md documents %s twice", m[1])
			}
			documented[m[1]] = row{m[2], strings.TrimSpace(m[3])}
		}
	}

	// Every family exposes a series once these are observed.
	mfs, err := observed(exchanges()).reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exposed := 0
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, namespace+"_") {
			continue
		}
		exposed++
		doc, ok := documented[name]
		if !ok {
			t.Errorf("docs/observability.md's Metrics section does not document %s", name)
			continue
		}
		delete(documented, name)
		if want := strings.ToLower(mf.GetType().String()); doc.typ != want {
			t.Errorf("docs/observability.md: %s is a %s, the registry's a %s", name, doc.typ, want)
		}
		var labels []string
		for _, l := range mf.Metric[0].Label {
			labels = append(labels, l.GetName())
		}
		slices.Sort(labels)
		got := strings.Split(doc.labels, ", ")
		slices.Sort(got)
		if !slices.Equal(got, labels) {
			t.Errorf("docs/observability.md: %s has labels %q, the registry's %q", name, doc.labels, labels)
		}
	}
	for name := range documented {
		t.Errorf("docs/observability.md's Metrics section documents %s, which the registry does not expose", name)
	}
	if exposed < 15 {
		t.Errorf("only %d ctxguard_ families exposed", exposed)
	}
}
