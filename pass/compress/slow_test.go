package compress

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestAdversarialInputs keeps inputs that once hit quadratic scans
// (candidate signatures inside one long run, "data:;" repeated): they took
// seconds, now milliseconds; BenchmarkAdversarial measures them. Here each
// must give a valid result that is no longer than its input, twice the
// same.
func TestAdversarialInputs(t *testing.T) {
	p := mustNew(t, Defaults())
	for name, s := range map[string]string{
		"signatures in a run": strings.Repeat("aR0lGOD", 20000),
		"signature starts":    strings.Repeat(" iVBORw0KGgo", 12000),
		"data uris":           strings.Repeat("data:;", 20000),
		"data params":         strings.Repeat("data:a;b=c;d=e;", 10000),
		"tags":                strings.Repeat("<div>", 20000),
		"nested formatting":   "<div>" + strings.Repeat("<b><i><a>", 5000) + "</div>",
		"osc starts":          strings.Repeat("\x1b]", 20000),
		"carriage returns":    strings.Repeat("a\r", 50000),
		"script starts":       "<div>" + strings.Repeat("<script x", 20000),
		"empty lines":         strings.Repeat("\n", 100000),
		"snapshot refs":       strings.Repeat("[ref=", 40000),
	} {
		t.Run(name, func(t *testing.T) {
			for _, tool := range []string{"Bash", "Grep"} {
				out := p.Text(tool, s)
				if len(out) > len(s) || !utf8.ValidString(out) || p.Text(tool, s) != out {
					t.Errorf("%s: %d bytes in, %d out, valid %v", tool, len(s), len(out), utf8.ValidString(out))
				}
			}
		})
	}
}

func BenchmarkAdversarial(b *testing.B) {
	p := mustNew(b, Defaults())
	s := strings.Repeat("data:a;b=c;d=e;", 10000)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		p.Text("Grep", s)
	}
}
