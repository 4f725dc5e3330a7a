package persist

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tools/validate"
)

// body builds a request whose assistant message calls one tool per result
// and whose last user message answers them; results are JSON values.
func body(tool string, results ...string) []byte {
	var calls, answers []string
	for i, r := range results {
		id := "toolu_" + string(rune('a'+i))
		calls = append(calls, `{"type":"tool_use","id":"`+id+`","name":"`+tool+`","input":{"command":"x"}}`)
		answers = append(answers, `{"type":"tool_result","tool_use_id":"`+id+`","content":`+r+`}`)
	}
	return []byte(`{"model":"claude-sonnet-4-5","unknown":{"keep":1.50},"messages":[{"role":"user","content":"go"},` +
		`{"role":"assistant","content":[` + strings.Join(calls, ",") + `]},` +
		`{"role":"user","content":[` + strings.Join(answers, ",") + `]}],"stream":true}`)
}

func str(n int, fill string) string {
	s := strings.Repeat(fill, n/len(fill)+1)[:n]
	b, _ := json.Marshal(s)
	return string(b)
}

func run(t *testing.T, cfg Config, st store.Store, b []byte) pipeline.Result {
	t.Helper()
	p, err := New(cfg, &store.Blobs{Store: st, BaseURL: "http://127.0.0.1:8787"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := anthropic.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return pipeline.New(nil, p).Run(&pipeline.Request{Conv: c})
}

// resultTexts decodes the text of every tool result of the last message.
func resultTexts(t *testing.T, b []byte) []string {
	t.Helper()
	var req struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	var blocks []struct {
		Content json.RawMessage `json:"content"`
	}
	json.Unmarshal(req.Messages[len(req.Messages)-1].Content, &blocks)
	var out []string
	for _, bl := range blocks {
		var s string
		if json.Unmarshal(bl.Content, &s) == nil {
			out = append(out, s)
			continue
		}
		var parts []struct{ Type, Text string }
		json.Unmarshal(bl.Content, &parts)
		for _, p := range parts {
			out = append(out, p.Type+":"+p.Text)
		}
	}
	return out
}

func TestPersist(t *testing.T) {
	const k = 1000
	for _, tc := range []struct {
		name      string
		cfg       Config
		tool      string
		results   []string
		persisted []bool // per result text
	}{
		{"over threshold", Defaults(), "Bash", []string{str(60*k, "line of output\n")}, []bool{true}},
		{"under threshold", Defaults(), "Bash", []string{str(40*k, "x")}, []bool{false}},
		{"at threshold", Defaults(), "Bash", []string{str(50*k, "x")}, []bool{false}},
		{"budget takes the largest first", Defaults(), "Bash", []string{str(45*k, "a"), str(49*k, "b"), str(48*k, "c"), str(47*k, "d"), str(46*k, "e"), str(30*k, "f")}, []bool{false, true, true, false, false, false}},
		{"budget ties go to the earlier", Defaults(), "Bash", []string{str(50*k, "a"), str(50*k, "b"), str(50*k, "c"), str(50*k, "d"), str(50*k, "e")}, []bool{true, true, false, false, false}},
		{"excluded tool", Config{Enabled: true, Threshold: 50 * k, Preview: 2048, MessageBudget: 200 * k, ExcludeTools: []string{"Re*"}}, "Read", []string{str(60*k, "x")}, []bool{false}},
		{"disabled", Config{Threshold: 50 * k, Preview: 2048}, "Bash", []string{str(60*k, "x")}, []bool{false}},
		{"escapes and multibyte", Defaults(), "Bash", []string{`"` + strings.Repeat(`\u00e9\/\"é中`, 12*k) + `"`}, []bool{true}},
		{"array content keeps the image", Defaults(), "mcp__fetch", []string{`[{"type":"text","text":` + str(60*k, "t") + `},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]`}, []bool{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			orig := body(tc.tool, tc.results...)
			st := store.NewMemory()
			res := run(t, tc.cfg, st, orig)
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if err := validate.Rewrite(orig, res.Body, validate.Options{}); err != nil {
				t.Fatalf("validate: %v", err)
			}
			before, after := resultTexts(t, orig), resultTexts(t, res.Body)
			if len(before) != len(after) || len(after) != len(tc.persisted) {
				t.Fatalf("result texts: %d before, %d after, want %d", len(before), len(after), len(tc.persisted))
			}
			n := 0
			var ids []string // of the blobs the previews name
			for i, want := range tc.persisted {
				got := strings.HasPrefix(strings.TrimPrefix(after[i], "text:"), "<ctxguard-persisted>")
				if got != want {
					t.Errorf("result %d persisted = %v, want %v", i, got, want)
				}
				if !want {
					if after[i] != before[i] {
						t.Errorf("result %d changed though not persisted", i)
					}
					continue
				}
				n++
				// The blob holds the original text, and the preview says
				// where it is and shows its head.
				orig := strings.TrimPrefix(before[i], "text:")
				id := store.ID([]byte(orig))
				ids = append(ids, id)
				rc, err := st.OpenBlob(context.Background(), id)
				if err != nil {
					t.Fatalf("blob %s: %v", id, err)
				}
				kept, _ := io.ReadAll(rc)
				if string(kept) != orig {
					t.Errorf("blob differs from the original (%d vs %d bytes)", len(kept), len(orig))
				}
				if !strings.Contains(after[i], "GET http://127.0.0.1:8787/ctxguard/v1/blobs/"+id) {
					t.Errorf("preview does not say where the blob is: %.300s", after[i])
				}
				if !strings.Contains(after[i], orig[:1000]) || len(after[i]) > 2048+600 {
					t.Errorf("preview of %d bytes lacks the head", len(after[i]))
				}
			}
			if st.Len() != n {
				t.Errorf("store holds %d blobs, want %d", st.Len(), n)
			}
			// The result lists the blobs the previews name, for the
			// caller to keep alive.
			if d := cmp.Diff(ids, res.Blobs, cmpopts.SortSlices(func(a, b string) bool { return a < b })); d != "" {
				t.Errorf("Result.Blobs (-previews +Blobs):\n%s", d)
			}
			if n == 0 && !bytes.Equal(res.Body, orig) {
				t.Error("nothing persisted but the body changed")
			}
			// Deterministic: a fresh process with an empty store gives the
			// same bytes.
			again := run(t, tc.cfg, store.NewMemory(), orig)
			if sha256.Sum256(again.Body) != sha256.Sum256(res.Body) {
				t.Error("second run gave different bytes")
			}
		})
	}
}

type failingStore struct{ store.Store }

func (failingStore) PutBlob(context.Context, string, []byte) error { return errors.New("disk full") }

func TestFailOpen(t *testing.T) {
	orig := body("Bash", str(60_000, "x"))
	res := run(t, Defaults(), failingStore{store.NewMemory()}, orig)
	if res.Err == nil || !bytes.Equal(res.Body, orig) {
		t.Fatalf("err %v, body unchanged %v; want an error and the original body", res.Err, bytes.Equal(res.Body, orig))
	}
}

// TestOverBlobLimit: a result the store refuses as too large (a Redis
// store's blob limit, a capped memory store) stays whole; the others of
// the request are still persisted, and the request is not failed.
func TestOverBlobLimit(t *testing.T) {
	small, big := str(60_000, "s"), str(300_000, "b")
	orig := body("Bash", small, big)
	st := store.NewMemoryWith(store.MemoryOptions{MaxBytes: 100_000})
	res := run(t, Defaults(), st, orig)
	if res.Err != nil {
		t.Fatalf("the request failed: %v", res.Err)
	}
	out := string(res.Body)
	if strings.Contains(out, small) || !strings.Contains(out, big) {
		t.Errorf("the small result persisted %v, the large one kept whole %v", !strings.Contains(out, small), strings.Contains(out, big))
	}
	if st.Len() != 1 {
		t.Errorf("%d blobs stored, want 1", st.Len())
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{
		{Threshold: -1},
		{Threshold: 100, Preview: 100},
		{MessageBudget: -5},
		{ExcludeTools: []string{"["}},
	} {
		if c.Validate() == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if err := Defaults().Validate(); err != nil {
		t.Error(err)
	}
}

func TestChars(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want int
	}{{`""`, 0}, {`"abc"`, 3}, {`"\n\u00e9é中"`, 4}, {`"\ud83d\ude00"`, 2}} {
		if got, _ := chars([]byte(tc.q)); got != tc.want {
			t.Errorf("chars(%s) = %d, want %d", tc.q, got, tc.want)
		}
	}
}
