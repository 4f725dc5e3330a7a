package responses

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/conversation"
)

// FuzzParse: Parse never panics and its spans lie in the body; Validate
// does not panic; and ParseAfter, given the parse of an earlier body and
// Stable's count, agrees with Parse. The corpus in testdata/fuzz/FuzzParse
// holds pairs of bodies of one session (the second repeats the first's
// items and adds more), odd item types and broken shapes.
func FuzzParse(f *testing.F) {
	s1 := Session([]Round{{Reasoning: true, Output: "one"}})
	s2 := Session([]Round{{Reasoning: true, Output: "one"}, {Kind: "custom", Args: "p", Output: []any{map[string]any{"type": "input_text", "text": "x"}}, Text: "ok"}})
	f.Add(s1, s2)
	f.Add(s2, s1)
	f.Add([]byte(`{"input":"hi"}`), []byte(`{"input":"hi","input":[{"role":"user","content":"x"}]}`))
	f.Fuzz(func(t *testing.T, prev, body []byte) {
		c, err := Parse(body)
		_ = Validate(body)
		_ = ValidateRewrite(prev, body)
		if err == nil {
			checkSpans(t, c)
			for mi := range c.Messages {
				m := &c.Messages[mi]
				var kept [][]byte
				for bi := range m.Blocks {
					if k := c.Dialect.KeptBlock(c, m, &m.Blocks[bi]); k != nil {
						kept = append(kept, k)
					}
				}
				c.Dialect.ReplaceMessage(c, mi, kept)
				for _, b := range m.Blocks {
					for _, p := range b.Parts {
						c.Dialect.Image(c, p.Span)
					}
				}
			}
			c.Dialect.SessionID(c)
		}
		pc, perr := Parse(prev)
		if perr != nil {
			return
		}
		n := Stable(pc, body)
		got, gerr := ParseAfter(body, pc, n)
		if (err == nil) != (gerr == nil) {
			t.Fatalf("Parse: %v; ParseAfter(stable %d): %v", err, n, gerr)
		}
		if err != nil {
			return
		}
		if diff := cmp.Diff(c.Messages, got.Messages); diff != "" {
			t.Fatalf("ParseAfter(stable %d) differs from Parse (-Parse +ParseAfter):\n%s", n, diff)
		}
		if c.List != got.List || c.Model != got.Model || c.Continued != got.Continued || c.System != got.System {
			t.Fatal("ParseAfter's top level differs from Parse's")
		}
	})
}

// checkSpans checks that every span of c lies in the body, blocks in
// their message and parts in their block.
func checkSpans(t *testing.T, c *conversation.Conversation) {
	t.Helper()
	all := conversation.Span{Start: 0, End: len(c.Body)}
	for mi, m := range c.Messages {
		if !all.Contains(m.Span) || !c.List.Contains(m.Span) {
			t.Fatalf("message %d at %v outside the input %v", mi, m.Span, c.List)
		}
		for bi, b := range m.Blocks {
			if !m.Span.Contains(b.Span) {
				t.Fatalf("block %d.%d at %v outside its message %v", mi, bi, b.Span, m.Span)
			}
			for _, sp := range []conversation.Span{b.Text, b.ID, b.Input, b.Content} {
				if !sp.IsZero() && !b.Span.Contains(sp) {
					t.Fatalf("block %d.%d: span %v outside the block %v", mi, bi, sp, b.Span)
				}
			}
			for _, p := range b.Parts {
				if !b.Span.Contains(p.Span) {
					t.Fatalf("part of block %d.%d outside it", mi, bi)
				}
			}
		}
	}
}
