package convbuild

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/convbuild/convbuildtest"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/protocol"
)

// toy is the smallest adapter built on the frame, so the tests see the
// frame alone: {"list":[{"role":"user"|"assistant","content":C},...]}
// where C is a string (one Text block) or an array whose elements are
// strings (Text), {"call":id} (a ToolCall), {"result":id} (a ToolResult
// whose parts are its "parts" array's strings) or anything else (Opaque). "meta" is
// Metadata, "tools" Tools.
type toy struct {
	Frame
	seen int // top-level members the adapter was handed
}

var toys = NewPool(Format{Name: "toy request", NoList: "no list"}, (*toy).parse)

func toyParse(b []byte) (*conversation.Conversation, error) { return toys.Parse(b, nil, 0) }

func (p *toy) parse() (*conversation.Conversation, error) {
	if err := p.Top(p.member); err != nil {
		return nil, err
	}
	p.C.CacheMarkers = p.seen // so the tests see what Top handed on
	return p.Done(conversation.RoleUser), nil
}

func (p *toy) member(k jsonscan.Span, v int) (int, error) {
	p.seen++
	switch string(p.Key(k)) {
	case "list":
		end, _, err := p.List(v, "list is not an array", p.message)
		return end, err
	case "meta":
		return p.Member(&p.C.Metadata, k, v)
	case "tools":
		return p.Value(&p.C.Tools, v)
	}
	return jsonscan.Skip(p.B, v, 1)
}

func (p *toy) message(v int) (int, error) {
	if i := jsonscan.SkipSpace(p.B, v); i >= len(p.B) || p.B[i] != '{' {
		s, err := jsonscan.ValueAt(p.B, v, 2)
		if err != nil {
			return 0, err
		}
		return 0, p.ShapeErr(s.Start, "message is not an object")
	}
	first := len(p.Bld.Blocks)
	var m conversation.Message
	s, err := jsonscan.ObjectEach(p.B, v, 2, func(k jsonscan.Span, v int) (int, error) {
		switch string(p.Key(k)) {
		case "role":
			r, err := jsonscan.ValueAt(p.B, v, 3)
			if err != nil {
				return 0, err
			}
			m.Role = conversation.RoleOther
			if jsonscan.StringIs(p.B, r, "user") {
				m.Role = conversation.RoleUser
			} else if jsonscan.StringIs(p.B, r, "assistant") {
				m.Role = conversation.RoleAssistant
			}
			return r.End, nil
		case "content":
			p.Bld.TruncBlocks(first)
			c, str, err := p.Content(v, 3, p.block)
			if str {
				p.Bld.Block(conversation.Block{Kind: conversation.Text, Span: c, Text: c, Call: [2]int{-1, -1}}, len(p.Bld.Parts))
			}
			m.Content, m.ContentString = c, str
			return c.End, err
		}
		return jsonscan.Skip(p.B, v, 3)
	})
	if err != nil {
		return 0, err
	}
	m.Span = s
	p.Bld.Message(m, first)
	return s.End, nil
}

func (p *toy) block(v int) (int, error) {
	s, err := jsonscan.ValueAt(p.B, v, 4)
	if err != nil {
		return 0, err
	}
	blk := conversation.Block{Kind: conversation.Opaque, Span: s, Call: [2]int{-1, -1}}
	firstPart := len(p.Bld.Parts)
	switch jsonscan.KindOf(p.B, s) {
	case jsonscan.String:
		blk.Kind, blk.Text = conversation.Text, s
	case jsonscan.Object:
		if id, err := jsonscan.Lookup(p.B, s, "call"); err == nil {
			blk.Kind, blk.ID, blk.Name = conversation.ToolCall, id, id
		} else if id, err := jsonscan.Lookup(p.B, s, "result"); err == nil {
			blk.Kind, blk.ID = conversation.ToolResult, id
			if parts, err := jsonscan.Lookup(p.B, s, "parts"); err == nil && jsonscan.KindOf(p.B, parts) == jsonscan.Array {
				it := jsonscan.Elements(p.B, parts)
				for e, ok := it.NextElement(); ok; e, ok = it.NextElement() {
					p.Bld.Parts = append(p.Bld.Parts, conversation.Part{Kind: conversation.Text, Span: e, Text: e})
				}
			}
		}
	}
	p.Bld.Block(blk, firstPart)
	return s.End, nil
}

