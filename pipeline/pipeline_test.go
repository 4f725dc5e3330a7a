package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/splice"
	"github.com/google/go-cmp/cmp"
)

type passFunc struct {
	name string
	fn   func(r *Request) ([]splice.Edit, error)
}

func (p passFunc) Name() string                          { return p.name }
func (p passFunc) Run(r *Request) ([]splice.Edit, error) { return p.fn(r) }

const body = `{"model":"m","messages":[{"role":"user","content":"hi"},` +
	`{"role":"assistant","content":[{"type":"thinking","thinking":"a","signature":"s"},{"type":"text","text":"x"},{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},` +
	`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"out"}]}],"z":1.50}`

func request(t *testing.T) *Request {
	c, err := anthropic.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return &Request{Conv: c}
}

func resultEdit(r *Request, text string) splice.Edit {
	b := r.Conv.Messages[2].Blocks[0]
	return splice.Edit{Span: b.Content, Repl: []byte(`"` + text + `"`)}
}

func TestRun(t *testing.T) {
	shorten := passFunc{"shorten", func(r *Request) ([]splice.Edit, error) { return []splice.Edit{resultEdit(r, "o")}, nil }}
	for _, tc := range []struct {
		name    string
		passes  []Pass
		want    string
		failed  string
		changed bool
	}{
		{"no passes", nil, body, "", false},
		{"one edit", []Pass{shorten}, strings.Replace(body, `"out"`, `"o"`, 1), "", true},
		{"later pass sees and supersedes", []Pass{shorten, passFunc{"stub", func(r *Request) ([]splice.Edit, error) {
			cur, err := r.Current(r.Conv.Messages[2].Blocks[0].Content)
			if err != nil || string(cur) != `"o"` {
				return nil, errors.New("earlier edit not visible")
			}
			return []splice.Edit{resultEdit(r, "[stub]")}, nil
		}}}, strings.Replace(body, `"out"`, `"[stub]"`, 1), "", true},
		{"error fails open", []Pass{shorten, passFunc{"bad", func(*Request) ([]splice.Edit, error) { return nil, errors.New("boom") }}}, body, "bad", false},
		{"panic fails open", []Pass{shorten, passFunc{"panics", func(*Request) ([]splice.Edit, error) { panic("oops") }}}, body, "panics", false},
		{"conflicting edits fail open", []Pass{passFunc{"overlap", func(r *Request) ([]splice.Edit, error) {
			sp := r.Conv.Messages[2].Blocks[0].Content
			return []splice.Edit{{Span: splice.Span{Start: sp.Start, End: sp.End}}, {Span: splice.Span{Start: sp.Start + 1, End: sp.End + 2}}}, nil
		}}}, body, "overlap", false},
		{"removal takes its comma", []Pass{passFunc{"think", func(r *Request) ([]splice.Edit, error) {
			return []splice.Edit{r.RemoveBlock(1, 0)}, nil
		}}}, strings.Replace(body, `{"type":"thinking","thinking":"a","signature":"s"},`, "", 1), "", true},
		{"removal of the last block takes the comma before", []Pass{passFunc{"last", func(r *Request) ([]splice.Edit, error) {
			return []splice.Edit{r.RemoveBlock(1, 1), r.RemoveBlock(1, 2)}, nil
		}}}, strings.Replace(body, `,{"type":"text","text":"x"},{"type":"tool_use","id":"t1","name":"Bash","input":{}}`, "", 1), "", true},
		{"removing every block fails open", []Pass{passFunc{"all", func(r *Request) ([]splice.Edit, error) {
			return []splice.Edit{r.RemoveBlock(1, 0), r.RemoveBlock(1, 1), r.RemoveBlock(1, 2)}, nil
		}}}, body, "splice", false},
		{"RemoveBlocks of some blocks removes them", []Pass{passFunc{"some", func(r *Request) ([]splice.Edit, error) {
			return r.RemoveBlocks(1, []int{0, 2}, []byte(`"gone"`)), nil
		}}}, strings.Replace(body, `{"type":"thinking","thinking":"a","signature":"s"},{"type":"text","text":"x"},{"type":"tool_use","id":"t1","name":"Bash","input":{}}`, `{"type":"text","text":"x"}`, 1), "", true},
		{"RemoveBlocks of every block leaves the note", []Pass{passFunc{"every", func(r *Request) ([]splice.Edit, error) {
			return r.RemoveBlocks(1, []int{0, 1, 2}, []byte(`"gone"`)), nil
		}}}, strings.Replace(body, `[{"type":"thinking","thinking":"a","signature":"s"},{"type":"text","text":"x"},{"type":"tool_use","id":"t1","name":"Bash","input":{}}]`, `[{"type":"text","text":"gone"}]`, 1), "", true},
		{"inside a replaced message nothing is left", []Pass{passFunc{"every", func(r *Request) ([]splice.Edit, error) {
			return r.RemoveBlocks(1, []int{0, 1, 2}, []byte(`"gone"`)), nil
		}}, passFunc{"looks", func(r *Request) ([]splice.Edit, error) {
			cur, err := r.Current(r.Conv.Messages[1].Blocks[1].Span)
			if err != nil || cur != nil {
				return nil, fmt.Errorf("Current inside a replaced message: %q, %v", cur, err)
			}
			cur, err = r.Current(r.Conv.Messages[1].Content)
			if err != nil || string(cur) != `[{"type":"text","text":"gone"}]` {
				return nil, fmt.Errorf("Current of the replaced content: %q, %v", cur, err)
			}
			// A second pass emptying it makes the same edit.
			return r.RemoveBlocks(1, []int{0, 1, 2}, []byte(`"gone"`)), nil
		}}}, strings.Replace(body, `[{"type":"thinking","thinking":"a","signature":"s"},{"type":"text","text":"x"},{"type":"tool_use","id":"t1","name":"Bash","input":{}}]`, `[{"type":"text","text":"gone"}]`, 1), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(nil, tc.passes...)
			res := p.Run(request(t))
			if d := cmp.Diff(tc.want, string(res.Body)); d != "" {
				t.Errorf("body (-want +got):\n%s", d)
			}
			if res.FailedIn != tc.failed || (res.Err != nil) != (tc.failed != "") {
				t.Errorf("failed in %q (err %v), want %q", res.FailedIn, res.Err, tc.failed)
			}
			if res.Changed != tc.changed {
				t.Errorf("changed = %v", res.Changed)
			}
			if tc.failed != "" {
				if !bytes.Equal(res.Body, []byte(body)) || res.Stubs != nil || res.Blobs != nil {
					t.Errorf("a failed run must return the original body and no stubs: %q, stubs %v", res.Body, res.Stubs)
				}
			}
			// With Out: asked once, only when there are edits, for the
			// exact size; the body is written into what it supplied.
			var asked []int
			var buf []byte
			r := request(t)
			r.Out = func(n int) []byte {
				asked = append(asked, n)
				buf = make([]byte, n+64)
				return buf
			}
			res = p.Run(r)
			if string(res.Body) != tc.want {
				t.Errorf("with Out: body %q", res.Body)
			}
			switch {
			case res.Changed && (len(asked) != 1 || asked[0] != len(res.Body) || &buf[0] != &res.Body[0]):
				t.Errorf("with Out: asked for %v bytes for a %d-byte body; written into it: %v", asked, len(res.Body), len(buf) > 0 && &buf[0] == &res.Body[0])
			case !res.Changed && tc.failed == "" && len(asked) != 0:
				t.Errorf("with Out: asked for %v bytes for an unchanged body", asked)
			}
		})
	}
}

