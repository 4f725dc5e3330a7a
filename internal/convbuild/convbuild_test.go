package convbuild

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/conversation"
)

// build makes a conversation of the given messages, each a list of blocks
// holding a number of parts.
func build(b *Builder, body []byte, msgs [][]int) *conversation.Conversation {
	b.Reset(len(body))
	at := 0
	for _, m := range msgs {
		fb := len(b.Blocks)
		for _, parts := range m {
			fp := len(b.Parts)
			for range parts {
				b.Parts = append(b.Parts, conversation.Part{Kind: conversation.Text, CacheControl: conversation.Span{Start: at, End: at + 1}})
			}
			b.Block(conversation.Block{Kind: conversation.ToolResult, Span: conversation.Span{Start: at, End: at + 1}}, fp)
		}
		b.Message(conversation.Message{Role: conversation.RoleUser, Span: conversation.Span{Start: at, End: at + 2}}, fb)
		at += 3
	}
	return &conversation.Conversation{Body: body, Messages: b.Done()}
}

func TestReuseAndDone(t *testing.T) {
	body := []byte("abcdefghijklmnop")
	var b1, b2 Builder
	prev := build(&b1, body, [][]int{{1, 0}, {}, {2}, {0, 0, 3}})
	if n := b1.Marks(0); n != 6 {
		t.Errorf("marks %d, want 6", n)
	}
	b2.Reset(len(body))
	end, marks := b2.Reuse(prev, 3)
	if end != prev.Messages[2].Span.End || marks != 3 {
		t.Errorf("end %d marks %d", end, marks)
	}
	fb, fp := len(b2.Blocks), len(b2.Parts)
	for range 3 {
		b2.Parts = append(b2.Parts, conversation.Part{Kind: conversation.Text, CacheControl: conversation.Span{Start: 9, End: 10}})
	}
	b2.Block(conversation.Block{Kind: conversation.ToolResult, Span: conversation.Span{Start: 9, End: 10}}, fp)
	b2.Block(conversation.Block{Kind: conversation.ToolResult, Span: conversation.Span{Start: 9, End: 10}}, len(b2.Parts))
	b2.TruncBlocks(fb + 1)
	b2.Block(conversation.Block{Kind: conversation.ToolResult, Span: conversation.Span{Start: 9, End: 10}}, len(b2.Parts))
	b2.Block(conversation.Block{Kind: conversation.ToolResult, Span: conversation.Span{Start: 9, End: 10}}, len(b2.Parts))
	b2.Message(conversation.Message{Role: conversation.RoleUser, Span: conversation.Span{Start: 9, End: 10}}, fb)
	b2.Extend(11)
	got := b2.Done()
	if d := cmp.Diff(prev.Messages[:3], got[:3]); d != "" {
		t.Errorf("reused messages differ (-prev +got):\n%s", d)
	}
	m := got[3]
	if len(got) != 4 || m.Span != (conversation.Span{Start: 9, End: 11}) || len(m.Blocks) != 3 {
		t.Fatalf("last message: %+v", m)
	}
	if n := []int{len(m.Blocks[0].Parts), len(m.Blocks[1].Parts), len(m.Blocks[2].Parts)}; n[0] != 3 || n[1] != 0 || n[2] != 0 {
		t.Errorf("parts per block %v, want [3 0 0]", n)
	}
}

func TestStable(t *testing.T) {
	var b Builder
	prev := build(&b, []byte("0123456789ab"), [][]int{{1}, {1}, {1}, {1}})
	for _, tc := range []struct {
		body string
		open func(k, shared int) bool
		want int
	}{
		{"0123456789ab", nil, 3},
		{"0123456789", nil, 3},
		{"0123456", nil, 2},
		{"012345", nil, 1},
		{"0123x", nil, 1},
		{"012", nil, 0},
		{"0123456789ab", func(k, _ int) bool { return k == 1 }, 1},
	} {
		if got := Stable(prev, []byte(tc.body), tc.open); got != tc.want {
			t.Errorf("Stable(%q) = %d, want %d", tc.body, got, tc.want)
		}
	}
	if Stable(nil, nil, nil) != 0 {
		t.Error("Stable(nil) != 0")
	}
}
