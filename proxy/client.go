package proxy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxguard/ctxguard/protocol"
)

// TokenHeader carries Options.AuthToken. It is removed from every request
// before it goes upstream, whether a token is configured or not.
const TokenHeader = "X-Ctxguard-Token"

// PidHeader, on the answer to the health probe GET /healthz, is the
// serving process's id: it tells a ctxguard from any other server on an
// address, and which process serves there (ctxguard run stops by it only
// a ctxguard it started).
const PidHeader = "X-Ctxguard-Pid"

// authorize checks TokenHeader against Options.AuthToken (the digests
// are compared in constant time, so neither the token nor its length
// leaks). A request for a local path that carries no token header is
// also served when Options.LocalAuth admits it. A browser's GET of a
// local page that is admitted neither way is sent to Options.SignIn.
func (p *Proxy) authorize(r *http.Request) error {
	if p.keys == nil {
		return nil
	}
	vs := r.Header.Values(TokenHeader)
	if len(vs) == 1 && p.keys.Token(vs[0]) {
		return nil
	}
	if len(vs) == 0 && p.localAuth != nil && isLocal(r.URL.Path) && p.localAuth(r) {
		return nil
	}
	detail := "no token"
	if len(vs) > 0 {
		detail = fmt.Sprintf("a wrong token (%d values)", len(vs))
	}
	if len(vs) == 0 && p.signIn != "" && browsing(r) {
		return errSignIn
	}
	return &protocol.Error{Status: http.StatusUnauthorized, Kind: protocol.Authentication,
		Message: "ctxguard: this proxy requires its token in the " + TokenHeader + " header",
		Err:     fmt.Errorf("the request carried %s", detail)}
}

// errSignIn is authorize's answer to a browser that should sign in: a
// redirect to Options.SignIn, not an error.
var errSignIn = errors.New("sign in")

// browsing reports whether r is a browser opening a page under
// /ctxguard/ (not an API, a blob or the metrics): a GET that accepts
// HTML.
func browsing(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/ctxguard/") &&
		!strings.HasPrefix(r.URL.Path, "/ctxguard/v1/") && !strings.HasPrefix(r.URL.Path, "/ctxguard/api/") &&
		strings.Contains(r.Header.Get("Accept"), "text/html")
}

// Early answers. A client may send its whole body before it reads the
// answer (Python's http.client does). When ctxguard answers before it has
// read the body (413, 529, 401, an upstream that failed or answered
// early) and net/http then closed the connection, such a client would get
// a broken pipe, or a reset that discards the answer, instead of the
// answer. So after answering, the proxy reads and discards what is left
// of the body, at most drainMax bytes and for at most drainTime; a body
// larger or slower than that has its connection closed. A client that
// sent Expect: 100-continue and was not asked for any of the body waits
// for the answer instead, and nothing is read.
const (
	drainMax  = 64 << 20
	drainTime = 10 * time.Second
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
// arrived and remembers how reading ended, so the proxy knows whether it
// answers early. Close only records that the transport is done with it;
// net/http closes the request body itself.
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

	handed bool          // given to the transport, which reads and closes it
	closed chan struct{} // closed by Close when handed
	once   sync.Once

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

// hand gives the body to the transport.
func (b *clientBody) hand() {
	b.handed = true
	b.closed = make(chan struct{})
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

func (b *clientBody) Close() error {
	if b.closed != nil {
		b.once.Do(func() { close(b.closed) })
	}
	return nil
}

// timedOut reports whether reading the body timed out.
func (b *clientBody) timedOut() bool {
	st := b.state.Load()
	return st == bodySilent || st == bodySlow
}

// timeoutError is the 408 for a body that timed out, or nil.
func (b *clientBody) timeoutError() *protocol.Error {
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
	return &protocol.Error{Status: http.StatusRequestTimeout, Kind: protocol.InvalidRequest, Message: msg,
		Err: fmt.Errorf("%d body bytes %s arrived in %v", b.n.Load(), of, time.Since(b.start).Round(time.Millisecond))}
}

// settle waits, at most drainTime, for a transport that was handed the
// body and has not read it to the end to close it. It reports whether
// nothing reads the body any more.
func (b *clientBody) settle() bool {
	if !b.handed || b.state.Load() != bodyReading {
		return true
	}
	select {
	case <-b.closed:
		return true
	default:
	}
	t := time.NewTimer(drainTime)
	defer t.Stop()
	select {
	case <-b.closed:
		return true
	case <-t.C:
		return false
	}
}

// end stops the deadline updates: once the handler returns, the
// connection is net/http's again, even if a transport still reads.
func (b *clientBody) end() {
	b.mu.Lock()
	b.ended = true
	b.mu.Unlock()
}

// drain sends the answer already written, then reads and discards what
// is left of an unfinished body (see drainMax). Only once settle said
// nothing else reads it.
func (p *Proxy) drain(r *http.Request, b *clientBody) {
	if b.state.Load() != bodyReading || b.n.Load() == 0 && expectsContinue(r) {
		return
	}
	if b.rc.Flush() != nil {
		return
	}
	_ = b.rc.SetReadDeadline(time.Now().Add(drainTime))
	n, err := io.CopyN(io.Discard, b.r, drainMax)
	if err == io.EOF {
		_ = b.rc.SetReadDeadline(time.Time{})
		err = nil
	} else if err == nil {
		err = fmt.Errorf("more than %d bytes", drainMax)
	}
	attrs := []slog.Attr{slog.String("path", r.URL.Path), slog.Int64("drained", n)}
	if err != nil {
		attrs = append(attrs, slog.String("stopped", err.Error()))
	}
	p.log.LogAttrs(r.Context(), slog.LevelDebug, "request body discarded after an early answer", attrs...)
}

func expectsContinue(r *http.Request) bool {
	return strings.Contains(strings.ToLower(r.Header.Get("Expect")), "100-continue")
}