// settingsDialect renders DropInvalidThinking as an edit of the body's
// trailing number and a header.
type settingsDialect struct{ conversation.Dialect }

func (settingsDialect) Settings(c *conversation.Conversation, s conversation.Settings) ([]conversation.SettingEdit, [][2]string) {
	if s&conversation.DropInvalidThinking == 0 {
		return nil, nil
	}
	at := bytes.LastIndex(c.Body, []byte("1.50"))
	return []conversation.SettingEdit{{Span: Span{Start: at, End: at + 4}, Repl: []byte("2")}}, [][2]string{{"X-Setting", "drop"}}
}

func TestPassStats(t *testing.T) {
	p := New(nil,
		passFunc{"shorten", func(r *Request) ([]splice.Edit, error) { return []splice.Edit{resultEdit(r, "o")}, nil }},
		passFunc{"settings", func(r *Request) ([]splice.Edit, error) {
			r.Require(conversation.DropInvalidThinking)
			r.Require(conversation.DropInvalidThinking)
			return nil, nil
		}},
		passFunc{"again", func(r *Request) ([]splice.Edit, error) {
			r.Require(conversation.DropInvalidThinking) // asked already: rendered once
			return nil, nil
		}})
	r := request(t)
	r.Conv.Dialect = settingsDialect{r.Conv.Dialect}
	r.Note("n")
	res := p.Run(r)
	// The setting's 3 bytes are what it changed on purpose, not a saving.
	want := []PassStat{{Name: "shorten", Edits: 1, Saved: 2}, {Name: "settings", Edits: 1, Added: -3}, {Name: "again"}}
	if d := cmp.Diff(want, res.Passes); d != "" {
		t.Error(d)
	}
	if len(res.Settings) != 1 || string(res.Settings[0].Repl) != "2" {
		t.Errorf("settings %+v, want the one edit rendered", res.Settings)
	}
	if d := cmp.Diff([][2]string{{"X-Setting", "drop"}}, res.Headers); d != "" {
		t.Error(d)
	}
	if !bytes.HasSuffix(res.Body, []byte(`"z":2}`)) {
		t.Errorf("setting not rendered: %s", res.Body)
	}
	if len(res.Notes) != 1 || p.Passes()[0] != "shorten" {
		t.Errorf("notes %v passes %v", res.Notes, p.Passes())
	}
}

type perMessage struct{ passFunc }

func (perMessage) PerMessage() {}

