package engine

import (
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/splice"
)

// TestStubs: a record's stubs copy the heads of the edits' replacements
// (the body's memory goes back to a pool), one stub per blob, in a fixed
// number of allocations whatever the number of stubs; the text is
// decoded only when asked for.
func TestStubs(t *testing.T) {
	repl := []byte(`"[ctxguard cleared 12,000 bytes: blob aaaaaaaaaaaaa]"`)
	long := []byte(`"` + strings.Repeat("x", 5000) + `"`)
	out := stubs([]splice.Edit{{Span: splice.Span{Start: 10, End: 12010}, Repl: repl, Blob: "aaaaaaaaaaaaa bbbbbbbbbbbbb"}, {Span: splice.Span{Start: 20000, End: 30000}, Repl: long, Blob: "ccccccccccccc"}})
	for i := range repl {
		repl[i] = 'x'
	}
	if len(out) != 3 || out[0].Text() != "[ctxguard cleared 12,000 bytes: blob aaaaaaaaaaaaa]" || out[0].Bytes != 12000 || out[0].Sent != len(repl) ||
		out[1].Blob != "bbbbbbbbbbbbb" || out[1].Head != nil || len(out[2].Head) != record.StubHeadMax || len(out[2].Text()) != record.StubTextMax {
		t.Fatalf("stubs: %+v", out)
	}
	many := make([]splice.Edit, 300)
	for i := range many {
		many[i] = splice.Edit{Span: splice.Span{Start: i * 100, End: i*100 + 90}, Repl: repl, Blob: "aaaaaaaaaaaaa"}
	}
	if n := testing.AllocsPerRun(20, func() { stubs(many) }); n > 2 {
		t.Errorf("stubs of 300 edits: %v allocations, want 2", n)
	}
}
