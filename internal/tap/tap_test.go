package tap

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type event struct{ Name, Data string }

// events runs an SSE over stream, written in pieces of size n (0: whole).
func events(stream string, n int, want func([]byte) bool) []event {
	var got []event
	s := &SSE{Want: want, Dispatch: func(name, data []byte) {
		e := event{Data: string(data)}
		if name != nil {
			e.Name = "[" + string(name) + "]"
		}
		got = append(got, e)
	}}
	b := []byte(stream)
	for len(b) > 0 {
		k := len(b)
		if n > 0 {
			k = min(n, len(b))
		}
		s.Write(b[:k])
		b = b[k:]
	}
	return got
}

func TestSSE(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		want   []event
	}{
		{"lf", "event: a\ndata: 1\n\ndata: 2\n\n", []event{{"[a]", "1"}, {"", "2"}}},
		{"crlf", "event: a\r\ndata: 1\r\n\r\n", []event{{"[a]", "1"}}},
		{"cr", "event: a\rdata: 1\r\r", []event{{"[a]", "1"}}},
		{"bom", "\xef\xbb\xbfdata: x\n\n", []event{{"", "x"}}},
		{"not a bom", "\xef\xbbdata: x\n\n", nil},
		{"multi-line data", "data: a\ndata:b\ndata:  c\n\n", []event{{"", "a\nb\n c"}}},
		{"comments and other fields", ": ping\nid: 7\nretry: 10\ndata: x\n\n", []event{{"", "x"}}},
		{"no data", "event: a\n\n", nil},
		{"no end", "data: x\n", nil},
		{"name resets", "event: a\ndata: 1\n\ndata: 2\n\n", []event{{"[a]", "1"}, {"", "2"}}},
	} {
		for _, n := range []int{0, 1, 2, 3} {
			if d := cmp.Diff(tc.want, events(tc.stream, n, nil)); d != "" {
				t.Errorf("%s (pieces of %d):\n%s", tc.name, n, d)
			}
		}
	}
	skip := func(name []byte) bool { return string(name) != "delta" }
	got := events("event: delta\ndata: big\n\nevent: start\ndata: 1\n\ndata: 2\n\n", 1, skip)
	if d := cmp.Diff([]event{{"[start]", "1"}, {"", "2"}}, got); d != "" {
		t.Errorf("unwanted event:\n%s", d)
	}
}

func TestSSEBounded(t *testing.T) {
	var got []string
	s := &SSE{MaxData: 1024, Dispatch: func(_, data []byte) { got = append(got, string(data)) }}
	s.Write([]byte("data: " + strings.Repeat("y", 4096) + "\n\n"))
	s.Write([]byte("data: " + strings.Repeat("a", 600) + "\ndata: " + strings.Repeat("b", 600) + "\n\n"))
	s.Write([]byte("data: ok\n\n"))
	if d := cmp.Diff([]string{"ok"}, got); d != "" {
		t.Errorf("over-long data dispatched:\n%s", d)
	}
	for range 8 {
		s.Write(bytes.Repeat([]byte("z"), 1<<20))
	}
	if cap(s.line) > 4096 || cap(s.data) > 4096 {
		t.Errorf("buffers grew: line %d, data %d", cap(s.line), cap(s.data))
	}
	s.Reset()
	s.Write([]byte("\ndata: after\n\n"))
	if got[len(got)-1] != "after" {
		t.Errorf("after Reset: %q", got)
	}
}

func TestMember(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"found", `{"a":1,"usage":{"x":2},"b":[3]}`, []string{`{"x":2}`}},
		{"nested is not top-level", `{"a":{"usage":1},"usage":2}`, []string{"2"}},
		{"strings hide structure", `{"s":"}\",{\"usage\":9","usage":"u"}`, []string{`"u"`}},
		{"duplicates", `{"usage":1,"usage":2}`, []string{"1", "2"}},
		{"escaped key", `{"us\u0061ge":5}`, []string{"5"}},
		{"last member", ` {"usage" : [1, {"k": "}"}] } `, []string{`[1, {"k": "}"}]`}},
		{"not an object", `[{"usage":1}]`, nil},
		{"absent", `{"u":1}`, nil},
	} {
		for _, n := range []int{0, 1, 3} {
			var got []string
			m := &Member{Key: "usage", Found: func(v []byte) { got = append(got, strings.TrimSpace(string(v))) }}
			b := []byte(tc.doc)
			for len(b) > 0 {
				k := len(b)
				if n > 0 {
					k = min(n, len(b))
				}
				m.Write(b[:k])
				b = b[k:]
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("%s (pieces of %d):\n%s", tc.name, n, d)
			}
		}
	}
}

func TestMemberBounded(t *testing.T) {
	var got [][]byte
	m := &Member{Key: "usage", Max: 1024, Found: func(v []byte) { got = append(got, v) }}
	m.Write([]byte(`{"usage":"`))
	for range 8 {
		m.Write(bytes.Repeat([]byte("z"), 1<<20))
	}
	m.Write([]byte(`"}`))
	if cap(m.val) > 2048 || len(got) != 1 || got[0] != nil {
		t.Errorf("capture grew to %d; found %d values", cap(m.val), len(got))
	}
}

func TestModeOf(t *testing.T) {
	for ct, want := range map[string]Mode{
		"text/event-stream": EventMode, "text/event-stream; charset=utf-8": EventMode,
		"application/json": JSONMode, "application/problem+json": JSONMode, "APPLICATION/JSON": JSONMode,
		"text/plain": Inert, "": Inert,
	} {
		if got := ModeOf(ct); got != want {
			t.Errorf("ModeOf(%q) = %d, want %d", ct, got, want)
		}
	}
}

// TestRouter: an answer's bytes reach the reader of its mode only.
func TestRouter(t *testing.T) {
	for _, tc := range []struct {
		mode            Mode
		events, members int
	}{{EventMode, 1, 0}, {JSONMode, 0, 1}, {ModeOf("text/plain"), 0, 0}} {
		var events, members int
		r := Router{Mode: tc.mode,
			SSE:  SSE{Dispatch: func(_, _ []byte) { events++ }},
			JSON: Member{Key: "usage", Found: func([]byte) { members++ }}}
		// A JSON answer to the member finder, an event to the splitter.
		p := "{\"usage\":{\"n\":1}}\n\ndata: x\n\n"
		if n, err := r.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		if events != tc.events || members != tc.members {
			t.Errorf("mode %v: %d events, %d members; want %d, %d", tc.mode, events, members, tc.events, tc.members)
		}
	}
}
