package transcript

import (
	"testing"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// fuzzCheck is the property both readers must keep on any input: no
// panic, and every request built from what they return is valid (see
// checkRequests).
func fuzzCheck(t *testing.T, ss []*Session) {
	for _, s := range ss {
		if s.Requests() > 40 {
			continue // keep each input cheap
		}
		checkRequests(t, s)
	}
}

func FuzzParseClaudeCode(f *testing.F) {
	f.Add(jsonl(u(str1("go")), a("m1", tu("t1")), u(arr(tr("t1", "x"))), a("m2", txt("ok"))))
	f.Add(jsonl(a("m1", tu("t1"), tu("t1")), `{"type":"system","subtype":"compact_boundary"}`, a("m2", txt(""))))
	f.Add(jsonl(`{"type":"user","isSidechain":true,"agentId":"z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"q"}]}}`, `{bad`))
	f.Add([]byte(`{"type":"assistant","message":{"id":"m","content":[1,"x",{"type":"text","text":"\u00e9\n"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzCheck(t, ParseClaudeCode(data, "fuzz.jsonl", Options{}))
	})
}

func FuzzParseSWEAgent(f *testing.F) {
	f.Add([]byte(`{"history":[{"role":"system","content":"s"},{"role":"user","content":"u"},{"role":"assistant","content":"a","tool_calls":[{"id":"c1","function":{"name":"bash","arguments":"{\"x\":1}"}}]},{"role":"tool","content":"out","tool_call_ids":["c1"]}]}`))
	f.Add([]byte(`{"history":[{"role":"assistant","content":[{"type":"text","text":"x"}],"tool_calls":[{"function":{"arguments":[1]}}]},{"role":"tool","content":[{"text":"y"}],"tool_call_id":"nope"}]}`))
	f.Add([]byte(`{"history":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSWEAgent(data, "fuzz.traj")
		if err != nil {
			return
		}
		fuzzCheck(t, []*Session{s})
	})
}

func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "ctl\x00\x1f\x7f", "é → 語 😀", "\xff\xfe bad", "\u2028\u2029<>&"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := quote(s)
		if !jsonscan.Valid(q) {
			t.Fatalf("quote(%q) = %s is not valid JSON", s, q)
		}
		back, err := jsonscan.Unquote(q)
		if err != nil {
			t.Fatal(err)
		}
		if want := toValidUTF8(s); back != want {
			t.Fatalf("round trip of %q gave %q", s, back)
		}
		if c := compact(q); string(c) != string(q) {
			t.Fatalf("compact changed a string: %s -> %s", q, c)
		}
	})
}
