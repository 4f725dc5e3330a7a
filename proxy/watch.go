package proxy

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// roundTrip sends out upstream. Until the answer's headers arrive, the
// transport's reading of the request body is watched (Timeouts.
// UpstreamWrite): if it takes nothing of the body for that long while it
// is not inside a read that waits on the client (client is set when the
// body is the client's own), the request is cancelled with cause
// errUpstreamWrite. The transport's ResponseHeaderTimeout only starts
// once the body is written, so without this an upstream that never reads
// would hold the request forever.
func (p *Proxy) roundTrip(out *http.Request, client bool, cancel context.CancelCauseFunc) (*http.Response, error) {
	if p.t.UpstreamWrite <= 0 || out.Body == nil || out.Body == http.NoBody {
		return p.rt.RoundTrip(out)
	}
	w := newWatch(p.t.UpstreamWrite, cancel)
	defer w.stop()
	out.Body = &watchedBody{ReadCloser: out.Body, w: w, client: client}
	if get := out.GetBody; get != nil {
		out.GetBody = func() (io.ReadCloser, error) {
			b, err := get()
			if err != nil {
				return nil, err
			}
			w.restart() // a retry reads the body again from the start
			return &watchedBody{ReadCloser: b, w: w, client: client}, nil
		}
	}
	return p.rt.RoundTrip(out)
}

// watch cancels a request when its body reader makes no progress for d, counted from
// its first read (connecting is bounded by Timeouts.Dial). Reads only
// record when they returned; a timer checks now and then.
type watch struct {
	d       time.Duration
	base    time.Time
	last    atomic.Int64 // when a read last returned, as time since base; -1 before the first
	waiting atomic.Int32 // reads in progress that wait on the client
	done    atomic.Bool  // the body was read to its end

	mu      sync.Mutex
	t       *time.Timer
	stopped bool
	cancel  context.CancelCauseFunc
}

func newWatch(d time.Duration, cancel context.CancelCauseFunc) *watch {
	w := &watch{d: d, base: time.Now(), cancel: cancel}
	w.last.Store(-1)
	w.mu.Lock()
	w.t = time.AfterFunc(d, w.check)
	w.mu.Unlock()
	return w
}

func (w *watch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || w.done.Load() {
		return
	}
	wait := w.d
	if last := w.last.Load(); last >= 0 && w.waiting.Load() == 0 {
		still := time.Since(w.base) - time.Duration(last)
		if still >= w.d {
			w.stopped = true
			w.cancel(errUpstreamWrite)
			return
		}
		wait = w.d - still
	}
	w.t.Reset(wait)
}

func (w *watch) progress() { w.last.Store(int64(time.Since(w.base))) }

func (w *watch) restart() {
	w.progress()
	w.done.Store(false)
}

func (w *watch) stop() {
	w.mu.Lock()
	w.stopped = true
	w.t.Stop()
	w.mu.Unlock()
}

// watchedBody reports the transport's reads of a request body to a watch.
type watchedBody struct {
	io.ReadCloser
	w      *watch
	client bool // reads wait on the client
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if b.client {
		b.w.waiting.Add(1)
	}
	n, err := b.ReadCloser.Read(p)
	b.w.progress()
	if b.client {
		b.w.waiting.Add(-1)
	}
	if err != nil {
		b.w.done.Store(true) // the end, or a failure the transport reports
	}
	return n, err
}
