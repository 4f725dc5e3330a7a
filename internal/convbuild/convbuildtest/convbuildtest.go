// Package convbuildtest checks protocol adapters' parsers in tests.
package convbuildtest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ctxguard/ctxguard/conversation"
)

// Parser is an adapter's parser, as protocol.Protocol offers it.
type Parser interface {
	Parse(body []byte) (*conversation.Conversation, error)
	ParseAfter(body []byte, prev *conversation.Conversation, stable int) (*conversation.Conversation, error)
	Stable(prev *conversation.Conversation, body []byte) int
}

// SameParse checks that p.ParseAfter(b, prev, p.Stable(prev, b)) gives
// what p.Parse(b) gives, errors included, and returns the stable count.
// opts are more cmp options, such as cmp.AllowUnexported for the
// adapter's Dialect.
func SameParse(t testing.TB, p Parser, prev *conversation.Conversation, b []byte, opts ...cmp.Option) int {
	t.Helper()
	st := p.Stable(prev, b)
	got, gerr := p.ParseAfter(b, prev, st)
	want, werr := p.Parse(b)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("stable %d: ParseAfter err %v, Parse err %v", st, gerr, werr)
	}
	if gerr != nil {
		return st
	}
	opts = append(opts, cmpopts.IgnoreUnexported(conversation.Conversation{}), cmpopts.EquateEmpty())
	if d := cmp.Diff(want, got, opts...); d != "" {
		t.Fatalf("stable %d: ParseAfter differs from Parse (-Parse +ParseAfter):\n%s", st, d)
	}
	return st
}
