package uncompact

import (
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
)

func msgs(m ...string) string { return `{"model":"m","messages":[` + strings.Join(m, ",") + `]}` }

const (
	u1 = `{"role":"user","content":"first"}`
	a1 = `{"role":"assistant","content":"one"}`
	u2 = `{"role":"user","content":"second"}`
	s1 = `{"role":"system","content":"rules"}`
	a2 = `{"role":"assistant","content":"two"}`
	u3 = `{"role":"user","content":"third"}`
)

func summary(n string) string {
	return `{"role":"user","content":"` + conversation.CompactionNote + n + ` messages] the summary"}`
}

func TestBodies(t *testing.T) {
	orig := msgs(u1, a1, u2, s1, a2, u3)
	for _, tc := range []struct {
		name, sent string
		want       string // the body Bodies returns
		err        string // part of its error
	}{
		{"no compaction: orig itself", msgs(u1, a1, u2, a2, u3), orig, ""},
		{"four messages replaced, the instruction among them kept", msgs(summary("4"), s1, a2, u3), msgs(summary("4"), s1, a2, u3), ""},
		{"a span that does not end before an assistant message", msgs(summary("2"), s1, a2, u3), "", "does not end before an assistant message"},
		{"an instruction changed", msgs(summary("4"), `{"role":"system","content":"other"}`, a2, u3), "", "kept message 3 changed"},
		{"an instruction dropped", msgs(summary("4"), a2, u3), "", "instruction messages kept"},
		{"no count in the note", msgs(`{"role":"user","content":"`+conversation.CompactionNote+`some messages]"}`, s1, a2, u3), "", "does not say how many"},
		{"nothing after the summary", msgs(summary("4")), "", "nothing follows the summary"},
		{"a user message after the summary", msgs(summary("4"), u3), "", "followed by a user message"},
		{"sent does not parse: orig, for the caller's checks", `{"model":`, orig, ""},
	} {
		got, err := Bodies(anthropic.Parse, []byte(orig), []byte(tc.sent))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err == "" && string(got) != tc.want:
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
