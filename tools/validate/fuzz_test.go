package validate

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func fuzzSeeds(tb testing.TB) [][]byte {
	seeds := [][]byte{[]byte(base), []byte(req(u0, aUse, uRes)), []byte(`{"model":"m","messages":[]}`), []byte(`[`)}
	if b, err := os.ReadFile("../../anthropic/testdata/claude-code-2.1.197-first.json"); err == nil {
		seeds = append(seeds, b)
	}
	return seeds
}

// FuzzRequest: Request never panics, accepts only valid JSON, and a body
// is a rewrite of itself with exactly Request's verdict.
func FuzzRequest(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := Request(body)
		if err == nil && !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		var e *Error
		if err != nil && (!asError(err, &e) || len(e.Problems) == 0 || len(e.Problems) > maxProblems) {
			t.Fatalf("bad error %#v", err)
		}
		for _, opts := range []Options{{}, {AllowInputEdits: true, AllowThinkingRemoval: true, AllowMessageRemoval: true, AllowCacheMarkers: true}} {
			rw := Rewrite(body, body, opts)
			if d := cmp.Diff(rules(err), rules(rw)); d != "" {
				t.Fatalf("Rewrite(b, b) differs from Request(b) (-Request +Rewrite):\n%s", d)
			}
		}
	})
}

// FuzzRewrite: Rewrite never panics, what it accepts Request accepts, and
// a body rewritten into itself gets exactly Request's verdict. The
// rewritten body is the original with the bytes [off, off+n) replaced by
// repl, so that most pairs parse and the comparison gets exercised.
func FuzzRewrite(f *testing.F) {
	add := func(orig, old, repl string, flags uint8) {
		off := strings.Index(orig, old)
		if off < 0 {
			f.Fatalf("seed: %q not found", old)
		}
		f.Add([]byte(orig), uint32(off), uint16(len(old)), []byte(repl), flags)
	}
	add(base, `"a\nb\nc"`, `"x"`, 0)
	add(base, m2+m3, ``, 4)
	add(base, m4+`{"role":"user","content":[`+r5, `{"role":"assistant","content":"gone"},{"role":"user","content":[`, 6)
	add(base, `"next question"`, `[{"type":"text","text":"next question",`+cc+`}]`, 8)
	add(base, `"plan A"`, `"plan B"`, 31)
	add(base, `"thinking":{"type":"adaptive"}`, `"thinking":{"type":"enabled"}`, 16)
	add(req(u0, aUse, uRes), `{"command":"ls"}`, `{}`, 1)
	f.Fuzz(func(t *testing.T, orig []byte, off uint32, n uint16, repl []byte, flags uint8) {
		start := min(int(off), len(orig))
		end := min(start+int(n), len(orig))
		rewritten := append(append(append([]byte{}, orig[:start]...), repl...), orig[end:]...)
		opts := Options{
			AllowInputEdits:      flags&1 != 0,
			AllowThinkingRemoval: flags&2 != 0,
			AllowMessageRemoval:  flags&4 != 0,
			AllowCacheMarkers:    flags&8 != 0,
		}
		if flags&16 != 0 {
			opts.AllowTopLevel = []string{"thinking", "x"}
		}
		err := Rewrite(orig, rewritten, opts)
		if err == nil && Request(rewritten) != nil {
			t.Fatal("Rewrite accepted what Request rejects")
		}
		if string(orig) == string(rewritten) {
			if d := cmp.Diff(rules(Request(orig)), rules(err)); d != "" {
				t.Fatalf("Rewrite(b, b) differs from Request(b) (-Request +Rewrite):\n%s", d)
			}
		}
	})
}

func asError(err error, e **Error) bool {
	x, ok := err.(*Error)
	*e = x
	return ok
}

func rules(err error) []Rule {
	if e, ok := err.(*Error); ok {
		return e.Rules()
	}
	return nil
}
