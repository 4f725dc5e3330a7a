package validate

import (
	"bytes"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// member is one member of an object: its key (quotes included), its value,
// and the bytes before the key (the comma and whitespace after the
// previous member, or the whitespace after '{').
type member struct {
	key, val, pre span
}

// members lists the members of the object at obj, which was validated.
func members(b []byte, obj span) []member {
	var out []member
	it := jsonscan.Members(b, obj)
	prev := obj.Start + 1
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		out = append(out, member{key: k, val: v, pre: span{Start: prev, End: k.Start}})
		prev = v.End
	}
	return out
}

// rootMembers lists the top-level members of c's body without scanning
// again the messages array that Parse walked.
func rootMembers(c *conv) []member {
	b := c.Body
	arr := messagesSpan(c)
	var out []member
	prev := c.Root.Start + 1
	_, err := jsonscan.ObjectEach(b, c.Root.Start, 0, func(k span, v int) (int, error) {
		val := arr
		if arr.IsZero() || jsonscan.SkipSpace(b, v) != arr.Start {
			var err error
			if val, err = jsonscan.ValueAt(b, v, 1); err != nil {
				return 0, err
			}
		}
		out = append(out, member{key: k, val: val, pre: span{Start: prev, End: k.Start}})
		prev = val.End
		return val.End, nil
	})
	if err != nil { // cannot happen on a parsed body
		return members(b, c.Root)
	}
	return out
}

// messagesSpan returns the span of the messages array c was parsed from,
// or a zero span when it has no messages.
func messagesSpan(c *conv) span {
	if len(c.Messages) == 0 {
		return span{}
	}
	b := c.Body
	s := c.Messages[0].Span.Start - 1
	for s > c.Root.Start && isSpace(b[s]) {
		s--
	}
	e := jsonscan.SkipSpace(b, c.Messages[len(c.Messages)-1].Span.End)
	if s <= c.Root.Start || b[s] != '[' || e >= len(b) || b[e] != ']' {
		return span{}
	}
	return span{Start: s, End: e + 1}
}

func keyName(b []byte, k span) string {
	s, err := jsonscan.Unquote(k.Bytes(b))
	if err != nil {
		return string(k.Bytes(b))
	}
	return s
}

func hasKey(b []byte, ms []member, raw []byte) bool {
	for _, m := range ms {
		if bytes.Equal(m.key.Bytes(b), raw) {
			return true
		}
	}
	return false
}

// objDiff is the first difference compareObjects found.
type objDiff struct {
	What string // "" (none), "changed", "added", "removed", "moved", "formatting"
	Key  string // the decoded key it concerns
}

// compareObjects compares the object os in ob (the original) with rs in rb
// (the rewritten one), member by member and in order, including the bytes
// between members. Members whose key mayChange may have different values
// (visit, if not nil, is called with both); members whose key mayAdd may
// be present in rs only, anywhere. Everything else must be identical. It
// returns the first difference.
func compareObjects(ob, rb []byte, os, rs span, mayChange, mayAdd func(string) bool, visit func(key string, ov, rv span)) objDiff {
	return compareMembers(ob, rb, os, rs, members(ob, os), members(rb, rs), mayChange, mayAdd, visit)
}