func TestFrameErrors(t *testing.T) {
	for _, tc := range []struct {
		body  string
		shape string // the shape error's text, "" for a syntax error
		at    int    // the offset it names
	}{
		{`[]`, "body is not an object", 0},
		{` "x"`, "body is not an object", 1},
		{`{"model":1,"list":[]}`, "model is not a string", 9},
		{`{"model":"m"}`, "no list", 0},
		{`{"list":{}}`, "list is not an array", 8},
		{`{"list":[1]}`, "message is not an object", 9},
		{`{"list":[]} x`, "", 0},
		{`{"list":[]`, "", 0},
		{`{"list":[{"content":[}]}`, "", 0},
		{``, "", 0},
		{`{"list":[],"model":"\x01"}`, "", 0},
	} {
		_, err := toyParse([]byte(tc.body))
		if err == nil {
			t.Errorf("%q: no error", tc.body)
			continue
		}
		if tc.shape == "" {
			var se *jsonscan.SyntaxError
			if !errors.As(err, &se) || errors.Is(err, protocol.ErrShape) {
				t.Errorf("%q: %v, want a syntax error", tc.body, err)
			}
			continue
		}
		want := "toy request: " + tc.shape + " at offset "
		if !errors.Is(err, protocol.ErrShape) || !strings.Contains(err.Error(), want) || !strings.HasSuffix(err.Error(), " "+itoa(tc.at)) {
			t.Errorf("%q: %v, want ErrShape with %q%d", tc.body, err, want, tc.at)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestFrameTop(t *testing.T) {
	body := []byte(` {"model":"m\u0031","stream":true,"meta":{"a":1},"x":[1,{"y":2}],"tools":[3],` +
		`"list":[{"role":"user","content":"gone"}],"list":[{"role":"user","content":"a"},{"role":"assistant","content":[{"call":"c1"},7]},` +
		`{"role":"user","content":[{"result":"c1","parts":["p","q"]},{"result":"c9"}]}],"stream":false} `)
	c, err := toyParse(body)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	str := func(s conversation.Span) string { return string(c.Bytes(s)) }
	if c.Model != "m1" || c.Stream || c.CacheMarkers != 5 {
		t.Errorf("model %q stream %v members handed on %d; want m1, false (the last stream wins), 5 (model and stream are the frame's)", c.Model, c.Stream, c.CacheMarkers)
	}
	if str(c.Metadata.Whole) != `"meta":{"a":1}` || str(c.Metadata.Value) != `{"a":1}` || str(c.Tools) != `[3]` {
		t.Errorf("meta %q / %q, tools %q", str(c.Metadata.Whole), str(c.Metadata.Value), str(c.Tools))
	}
	if str(c.Root) != strings.TrimSpace(string(body)) || !strings.HasPrefix(str(c.List), `[{"role":"user","content":"a"}`) {
		t.Errorf("root %q, list %q", str(c.Root), str(c.List))
	}
	if len(c.Messages) != 3 {
		t.Fatalf("%d messages, want 3 (the last list wins)", len(c.Messages))
	}
	res := c.Messages[2].Blocks
	if res[0].Call != [2]int{1, 0} || str(res[0].Name) != `"c1"` || len(res[0].Parts) != 2 || str(res[0].Parts[1].Text) != `"q"` {
		t.Errorf("first result: call %v name %q parts %d", res[0].Call, str(res[0].Name), len(res[0].Parts))
	}
	if res[1].Call != [2]int{-1, -1} || !res[1].Name.IsZero() {
		t.Errorf("a result without its call: call %v name %v, want unpaired", res[1].Call, res[1].Name)
	}
}

func TestPair(t *testing.T) {
	for _, tc := range []struct {
		name, list string
		results    conversation.Role
		want       [][2]int // the Call of every ToolResult, in order
	}{
		{"user after assistant", `[{"role":"assistant","content":[{"call":"a"},{"call":"b"}]},{"role":"user","content":[{"result":"b"},{"result":"a"}]}]`,
			conversation.RoleUser, [][2]int{{0, 1}, {0, 0}}},
		{"not across a turn", `[{"role":"assistant","content":[{"call":"a"}]},{"role":"user","content":"x"},{"role":"user","content":[{"result":"a"}]}]`,
			conversation.RoleUser, [][2]int{{-1, -1}}},
		{"only the results role", `[{"role":"assistant","content":[{"call":"a"}]},{"role":"user","content":[{"result":"a"}]}]`,
			conversation.RoleTool, [][2]int{{-1, -1}}},
		{"the first call of an id", `[{"role":"assistant","content":[{"call":"a"},{"call":"a"}]},{"role":"user","content":[{"result":"a"}]}]`,
			conversation.RoleUser, [][2]int{{0, 0}}},
		{"escaped ids are the same string", `[{"role":"assistant","content":[{"call":"\u0061"}]},{"role":"user","content":[{"result":"a"}]}]`,
			conversation.RoleUser, [][2]int{{0, 0}}},
	} {
		c, err := toyParse([]byte(`{"list":` + tc.list + `}`))
		if err != nil {
			t.Fatal(err)
		}
		for mi := range c.Messages {
			for bi := range c.Messages[mi].Blocks {
				c.Messages[mi].Blocks[bi].Call = [2]int{-1, -1}
			}
		}
		Pair(c, tc.results)
		var got [][2]int
		for _, m := range c.Messages {
			for _, b := range m.Blocks {
				if b.Kind == conversation.ToolResult {
					got = append(got, b.Call)
				}
			}
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
		c.Release()
	}
}

func TestContent(t *testing.T) {
	var f Frame
	for _, tc := range []struct {
		value string
		str   bool
		elems int
		err   bool
	}{
		{`"a"`, true, 0, false},
		{` [1, "b", {}]`, false, 3, false},
		{`[]`, false, 0, false},
		{`null`, false, 0, false},
		{`{"a":1}`, false, 0, false},
		{`[1,`, false, 2, true}, // elem is handed the missing element and fails on it
		{`"\x"`, false, 0, true},
	} {
		f.B = []byte(tc.value)
		n := 0
		s, str, err := f.Content(0, 3, func(v int) (int, error) {
			n++
			return jsonscan.Skip(f.B, v, 4)
		})
		if str != tc.str || n != tc.elems || (err != nil) != tc.err {
			t.Errorf("%q: str %v, %d elements, err %v; want %v, %d, error %v", tc.value, str, n, err, tc.str, tc.elems, tc.err)
		}
		if err == nil && string(f.B[s.Start:s.End]) != strings.TrimSpace(tc.value) {
			t.Errorf("%q: span %q", tc.value, f.B[s.Start:s.End])
		}
	}
}

// A pooled parser starts from zero: nothing of the request before (an
// adapter field, the metadata, a message) shows in the next one.
func TestPoolStartsClean(t *testing.T) {
	a := []byte(`{"meta":1,"x":2,"list":[{"role":"user","content":"a"},{"role":"assistant","content":[{"call":"c"}]}]}`)
	b := []byte(`{"list":[{"role":"user","content":"b"}]}`)
	for range 20 {
		ca, err := toyParse(a)
		if err != nil {
			t.Fatal(err)
		}
		ca.Release()
		cb, err := toyParse(b)
		if err != nil {
			t.Fatal(err)
		}
		if !cb.Metadata.Whole.IsZero() || cb.CacheMarkers != 1 || len(cb.Messages) != 1 || len(cb.Messages[0].Blocks) != 1 || cb.Model != "" {
			t.Fatalf("state of the request before leaked: %+v", cb)
		}
		cb.Release()
	}
}

// toyParser is the toy as convbuildtest sees an adapter.
type toyParser struct{}

func (toyParser) Parse(b []byte) (*conversation.Conversation, error) { return toyParse(b) }
func (toyParser) ParseAfter(b []byte, prev *conversation.Conversation, st int) (*conversation.Conversation, error) {
	return toys.Parse(b, prev, st)
}
func (toyParser) Stable(prev *conversation.Conversation, b []byte) int { return Stable(prev, b, nil) }

// equalParse checks that ParseAfter gives what Parse gives, errors
// included, and returns how many messages it took over.
func equalParse(t *testing.T, prev *conversation.Conversation, b []byte) int {
	t.Helper()
	return convbuildtest.SameParse(t, toyParser{}, prev, b)
}

func TestPoolParseAfter(t *testing.T) {
	prefix := `{"model":"m","list":[{"role":"user","content":"a"},{"role":"assistant","content":[{"call":"c1"}]},{"role":"user","content":[{"result":"c1","parts":["p"]}]}`
	prev, err := toyParse([]byte(prefix + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		body   string
		stable int
	}{
		{prefix + `,{"role":"assistant","content":"b"}]}`, 2},
		{prefix + `]}`, 2},
		{prefix + `,{"role":"assistant","content":[{"call":"c2"}]},{"role":"user","content":[{"result":"c2"}]}],"list":[]}`, 2}, // the last list wins
		{`{"x":0,"list":[{"role":"user","content":"a"}]}`, 0},
		{prefix + `,7]}`, 2}, // a shape error after the reused messages
		{prefix + `,`, 2},    // a syntax error
	} {
		if got := equalParse(t, prev, []byte(tc.body)); got != tc.stable {
			t.Errorf("%s: took %d messages over, want %d", tc.body, got, tc.stable)
		}
	}
	// A second list at prev's offset is not the first one: nothing is
	// taken over from it.
	b := []byte(`{"model":"m","list":[],"list":[{"role":"user","content":"a"}]}`)
	p2, _ := toyParse([]byte(`{"model":"m","list":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`))
	equalParse(t, p2, b)
}

// FuzzFrame checks the frame on any input: Parse succeeds only on what
// encoding/json accepts, fails with a syntax error only on what it
// rejects (a shape error may come first), never panics, and
// ParseAfter a parse of another body gives what Parse gives.
func FuzzFrame(f *testing.F) {
	f.Add([]byte(`{"list":[{"role":"user","content":"a"},{"role":"assistant","content":[{"call":"c"}]}]}`),
		[]byte(`{"list":[{"role":"user","content":"a"},{"role":"assistant","content":[{"call":"c"}]},{"role":"user","content":[{"result":"c","parts":["x"]}]}]}`))
	f.Add([]byte(`{"model":"m","list":[]}`), []byte(`{"model":1,"list":[]}`))
	f.Add([]byte(`{"list":[{"content":"a"},{"content":"b"}],"list":[]}`), []byte(`{"list":[{"content":"a"},{"content":"b"}],"meta":{}}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		for _, body := range [][]byte{a, b} {
			c, err := toyParse(body)
			var se *jsonscan.SyntaxError
			if valid := json.Valid(body); (err == nil && !valid) || (errors.As(err, &se) && valid) {
				t.Fatalf("%q: err %v, but json.Valid says %v", body, err, valid)
			}
			if err != nil && !errors.Is(err, protocol.ErrShape) && !errors.As(err, &se) {
				t.Fatalf("%q: %v is neither a syntax nor a shape error", body, err)
			}
			if err == nil {
				for _, m := range c.Messages {
					if m.Span.Start < c.List.Start || m.Span.End > c.List.End {
						t.Fatalf("%q: message %v outside the list %v", body, m.Span, c.List)
					}
				}
				c.Release()
			}
		}
		prev, err := toyParse(a)
		if err != nil {
			return
		}
		equalParse(t, prev, b)
		prev.Release()
	})
}
