package proxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
)

// How reading a client's request body ended.
const (
	bodyReading int32 = iota // not read to its end (yet)
	bodyDone                 // read to its end
	bodyFailed               // a read failed: the client went away or sent a malformed body
	bodySilent               // timed out: no byte for Timeouts.BodyRead
	bodySlow                 // timed out: slower than Timeouts.BodyMinRate
)

// clientBody is a request body as the client sends it. While it is read
// it keeps the connection's read deadline at Timeouts.BodyRead from the
// last read and within BodyRead + size/BodyMinRate of the start, and
// clears it once the body has been read: a stale deadline would fire in
// net/http's background read, which cancels the request. It counts what
// arrived and remembers how reading ended. Close does nothing: net/http
// closes the request body itself.
type clientBody struct {
	r       io.ReadCloser
	rc      *http.ResponseController
	silence time.Duration // 0: no deadlines at all
	rate    int64         // bytes per second; 0: none
	size    int64         // Content-Length; -1 unknown
	start   time.Time
	cause   int32 // the state a timeout of the current deadline means

	n     atomic.Int64
	state atomic.Int32

	mu    sync.Mutex // orders deadline updates before end
	ended bool
}

func (p *Proxy) newClientBody(r *http.Request, rc *http.ResponseController, start time.Time) *clientBody {
	b := &clientBody{r: r.Body, rc: rc, silence: p.t.BodyRead, rate: p.t.BodyMinRate, size: r.ContentLength, start: start}
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		b.state.Store(bodyDone)
	}
	return b
}

func (b *clientBody) Read(p []byte) (int, error) {
	if b.silence > 0 {
		b.arm()
	}
	n, err := b.r.Read(p)
	got := b.n.Add(int64(n))
	switch {
	case err == io.EOF || err == nil && got == b.size:
		b.state.Store(bodyDone)
		if b.silence > 0 {
			b.setDeadline(time.Time{})
		}
	case err != nil:
		st := bodyFailed
		if errors.Is(err, os.ErrDeadlineExceeded) {
			st = b.cause
		}
		b.state.CompareAndSwap(bodyReading, st)
	}
	return n, err
}

// arm sets the read deadline for the next read: BodyRead from now, but no
// later than BodyRead + size/BodyMinRate from the start, where a chunked
// body's size is what has arrived so far (its allowance grows with it).
func (b *clientBody) arm() {
	d, cause := time.Now().Add(b.silence), bodySilent
	if b.rate > 0 {
		size := b.size
		if size < 0 {
			size = b.n.Load()
		}
		allowed := float64(size) / float64(b.rate) * float64(time.Second)
		if whole := b.start.Add(b.silence + time.Duration(min(allowed, 1<<62))); whole.Before(d) {
			d, cause = whole, bodySlow
		}
	}
	b.cause = cause
	b.setDeadline(d)
}

func (b *clientBody) setDeadline(d time.Time) {
	b.mu.Lock()
	if !b.ended {
		_ = b.rc.SetReadDeadline(d)
	}
	b.mu.Unlock()
}

func (b *clientBody) Close() error { return nil }

// timedOut reports whether reading the body timed out.
func (b *clientBody) timedOut() bool {
	st := b.state.Load()
	return st == bodySilent || st == bodySlow
}

// timeoutError is the 408 for a body that timed out, or nil.
func (b *clientBody) timeoutError() *anthropic.Error {
	var msg string
	switch b.state.Load() {
	case bodySilent:
		msg = fmt.Sprintf("ctxguard: the client stopped sending the request body (nothing for %v)", b.silence)
	case bodySlow:
		msg = fmt.Sprintf("ctxguard: the client sent the request body too slowly (under %d bytes/s)", b.rate)
	default:
		return nil
	}
	of := "of a chunked body"
	if b.size >= 0 {
		of = fmt.Sprintf("of %d", b.size)
	}
	return &anthropic.Error{Status: http.StatusRequestTimeout, Type: anthropic.InvalidRequestError, Message: msg,
		Err: fmt.Errorf("%d body bytes %s arrived in %v", b.n.Load(), of, time.Since(b.start).Round(time.Millisecond))}
}

// end stops the deadline updates: once the handler returns, the
// connection is net/http's again, even if a transport still reads.
func (b *clientBody) end() {
	b.mu.Lock()
	b.ended = true
	b.mu.Unlock()
}