// compareMembers is compareObjects with the member lists given.
func compareMembers(ob, rb []byte, os, rs span, O, R []member, mayChange, mayAdd func(string) bool, visit func(key string, ov, rv span)) objDiff {
	i, j := 0, 0
	afterAdd := false // the gap before the next member follows an added one
	for i < len(O) || j < len(R) {
		if j < len(R) && (i >= len(O) || !bytes.Equal(O[i].key.Bytes(ob), R[j].key.Bytes(rb))) {
			name := keyName(rb, R[j].key)
			switch {
			case mayAdd != nil && mayAdd(name) && !hasKey(ob, O, R[j].key.Bytes(rb)):
				j++
				afterAdd = true
				continue
			case i >= len(O):
				return objDiff{"added", name}
			case !hasKey(rb, R, O[i].key.Bytes(ob)):
				return objDiff{"removed", keyName(ob, O[i].key)}
			case hasKey(ob, O, R[j].key.Bytes(rb)):
				return objDiff{"moved", name}
			}
			return objDiff{"added", name}
		}
		if j >= len(R) {
			return objDiff{"removed", keyName(ob, O[i].key)}
		}
		o, r := O[i], R[j]
		name := keyName(ob, o.key)
		if !afterAdd && !bytes.Equal(o.pre.Bytes(ob), r.pre.Bytes(rb)) {
			return objDiff{"formatting", name}
		}
		if !bytes.Equal(ob[o.key.End:o.val.Start], rb[r.key.End:r.val.Start]) {
			return objDiff{"formatting", name}
		}
		if mayChange != nil && mayChange(name) {
			if visit != nil {
				visit(name, o.val, r.val)
			}
		} else if !bytes.Equal(o.val.Bytes(ob), r.val.Bytes(rb)) {
			return objDiff{"changed", name}
		}
		afterAdd = false
		i++
		j++
	}
	oEnd, rEnd := os.Start+1, rs.Start+1
	if len(O) > 0 {
		oEnd = O[len(O)-1].val.End
	}
	if len(R) > 0 {
		rEnd = R[len(R)-1].val.End
	}
	if !afterAdd && !bytes.Equal(ob[oEnd:os.End], rb[rEnd:rs.End]) {
		return objDiff{"formatting", "}"}
	}
	return objDiff{}
}

// elements lists the elements of the array at arr, which was validated.
func elements(b []byte, arr span) []span {
	var out []span
	it := jsonscan.Elements(b, arr)
	for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
		out = append(out, v)
	}
	return out
}

// sameGaps reports whether two arrays with as many elements have the same
// bytes between their elements and brackets.
func sameGaps(ob, rb []byte, oa, ra span, oe, re []span) bool {
	if len(oe) != len(re) {
		return false
	}
	po, pr := oa.Start, ra.Start
	for i := range oe {
		if !bytes.Equal(ob[po:oe[i].Start], rb[pr:re[i].Start]) {
			return false
		}
		po, pr = oe[i].End, re[i].End
	}
	return bytes.Equal(ob[po:oa.End], rb[pr:ra.End])
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// ccRegion returns the bytes to cut from the object obj to remove its
// member cc (key through value) with one separating comma, or a zero span
// when cc is absent.
func ccRegion(b []byte, obj, cc span) span {
	if cc.IsZero() {
		return span{}
	}
	i := cc.Start - 1
	for i > obj.Start && isSpace(b[i]) {
		i--
	}
	if i > obj.Start && b[i] == ',' {
		return span{Start: i, End: cc.End}
	}
	j := jsonscan.SkipSpace(b, cc.End)
	if j < obj.End && b[j] == ',' {
		return span{Start: cc.Start, End: jsonscan.SkipSpace(b, j+1)}
	}
	return cc
}

// outside returns the bytes of obj before and after the region cut.
func outside(b []byte, obj, cut span) ([]byte, []byte) {
	if cut.IsZero() {
		return obj.Bytes(b), nil
	}
	return b[obj.Start:cut.Start], b[cut.End:obj.End]
}

// equal2 reports whether a1+a2 equals b1+b2, without copying.
func equal2(a1, a2, b1, b2 []byte) bool {
	if len(a1)+len(a2) != len(b1)+len(b2) {
		return false
	}
	for len(a1) > 0 || len(a2) > 0 {
		if len(a1) == 0 {
			a1, a2 = a2, nil
		}
		if len(b1) == 0 {
			b1, b2 = b2, nil
		}
		n := min(len(a1), len(b1))
		if !bytes.Equal(a1[:n], b1[:n]) {
			return false
		}
		a1, b1 = a1[n:], b1[n:]
	}
	return true
}
