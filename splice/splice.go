// Package splice applies byte-range edits to a request body in one pass.
//
// Passes never re-serialize a body: they describe each change as an Edit
// (replace the bytes of one span, or insert at a point) and Apply writes the
// new body once, copying every unedited byte verbatim. That is how ctxguard
// keeps byte fidelity: what no edit covers reaches the upstream exactly as
// the client sent it.
package splice

import (
	"fmt"
	"slices"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Span is a half-open byte range in the original body.
type Span = jsonscan.Span

// Edit replaces the bytes of Span with Repl. An empty Span inserts Repl at
// Span.Start. Repl is owned by the Edit once handed to a Set: the caller must
// not modify it afterwards.
type Edit struct {
	Span Span
	Repl []byte
	// Blob names the stored blobs Repl refers to (a preview or a stub
	// that says where removed content is kept): a blob id, or several
	// separated by single spaces; "" for none. It does not change the
	// output; it lets the caller keep alive the blobs the body it sends
	// refers to (see pipeline.Result.Blobs).
	Blob string
}

// Set is a collection of non-overlapping edits to one body. Adding an edit
// that covers earlier edits replaces them, so a later pass can supersede an
// earlier one (clearing a result that compression had shortened). The zero
// Set is empty and ready to use. A Set is not safe for concurrent use.
type Set struct {
	edits []Edit // sorted by Span.Start, then by End (inserts first)
}

// Len reports the number of edits.
func (s *Set) Len() int { return len(s.edits) }

// Edits returns the edits in body order. The slice aliases the Set.
func (s *Set) Edits() []Edit { return s.edits }

// Add adds e. Edits that e covers are dropped (an insertion strictly
// inside e counts as covered; one at e's boundary is adjacent and kept). It
// is an error for e to overlap an existing edit partially, to lie inside
// one (the bytes it addresses no longer exist in the output), or to insert
// at the same point as another insertion.
func (s *Set) Add(e Edit) error {
	if e.Span.Start < 0 || e.Span.Start > e.Span.End {
		return fmt.Errorf("splice: invalid span [%d,%d)", e.Span.Start, e.Span.End)
	}
	kept := s.edits[:0]
	for _, x := range s.edits {
		switch relate(e.Span, x.Span) {
		case disjoint:
			kept = append(kept, x)
		case covers:
		default:
			s.edits = append(kept, s.edits[len(kept):]...) // unchanged on error
			return fmt.Errorf("splice: edit [%d,%d) conflicts with edit [%d,%d)", e.Span.Start, e.Span.End, x.Span.Start, x.Span.End)
		}
	}
	i, _ := slices.BinarySearchFunc(kept, e, compare)
	s.edits = slices.Insert(kept, i, e)
	return nil
}

// AddAll adds a batch of edits, as if by Add one at a time in span order,
// in O((n+m) log m) for n present and m new edits. The new edits must not
// overlap one another. On error the set is unchanged.
func (s *Set) AddAll(edits []Edit) error {
	if len(edits) == 0 {
		return nil
	}
	add := edits
	if !slices.IsSortedFunc(add, compare) {
		add = slices.Clone(edits) // the caller's slice stays as it was
		slices.SortFunc(add, compare)
	}
	for i, e := range add {
		if e.Span.Start < 0 || e.Span.Start > e.Span.End {
			return fmt.Errorf("splice: invalid span [%d,%d)", e.Span.Start, e.Span.End)
		}
		if i > 0 && relate(e.Span, add[i-1].Span) != disjoint {
			p := add[i-1].Span
			return fmt.Errorf("splice: edits [%d,%d) and [%d,%d) of one batch overlap", p.Start, p.End, e.Span.Start, e.Span.End)
		}
	}
	// Sorted, non-overlapping edits have non-decreasing ends too, so the
	// new edits that can touch an existing one form a window that only
	// moves forward. The existing edits no new one covers are merged with
	// the new ones in the same pass (an existing edit goes first when
	// they compare equal).
	out := make([]Edit, 0, len(s.edits)+len(add))
	j, k := 0, 0
	for _, x := range s.edits {
		for j < len(add) && add[j].Span.End < x.Span.Start {
			j++
		}
		covered := false
		for w := j; w < len(add) && add[w].Span.Start <= x.Span.End; w++ {
			switch relate(add[w].Span, x.Span) {
			case covers:
				covered = true
			case conflict:
				e := add[w].Span
				return fmt.Errorf("splice: edit [%d,%d) conflicts with edit [%d,%d)", e.Start, e.End, x.Span.Start, x.Span.End)
			}
		}
		if covered {
			continue
		}
		for k < len(add) && compare(x, add[k]) > 0 {
			out = append(out, add[k])
			k++
		}
		out = append(out, x)
	}
	s.edits = append(out, add[k:]...)
	return nil
}

func compare(a, b Edit) int {
	if a.Span.Start != b.Span.Start {
		return a.Span.Start - b.Span.Start
	}
	return a.Span.End - b.Span.End // an insertion sorts before a replacement at the same start
}

type relation int

const (
	disjoint relation = iota
	covers
	conflict
)

// relate says how a new edit at e relates to an existing edit at x.
func relate(e, x Span) relation {
	eIns, xIns := e.Start == e.End, x.Start == x.End
	switch {
	case eIns && xIns:
		if e.Start == x.Start {
			return conflict
		}
		return disjoint
	case xIns:
		if e.Start < x.Start && x.Start < e.End {
			return covers
		}
		return disjoint
	case eIns:
		if x.Start < e.Start && e.Start < x.End {
			return conflict
		}
		return disjoint
	case x.End <= e.Start || e.End <= x.Start:
		return disjoint
	case e.Start <= x.Start && x.End <= e.End:
		return covers
	}
	return conflict
}

// Size reports the length of body after applying the set.
func (s *Set) Size(body []byte) int {
	n := len(body)
	for _, e := range s.edits {
		n += len(e.Repl) - e.Span.Len()
	}
	return n
}

// Apply returns body with every edit applied, in a new slice sized exactly.
// body is not modified. With no edits it returns body itself.
func (s *Set) Apply(body []byte) ([]byte, error) {
	if len(s.edits) == 0 {
		return body, nil
	}
	return s.AppendApply(make([]byte, 0, s.Size(body)), body)
}

// AppendApply appends the edited body to dst.
func (s *Set) AppendApply(dst, body []byte) ([]byte, error) {
	last := 0
	for _, e := range s.edits {
		if e.Span.End > len(body) {
			return dst, fmt.Errorf("splice: edit [%d,%d) beyond body of %d bytes", e.Span.Start, e.Span.End, len(body))
		}
		dst = append(dst, body[last:e.Span.Start]...)
		dst = append(dst, e.Repl...)
		last = e.Span.End
	}
	return append(dst, body[last:]...), nil
}

// Current returns the bytes of span sp of body as they will be after the
// edits inside it are applied: the body's own bytes (aliased) when no edit
// falls inside sp, a new slice otherwise. It is an error if sp cuts an edit.
func (s *Set) Current(body []byte, sp Span) ([]byte, error) {
	// Edits are sorted, so those inside sp are contiguous; skip the ones
	// that end before sp with a binary search.
	k, _ := slices.BinarySearchFunc(s.edits, sp.Start, func(x Edit, start int) int {
		if x.Span.End < start {
			return -1
		}
		return 1
	})
	first, last := -1, -1
	for ; k < len(s.edits) && s.edits[k].Span.Start <= sp.End; k++ {
		switch relate(sp, s.edits[k].Span) {
		case covers:
			if first < 0 {
				first = k
			}
			last = k
		case conflict:
			x := s.edits[k].Span
			return nil, fmt.Errorf("splice: span [%d,%d) cuts edit [%d,%d)", sp.Start, sp.End, x.Start, x.End)
		}
	}
	if first < 0 {
		return sp.Bytes(body), nil
	}
	var out []byte
	at := sp.Start
	for _, e := range s.edits[first : last+1] {
		out = append(out, body[at:e.Span.Start]...)
		out = append(out, e.Repl...)
		at = e.Span.End
	}
	return append(out, body[at:sp.End]...), nil
}

// Inside reports whether sp lies inside the span of one edit that
// replaces bytes (not an insertion) and is larger than sp: the bytes sp
// addresses are gone from the output.
func (s *Set) Inside(sp Span) bool {
	k, _ := slices.BinarySearchFunc(s.edits, sp.Start, func(x Edit, start int) int {
		if x.Span.End < start {
			return -1
		}
		return 1
	})
	for ; k < len(s.edits) && s.edits[k].Span.Start <= sp.Start; k++ {
		x := s.edits[k].Span
		if x.Start < x.End && x.Start <= sp.Start && sp.End <= x.End && (x.Start < sp.Start || sp.End < x.End) {
			return true
		}
	}
	return false
}

// Touches reports whether any edit falls inside or overlaps sp.
func (s *Set) Touches(sp Span) bool {
	for _, e := range s.edits {
		if relate(sp, e.Span) != disjoint {
			return true
		}
	}
	return false
}