// TestResultBlobs: Result.Blobs lists, once each and in body order, the blobs
// named by the edits that made the body: not those of edits a later pass
// superseded, and those of edits reused from the session's memory.
func TestResultBlobs(t *testing.T) {
	onResult := func(name, blob string) Pass {
		return passFunc{name, func(r *Request) ([]splice.Edit, error) {
			e := resultEdit(r, name)
			e.Blob = blob
			return []splice.Edit{e}, nil
		}}
	}
	onInput := func(blob string) Pass {
		return passFunc{"input", func(r *Request) ([]splice.Edit, error) {
			return []splice.Edit{{Span: r.Conv.Messages[1].Blocks[2].Input, Repl: []byte(`{"x":1}`), Blob: blob}}, nil
		}}
	}
	wholeMessage := passFunc{"whole", func(r *Request) ([]splice.Edit, error) {
		return []splice.Edit{{Span: r.Conv.Messages[2].Content, Repl: []byte(`"dropped"`), Blob: "zzzzzzzzzzzzz"}}, nil
	}}
	noBlob := passFunc{"think", func(r *Request) ([]splice.Edit, error) { return []splice.Edit{r.RemoveBlock(1, 0)}, nil }}
	for _, tc := range []struct {
		name   string
		passes []Pass
		want   []string
	}{
		{"none", nil, nil},
		{"edits without blobs", []Pass{noBlob}, nil},
		{"one", []Pass{onResult("persist", "ppppppppppppp"), noBlob}, []string{"ppppppppppppp"}},
		{"several in one edit, repeated", []Pass{onResult("persist", "ppppppppppppp"), onInput("iiiiiiiiiiiii ppppppppppppp aaaaaaaaaaaaa")},
			[]string{"iiiiiiiiiiiii", "ppppppppppppp", "aaaaaaaaaaaaa"}}, // body order: the input comes first
		{"superseded by a later pass", []Pass{onResult("persist", "ppppppppppppp"), onResult("clear", "ccccccccccccc")}, []string{"ccccccccccccc"}},
		{"covered by a later pass", []Pass{onResult("persist", "ppppppppppppp"), wholeMessage}, []string{"zzzzzzzzzzzzz"}},
		{"failure", []Pass{onResult("persist", "ppppppppppppp"), passFunc{"bad", func(*Request) ([]splice.Edit, error) { return nil, errors.New("boom") }}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := New(nil, tc.passes...).Run(request(t))
			if d := cmp.Diff(tc.want, res.Blobs); d != "" {
				t.Errorf("Blobs (-want +got):\n%s", d)
			}
			// Stubs are the edits that name those blobs, in body order.
			var named []string
			for _, e := range res.Stubs {
				if e.Blob == "" || len(e.Repl) == 0 {
					t.Errorf("stub %+v: no blob or no replacement", e)
				}
				named = append(named, strings.Fields(e.Blob)...)
			}
			seen := map[string]bool{}
			var distinct []string
			for _, id := range named {
				if !seen[id] {
					seen[id] = true
					distinct = append(distinct, id)
				}
			}
			if d := cmp.Diff(tc.want, distinct); d != "" {
				t.Errorf("blobs the Stubs name (-want +got):\n%s", d)
			}
		})
	}

	t.Run("reused per-message edits", func(t *testing.T) {
		judged := 0
		p := New(nil, perMessage{passFunc{"persist", func(r *Request) ([]splice.Edit, error) {
			var out []splice.Edit
			for mi := r.From; mi < len(r.Conv.Messages); mi++ {
				judged++
				if mi == 2 {
					e := resultEdit(r, "preview")
					e.Blob = "ppppppppppppp"
					out = append(out, e)
				}
			}
			return out, nil
		}}})
		memo := map[string]any{}
		for i, stable := range []int{0, 3} {
			r := request(t)
			r.Memo, r.Stable = memo, stable
			res := p.Run(r)
			if d := cmp.Diff([]string{"ppppppppppppp"}, res.Blobs); d != "" {
				t.Errorf("request %d: Blobs (-want +got):\n%s", i, d)
			}
		}
		if judged != 3 {
			t.Errorf("the pass judged %d messages, want 3 (the second request reuses them)", judged)
		}
	})
}

// TestBlobsDistinct: blobs returns every id its edits name once, in the
// order of first appearance, for any number of ids and duplicates (the
// table it dedupes with is pooled and reused across sizes).
func TestBlobsDistinct(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 10, 100, 5000, 7, 40000, 12} {
		pool := make([]string, max(1, n/3+1)) // about three names per id
		for i := range pool {
			b := make([]byte, 13)
			for j := range b {
				b[j] = 'a' + byte(r.IntN(26))
			}
			pool[i] = string(b)
		}
		var edits []splice.Edit
		var want []string
		seen := map[string]bool{}
		for named := 0; named < n; {
			k := min(1+r.IntN(3), n-named)
			var names []string
			for range k {
				id := pool[r.IntN(len(pool))]
				names = append(names, id)
				if !seen[id] {
					seen[id] = true
					want = append(want, id)
				}
			}
			named += k
			edits = append(edits, splice.Edit{Blob: strings.Join(names, " ")}, splice.Edit{})
		}
		if d := cmp.Diff(want, blobs(edits)); d != "" {
			t.Errorf("%d names: (-want +got):\n%s", n, d)
		}
	}
}
