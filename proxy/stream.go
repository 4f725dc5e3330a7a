package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/protocol"
)

// copyBufs holds the buffers response bodies are copied through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// respond forwards the upstream response: status, headers (minus
// hop-by-hop, plus the Rewriter's X-Ctxguard-* headers) and the body,
// flushed after every read when it streams. It feeds the usage tap of a
// rewritable request's answer when the exchange is recorded (Options.Record).
//
// The idle timer runs only while the proxy waits on the upstream; every
// write to the client has its own deadline (Timeouts.ClientWrite), so a
// slow reader is never taken for a dead upstream, nor held forever.
func (p *Proxy) respond(ctx context.Context, w http.ResponseWriter, r *http.Request, rc *http.ResponseController,
	res *http.Response, oc *Outcome, x *exchange, cancel context.CancelCauseFunc) error {
	h := w.Header()
	responseHeader(h, res, oc)
	ct := res.Header.Get("Content-Type")
	streaming := res.ContentLength < 0 || isEventStream(ct)

	// The usage tap reads a copy of what passes; a content-coded answer is
	// decoded for it on the side.
	var tap protocol.UsageTap
	var sink tapSink
	if p.record != nil && x.messages && res.StatusCode/100 == 2 && x.proto != nil {
		tap = x.proto.NewUsageTap(ct)
		sink = plainTap{tap}
		if coding := strings.ToLower(strings.TrimSpace(res.Header.Get("Content-Encoding"))); coding != "" && coding != "identity" {
			sink = newDecodingTap(coding, tap)
		}
	}

	w.WriteHeader(res.StatusCode)
	x.wroteHeader, x.status = true, res.StatusCode

	var idle *time.Timer
	if p.t.Idle > 0 {
		idle = time.AfterFunc(p.t.Idle, func() { cancel(errIdle) })
		defer idle.Stop()
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var rerr error
	for {
		if idle != nil {
			idle.Reset(p.t.Idle)
		}
		n, err := res.Body.Read(buf)
		if idle != nil {
			idle.Stop()
		}
		if n > 0 {
			if rerr = p.send(w, rc, buf[:n], streaming); rerr != nil {
				break
			}
			x.respBytes += int64(n)
			if sink != nil {
				sink.Write(buf[:n])
			}
		}
		if err == io.EOF {
			if !streaming {
				// What net/http still buffers goes out under the deadline too.
				rerr = p.send(w, rc, nil, true)
			}
			break
		}
		if err != nil {
			rerr = err
			break
		}
	}
	if rerr == nil && len(res.Trailer) > 0 {
		for k, vs := range res.Trailer {
			for _, v := range vs {
				h.Add(http.TrailerPrefix+k, v)
			}
		}
	}
	if sink != nil {
		sink.Close()
		if u, ok := tap.Usage(); ok {
			x.usage = &u
		}
	}
	switch {
	case rerr == nil:
		return nil
	case errors.Is(rerr, errClientStalled):
		cancel(errClientStalled)
		return fmt.Errorf("client stopped reading: it took nothing for %v; the upstream request is cancelled", p.t.ClientWrite)
	case errors.Is(rerr, errClientGone) || r.Context().Err() != nil:
		// The client left; the deferred cancel stops the upstream.
		p.log.LogAttrs(r.Context(), slog.LevelDebug, "client went away mid-response", slog.String("path", r.URL.Path))
		return nil
	case errors.Is(context.Cause(ctx), errIdle):
		return fmt.Errorf("upstream %s sent nothing for %v mid-response: %w", x.up.name, p.t.Idle, rerr)
	}
	return fmt.Errorf("reading the response of upstream %s: %w", x.up.name, rerr)
}

// responseHeader sets h, the client's response header, from the
// upstream's answer res: its headers but the hop-by-hop ones (and no
// sniffed Content-Type when it has none), the Rewriter's X-Ctxguard-
// headers (oc.RespHeader) and the announcement of res's trailers.
func responseHeader(h http.Header, res *http.Response, oc *Outcome) {
	for k, vs := range res.Header {
		h[k] = vs
	}
	if _, ok := res.Header["Content-Type"]; !ok {
		h["Content-Type"] = nil // keep net/http from sniffing one
	}
	removeHopHeaders(h)
	for k, vs := range oc.RespHeader {
		if k = http.CanonicalHeaderKey(k); strings.HasPrefix(k, "X-Ctxguard-") {
			h[k] = append(h[k], vs...)
		}
	}
	if len(res.Trailer) > 0 {
		names := make([]string, 0, len(res.Trailer))
		for k := range res.Trailer {
			names = append(names, k)
		}
		h["Trailer"] = []string{strings.Join(names, ", ")}
	}
}

var (
	errClientGone    = errors.New("client went away")
	errClientStalled = errors.New("client stopped reading")
)

// send writes b to the client, and flushes it when flush is set, within
// Timeouts.ClientWrite. The deadline is cleared afterwards: the proxy may
// wait on the upstream for longer than that before the next write.
func (p *Proxy) send(w http.ResponseWriter, rc *http.ResponseController, b []byte, flush bool) error {
	var deadline time.Time
	if p.t.ClientWrite > 0 {
		deadline = time.Now().Add(p.t.ClientWrite)
		_ = rc.SetWriteDeadline(deadline)
	}
	var err error
	if len(b) > 0 {
		_, err = w.Write(b)
	}
	if err == nil && flush {
		err = rc.Flush()
	}
	if p.t.ClientWrite > 0 {
		_ = rc.SetWriteDeadline(time.Time{})
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded) || !deadline.IsZero() && !time.Now().Before(deadline):
		return errClientStalled
	}
	return errClientGone
}

func isEventStream(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

// tapSink receives a copy of the response body.
type tapSink interface {
	Write(p []byte) (int, error)
	Close()
}

// decodingTap decodes a content-coded response on its own goroutine and
// feeds the result to a usage tap. Write blocks only until the decoder has
// taken the bytes (after they were already sent to the client); if
// decoding fails the tap stops reading and later writes return at once.
type decodingTap struct {
	pw   *io.PipeWriter
	done chan struct{}
	dead bool
}

func newDecodingTap(coding string, tap protocol.UsageTap) *decodingTap {
	pr, pw := io.Pipe()
	d := &decodingTap{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		dec, err := decoder(coding, pr, 64<<20)
		if err != nil || dec == nil {
			if err == nil {
				err = errors.New("unsupported content coding")
			}
			pr.CloseWithError(err)
			return
		}
		defer dec.Close()
		bp := copyBufs.Get().(*[]byte)
		defer copyBufs.Put(bp)
		_, err = io.CopyBuffer(tapWriter{tap}, dec, *bp)
		if err == nil {
			err = io.EOF
		}
		pr.CloseWithError(err)
	}()
	return d
}

// plainTap is a tapSink for an answer without content coding.
type plainTap struct{ t protocol.UsageTap }

func (p plainTap) Write(b []byte) (int, error) { return p.t.Write(b) }
func (plainTap) Close()                        {}

// tapWriter hides UsageTap's other methods from io.CopyBuffer.
type tapWriter struct{ t protocol.UsageTap }

func (w tapWriter) Write(p []byte) (int, error) { return w.t.Write(p) }

func (d *decodingTap) Write(p []byte) (int, error) {
	if d.dead {
		return len(p), nil
	}
	if _, err := d.pw.Write(p); err != nil {
		d.dead = true
	}
	return len(p), nil
}

// Close ends the input and waits for the decoder to finish.
func (d *decodingTap) Close() {
	_ = d.pw.Close()
	<-d.done
}
