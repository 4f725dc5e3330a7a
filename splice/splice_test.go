package splice

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sp(a, b int) Span { return Span{Start: a, End: b} }

func TestApply(t *testing.T) {
	body := []byte("0123456789")
	for _, tc := range []struct {
		name    string
		edits   []Edit
		want    string
		wantErr bool
	}{
		{"none", nil, "0123456789", false},
		{"replace", []Edit{{Span: sp(2, 4), Repl: []byte("ab")}}, "01ab456789", false},
		{"insert", []Edit{{Span: sp(3, 3), Repl: []byte("X")}}, "012X3456789", false},
		{"delete", []Edit{{Span: sp(0, 10), Repl: nil}}, "", false},
		{"adjacent", []Edit{{Span: sp(2, 4), Repl: []byte("a")}, {Span: sp(4, 6), Repl: []byte("b")}}, "01ab6789", false},
		{"insert at replace start", []Edit{{Span: sp(2, 4), Repl: []byte("a")}, {Span: sp(2, 2), Repl: []byte("I")}}, "01Ia456789", false},
		{"insert at replace end", []Edit{{Span: sp(2, 4), Repl: []byte("a")}, {Span: sp(4, 4), Repl: []byte("I")}}, "01aI456789", false},
		{"covering replaces", []Edit{{Span: sp(2, 3), Repl: []byte("a")}, {Span: sp(5, 5), Repl: []byte("i")}, {Span: sp(1, 8), Repl: []byte("Z")}}, "0Z89", false},
		{"same span supersedes", []Edit{{Span: sp(2, 4), Repl: []byte("a")}, {Span: sp(2, 4), Repl: []byte("b")}}, "01b456789", false},
		{"partial overlap", []Edit{{Span: sp(2, 5), Repl: nil}, {Span: sp(4, 7), Repl: nil}}, "", true},
		{"inside earlier", []Edit{{Span: sp(2, 8), Repl: nil}, {Span: sp(3, 4), Repl: nil}}, "", true},
		{"insert inside earlier", []Edit{{Span: sp(2, 8), Repl: nil}, {Span: sp(3, 3), Repl: nil}}, "", true},
		{"two inserts", []Edit{{Span: sp(3, 3), Repl: nil}, {Span: sp(3, 3), Repl: nil}}, "", true},
		{"bad span", []Edit{{Span: sp(3, 2), Repl: nil}}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Set
			var err error
			for _, e := range tc.edits {
				if err = s.Add(e); err != nil {
					break
				}
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("Add err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			got, err := s.Apply(body)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, string(got)); d != "" {
				t.Errorf("Apply (-want +got):\n%s", d)
			}
			if s.Size(body) != len(got) {
				t.Errorf("Size = %d, len = %d", s.Size(body), len(got))
			}
			if string(body) != "0123456789" {
				t.Fatal("body modified")
			}
		})
	}
}

func TestCurrent(t *testing.T) {
	body := []byte("0123456789")
	var s Set
	for _, e := range []Edit{{Span: sp(2, 4), Repl: []byte("ab")}, {Span: sp(6, 6), Repl: []byte("I")}, {Span: sp(8, 9), Repl: nil}} {
		if err := s.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		sp      Span
		want    string
		wantErr bool
	}{
		{sp(0, 10), "01ab45I679", false},
		{sp(2, 4), "ab", false},
		{sp(4, 6), "45", false}, // insertion at the end boundary is outside
		{sp(6, 8), "67", false}, // and at the start boundary too
		{sp(5, 7), "5I6", false},
		{sp(0, 2), "01", false},
		{sp(3, 5), "", true},
	} {
		got, err := s.Current(body, tc.sp)
		if (err != nil) != tc.wantErr || (err == nil && string(got) != tc.want) {
			t.Errorf("Current(%v) = %q, %v; want %q (err %v)", tc.sp, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestAddAllMatchesAdd: adding a batch gives what adding its edits one by
// one in span order gives, for random sets.
func TestAddAllMatchesAdd(t *testing.T) {
	body := make([]byte, 200)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	rng := uint64(1)
	next := func(n int) int { rng = rng*6364136223846793005 + 1442695040888963407; return int(rng>>33) % n }
	for round := 0; round < 2000; round++ {
		var base, one Set
		for i := 0; i < 6; i++ {
			a := next(190)
			e := Edit{Span: sp(a, a+next(10)), Repl: []byte{'X'}}
			if base.Add(e) == nil {
				one.Add(e)
			}
		}
		var batch []Edit
		last := 0
		for i := 0; i < 5 && last < 195; i++ {
			a := last + next(40)
			if a > 200 {
				break
			}
			b := min(a+next(30), 200)
			batch = append(batch, Edit{Span: sp(a, b), Repl: []byte{'Y', byte('0' + i)}})
			last = b + 1
		}
		if len(batch) > 1 && next(2) == 0 { // out of order: AddAll sorts a copy
			batch[0], batch[len(batch)-1] = batch[len(batch)-1], batch[0]
		}
		given := slices.Clone(batch)
		before := slices.Clone(base.Edits())
		errAll := base.AddAll(batch)
		if d := cmp.Diff(given, batch); d != "" {
			t.Fatalf("round %d: AddAll changed the caller's batch:\n%s", round, d)
		}
		slices.SortFunc(batch, compare)
		var errOne error
		for _, e := range batch {
			if errOne = one.Add(e); errOne != nil {
				break
			}
		}
		if (errAll != nil) != (errOne != nil) {
			t.Fatalf("round %d: AddAll err %v, Add err %v", round, errAll, errOne)
		}
		if errAll != nil {
			if d := cmp.Diff(before, base.Edits()); d != "" {
				t.Fatalf("round %d: a failed AddAll changed the set:\n%s", round, d)
			}
			continue
		}
		if d := cmp.Diff(one.Edits(), base.Edits()); d != "" {
			t.Fatalf("round %d: AddAll and Add made other sets (-Add +AddAll):\n%s", round, d)
		}
		a, _ := base.Apply(body)
		b, _ := one.Apply(body)
		if string(a) != string(b) {
			t.Fatalf("round %d: AddAll %q, Add %q", round, a, b)
		}
	}
}

func TestAddAllOverlapInBatch(t *testing.T) {
	var s Set
	if s.AddAll([]Edit{{Span: sp(1, 4)}, {Span: sp(3, 5)}}) == nil {
		t.Error("overlapping batch accepted")
	}
	if s.Len() != 0 {
		t.Error("failed batch changed the set")
	}
}

func TestInside(t *testing.T) {
	var s Set
	for _, e := range []Edit{{Span: Span{Start: 10, End: 20}}, {Span: Span{Start: 30, End: 30}, Repl: []byte("x")}} {
		if err := s.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		sp   Span
		want bool
	}{
		{Span{Start: 12, End: 15}, true},
		{Span{Start: 10, End: 20}, false}, // the edit itself
		{Span{Start: 15, End: 15}, true},
		{Span{Start: 5, End: 15}, false},
		{Span{Start: 15, End: 25}, false},
		{Span{Start: 20, End: 22}, false},
		{Span{Start: 30, End: 30}, false}, // an insertion holds no bytes
		{Span{Start: 0, End: 5}, false},
	} {
		if got := s.Inside(tc.sp); got != tc.want {
			t.Errorf("Inside(%v) = %v, want %v", tc.sp, got, tc.want)
		}
	}
}
