package engine

import "sync"

// outBufs holds buffers for rewritten bodies.
var outBufs bufPool

// bufPool is a pool of byte buffers; buffers over 8 MB are not kept.
type bufPool struct{ p sync.Pool }

// get returns a buffer of at least n bytes (its whole capacity).
func (b *bufPool) get(n int) []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		if cap(*v) >= n {
			return (*v)[:cap(*v)]
		}
		b.p.Put(v) // too small for this one; kept for a smaller body
	}
	return make([]byte, max(n, 64<<10))
}

func (b *bufPool) put(buf []byte) {
	if c := cap(buf); c > 0 && c <= 8<<20 {
		buf = buf[:c]
		b.p.Put(&buf)
	}
}
