package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/ctxguard/ctxguard/protocol"
)

// budget caps the request bytes buffered at once across all requests
// (Options.MaxBuffered). It is a byte semaphore that never blocks: a
// request that does not fit is answered (or passed through) at once.
type budget struct {
	max  int64
	used atomic.Int64
}

// tryAcquire takes n bytes if they fit.
func (b *budget) tryAcquire(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// reservation is what one exchange holds of the budget. It lives in the
// exchange's lease, which releases it, so the bytes count until nothing
// reads the buffers. Only the exchange's goroutine grows or shrinks it. A
// nil reservation, or one without a budget, has room for everything.
type reservation struct {
	b *budget
	n int64
}

// grow reserves n more bytes, or reports that they do not fit.
func (r *reservation) grow(n int64) bool {
	if r == nil || r.b == nil {
		return true
	}
	if !r.b.tryAcquire(n) {
		return false
	}
	r.n += n
	return true
}

// shrink gives back n of the reserved bytes.
func (r *reservation) shrink(n int64) {
	if r == nil || r.b == nil {
		return
	}
	n = min(n, r.n)
	r.n -= n
	r.b.used.Add(-n)
}

// release gives back every reserved byte.
func (r *reservation) release() {
	if r != nil {
		r.shrink(r.n)
	}
}

// errOverloaded says a buffer would not fit in the budget.
var errOverloaded = errors.New("buffered request bytes at max_buffered")

// outSlack is reserved for the Rewriter's output beyond the input's size
// (a rewriter may need a minimum buffer, or add a little).
const outSlack = 64 << 10

// retryAfter is the Retry-After (seconds) of ctxguard's own 529: the
// budget frees as requests in flight reach the upstream and end.
const retryAfter = "5"

// overloaded is the answer to a request body that does not fit.
func (p *Proxy) overloaded() *protocol.Error {
	return &protocol.Error{Status: 529, Kind: protocol.Overloaded,
		Message: "ctxguard: too many large requests in flight; retry shortly",
		Err:     fmt.Errorf("%w (%d bytes)", errOverloaded, p.mem.max),
		Header:  http.Header{"Retry-After": {retryAfter}}}
}
