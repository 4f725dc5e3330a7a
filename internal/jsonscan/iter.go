package jsonscan

import "bytes"

// Iter walks the members of an object or the elements of an array whose
// span was validated beforehand (by Value or Root), so it never re-checks
// what it skips. Using it on unvalidated bytes gives unspecified spans but
// never panics.
type Iter struct {
	b     []byte
	i     int
	end   int // index of the closing bracket
	first bool
	err   error
}

// Members returns an iterator over the members of the object at s.
func Members(b []byte, s Span) Iter {
	if KindOf(b, s) != Object {
		return Iter{err: errAt(s.Start, "not an object")}
	}
	return Iter{b: b, i: s.Start + 1, end: s.End - 1, first: true}
}

// Elements returns an iterator over the elements of the array at s.
func Elements(b []byte, s Span) Iter {
	if KindOf(b, s) != Array {
		return Iter{err: errAt(s.Start, "not an array")}
	}
	return Iter{b: b, i: s.Start + 1, end: s.End - 1, first: true}
}

// Err reports the first error the iterator met.
func (it *Iter) Err() error { return it.err }

func (it *Iter) sep() bool {
	if it.err != nil {
		return false
	}
	it.i = SkipSpace(it.b, it.i)
	if it.i >= it.end {
		return false
	}
	if !it.first {
		if it.b[it.i] != ',' {
			it.err = errAt(it.i, "expected ','")
			return false
		}
		it.i = SkipSpace(it.b, it.i+1)
	}
	it.first = false
	return true
}

// NextMember returns the next key (with its quotes) and value of an object.
func (it *Iter) NextMember() (key, val Span, ok bool) {
	if !it.sep() {
		return
	}
	if it.b[it.i] != '"' {
		it.err = errAt(it.i, "expected object key")
		return
	}
	kend, err := skipString(it.b, it.i)
	if err != nil {
		it.err = err
		return
	}
	key = Span{it.i, kend}
	i := SkipSpace(it.b, kend)
	if i >= it.end || it.b[i] != ':' {
		it.err = errAt(i, "expected ':'")
		return
	}
	val, it.err = Value(it.b, i+1)
	if it.err != nil {
		return
	}
	it.i = val.End
	return key, val, true
}

// NextElement returns the next element of an array.
func (it *Iter) NextElement() (val Span, ok bool) {
	if !it.sep() {
		return
	}
	val, it.err = Value(it.b, it.i)
	if it.err != nil {
		return
	}
	it.i = val.End
	return val, true
}

// KeyIs reports whether the key span k (quotes included) decodes to name.
// Keys written with escapes ("\u0074ype") are decoded before comparing.
func KeyIs(b []byte, k Span, name string) bool {
	raw := b[k.Start+1 : k.End-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == name
	}
	s, err := Unquote(b[k.Start:k.End])
	return err == nil && s == name
}

// StringIs reports whether the value at s is a JSON string equal to want.
func StringIs(b []byte, s Span, want string) bool {
	if KindOf(b, s) != String {
		return false
	}
	return KeyIs(b, s, want)
}

// Lookup returns the value of the last member named key in the object at s,
// as encoding/json would pick it, or ErrNotFound.
func Lookup(b []byte, s Span, key string) (Span, error) {
	it := Members(b, s)
	var found Span
	ok := false
	for k, v, more := it.NextMember(); more; k, v, more = it.NextMember() {
		if KeyIs(b, k, key) {
			found, ok = v, true
		}
	}
	if it.err != nil {
		return Span{}, it.err
	}
	if !ok {
		return Span{}, ErrNotFound
	}
	return found, nil
}
