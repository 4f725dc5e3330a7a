package proxy

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
)

// Request bodies are read into pooled buffers, and a Rewriter may hand
// back a pooled buffer too (Outcome.Release): a 1 MB request then costs no
// fresh megabytes for the collector to find. A buffer goes back to its
// pool only when nothing can read it any more: the exchange is over and
// the transport has closed every reader of the body it was given (it may
// still read one after RoundTrip returns, on error paths).

// bodyBufs holds request body buffers. Buffers over maxPooled are left to
// the collector so one huge request does not pin memory.
var bodyBufs sync.Pool

const maxPooled = 8 << 20

// getBuf returns a buffer of length n, pooled when one big enough is free.
func getBuf(n int) []byte {
	if v, ok := bodyBufs.Get().(*[]byte); ok {
		if cap(*v) >= n {
			return (*v)[:n]
		}
		bodyBufs.Put(v) // too small for this one; keep it for a smaller body
	}
	return make([]byte, n, max(n, 64<<10))
}

func putBuf(b []byte) {
	if cap(b) > 0 && cap(b) <= maxPooled {
		b = b[:0]
		bodyBufs.Put(&b)
	}
}

// lease counts who may still read an exchange's pooled memory: the
// exchange itself and every body reader handed to the transport. When the
// count drops to zero the memory is released, and so is its reservation
// under Options.MaxBuffered.
type lease struct {
	refs   atomic.Int32
	res    reservation // grown only by the exchange, before it hands out readers
	mu     sync.Mutex
	free   []func()
	inline [2]func() // room for the usual free list: the body buffer and Outcome.Release
}

// newLease returns a lease whose reservation draws on b (nil: no cap).
func newLease(b *budget) *lease {
	l := &lease{res: reservation{b: b}}
	l.free = l.inline[:0]
	l.refs.Store(1) // the exchange's own reference
	return l
}

// onRelease registers f to run when the lease ends.
func (l *lease) onRelease(f func()) {
	l.mu.Lock()
	l.free = append(l.free, f)
	l.mu.Unlock()
}

func (l *lease) hold() { l.refs.Add(1) }

func (l *lease) drop() {
	if l.refs.Add(-1) != 0 {
		return
	}
	l.mu.Lock()
	free := l.free
	l.free = nil
	l.mu.Unlock()
	for _, f := range free {
		f()
	}
	l.res.release()
}

// reader returns a body reader over data that holds the lease until it is
// closed.
func (l *lease) reader(data []byte) io.ReadCloser {
	l.hold()
	return &leasedReader{Reader: bytes.NewReader(data), l: l}
}

type leasedReader struct {
	*bytes.Reader
	l    *lease
	once sync.Once
}

func (r *leasedReader) Close() error {
	r.once.Do(r.l.drop)
	return nil
}
