package jsonscan

// ObjectEach validates the object whose '{' is the first non-space byte at
// or after i, calling fn for each member with the key span (quotes
// included) and the index where the value begins (possibly whitespace).
// fn must consume the value, typically with ValueAt, ObjectEach or
// ArrayEach at depth+1, and return the index just past it. ObjectEach
// returns the object's span. depth is the nesting level of the object in
// its document (0 at top level).
//
// Used this way each byte of a document is scanned once, however deep the
// caller descends.
func ObjectEach(b []byte, i, depth int, fn func(key Span, v int) (int, error)) (Span, error) {
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != '{' {
		return Span{}, errAt(i, "expected object")
	}
	if depth >= MaxDepth {
		return Span{}, errAt(i, "exceeded max depth")
	}
	start := i
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return Span{start, i + 1}, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return Span{}, errAt(i, "expected string for object key")
		}
		kend, err := skipString(b, i)
		if err != nil {
			return Span{}, err
		}
		key := Span{i, kend}
		i = SkipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return Span{}, errAt(i, "expected ':' after object key")
		}
		if i, err = fn(key, i+1); err != nil {
			return Span{}, err
		}
		i = SkipSpace(b, i)
		if i >= len(b) {
			return Span{}, errAt(i, "unexpected end of input")
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			return Span{start, i + 1}, nil
		default:
			return Span{}, errAt(i, "expected ',' or '}' after object value")
		}
	}
}

// ArrayEach is ObjectEach for arrays: fn gets each element's start index.
func ArrayEach(b []byte, i, depth int, fn func(v int) (int, error)) (Span, error) {
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != '[' {
		return Span{}, errAt(i, "expected array")
	}
	if depth >= MaxDepth {
		return Span{}, errAt(i, "exceeded max depth")
	}
	start := i
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return Span{start, i + 1}, nil
	}
	var err error
	if i, err = fn(i); err != nil {
		return Span{}, err
	}
	return arrayRest(b, start, i, fn)
}

// ArrayEachAfter continues ArrayEach over the array whose '[' is at
// start, just after an element that ends at after. The caller vouches
// that b[start:after] is a valid beginning of the array (it was validated
// before, in the same bytes); from after on, everything is validated.
func ArrayEachAfter(b []byte, start, after int, fn func(v int) (int, error)) (Span, error) {
	if start >= len(b) || b[start] != '[' || after <= start || after > len(b) {
		return Span{}, errAt(start, "expected array")
	}
	return arrayRest(b, start, after, fn)
}

// arrayRest walks the elements after the one that ended at i.
func arrayRest(b []byte, start, i int, fn func(v int) (int, error)) (Span, error) {
	for {
		i = SkipSpace(b, i)
		if i >= len(b) {
			return Span{}, errAt(i, "unexpected end of input")
		}
		switch b[i] {
		case ',':
			var err error
			if i, err = fn(SkipSpace(b, i+1)); err != nil {
				return Span{}, err
			}
		case ']':
			return Span{start, i + 1}, nil
		default:
			return Span{}, errAt(i, "expected ',' or ']' after array element")
		}
	}
}

// Skip is the fn for values a caller is not interested in: it validates the
// value at i, nested depth levels deep, and returns its end.
func Skip(b []byte, i, depth int) (int, error) {
	v, err := ValueAt(b, i, depth)
	return v.End, err
}
