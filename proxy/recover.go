package proxy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ctxguard/ctxguard/protocol"
)

// maxErrorBody is how much of an upstream error answer the proxy reads to
// tell a context overflow: more than that is not one.
const maxErrorBody = 64 << 10

// RecoveredHeader is set to 1 on an answer to a request that the upstream
// refused as too long and that ctxguard retried compacted, successfully
// (the retry's answer is a 2xx). A retry the upstream refused too is
// relayed without it.
const RecoveredHeader = "X-Ctxguard-Recovered"

// Retry is the compacted body of an overflow recovery (Outcome.Recover).
type Retry struct {
	// Body is sent upstream in place of the first body.
	Body []byte
	// Release, if set, is called once nothing reads Body any more.
	Release func()
	// Sent, if set, is called once the retry's answer headers arrived,
	// before anything of it is relayed, whatever its status: the
	// Rewriter then makes Outcome.Record and Outcome.RespHeader describe
	// Body, the body whose answer the client gets. It is not called when
	// the retry could not be sent: the client then gets the first
	// answer, which they already describe.
	Sent func()
}

// recoverOverflow looks at an error answer of the upstream before anything
// reached the client. When the protocol reads it as a context overflow and
// the Rewriter has a compacted body for it (Outcome.Recover), the request
// is sent again, once, with that body, and the retry's answer is returned
// instead, whatever it is: a 2xx marks the exchange recovered (and the
// answer RecoveredHeader), anything else a failed recovery, whose reason
// the record keeps. Otherwise, or when the retry cannot be sent, the
// original answer is returned as it came (what was read of its body is
// put back); an overflow that got no retry is a failed recovery too.
func (p *Proxy) recoverOverflow(ctx context.Context, r *http.Request, out *http.Request, res *http.Response, oc *Outcome, x *exchange,
	or protocol.OverflowReader, cancel context.CancelCauseFunc) *http.Response {
	o, ok := p.peekOverflow(res, or, cancel)
	if !ok {
		return res
	}
	rt, err := oc.Recover(ctx, o)
	if err != nil {
		x.recovery = "no smaller body to retry with: " + err.Error()
		return res
	}
	if rt.Release != nil {
		x.lease.onRelease(rt.Release)
	}
	retry := out.Clone(ctx)
	sent, changed := x.outBytes, x.changed
	setBody(retry, x, rt.Body)
	x.changed = true
	res2, err := p.roundTrip(retry, false, cancel)
	if err != nil {
		// Fail open: the upstream's own answer, read whole above.
		x.outBytes, x.changed = sent, changed
		dropQuery(err)
		x.recovery = "the compacted retry could not be sent: " + err.Error()
		return res
	}
	res.Body.Close()
	if rt.Sent != nil {
		rt.Sent()
	}
	if res2.StatusCode/100 != 2 {
		x.recovery = "the compacted retry got status " + strconv.Itoa(res2.StatusCode)
		if o2, ok := p.peekOverflow(res2, or, cancel); ok {
			x.recovery = "the compacted retry was too long too" + OverflowFigures(o2)
		}
		return res2
	}
	if oc.RespHeader == nil {
		oc.RespHeader = http.Header{}
	}
	oc.RespHeader.Set(RecoveredHeader, "1")
	x.recovered = true
	p.log.LogAttrs(r.Context(), slog.LevelInfo, "request too long for the upstream; retried compacted",
		slog.Int("tokens", o.Tokens), slog.Int("limit", o.Limit), slog.Int("status", res2.StatusCode))
	return res2
}

// peekOverflow is PeekOverflow with the read bounded by Timeouts.Idle.
func (p *Proxy) peekOverflow(res *http.Response, or protocol.OverflowReader, cancel context.CancelCauseFunc) (protocol.Overflow, bool) {
	if !overflowStatus(res) {
		return protocol.Overflow{}, false
	}
	if p.t.Idle > 0 {
		defer time.AfterFunc(p.t.Idle, func() { cancel(errIdle) }).Stop()
	}
	return PeekOverflow(res, or)
}

// overflowStatus reports whether res may be a context overflow: its
// status is one an overflow has, and its body is not in a content coding.
func overflowStatus(res *http.Response) bool {
	if res.StatusCode != http.StatusBadRequest && res.StatusCode != http.StatusRequestEntityTooLarge {
		return false
	}
	c := strings.TrimSpace(res.Header.Get("Content-Encoding"))
	return c == "" || strings.EqualFold(c, "identity")
}

// PeekOverflow reads an error answer's body (at most 64 KiB) and reports
// whether or reads it as a context overflow (the cue for
// Outcome.Recover). The body read is put back: res relays exactly what
// the upstream sent. An answer with a status no overflow has, or in a
// content coding, is not read. The read is bounded by what bounds
// res.Body; a caller that wants a deadline closes it.
func PeekOverflow(res *http.Response, or protocol.OverflowReader) (protocol.Overflow, bool) {
	if !overflowStatus(res) {
		return protocol.Overflow{}, false
	}
	head, err := io.ReadAll(io.LimitReader(res.Body, maxErrorBody+1))
	res.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), res.Body), res.Body}
	if err != nil || len(head) > maxErrorBody {
		return protocol.Overflow{}, false
	}
	return or.Overflow(res.StatusCode, head)
}

// OverflowFigures renders what an overflow error said: ": 120000 tokens,
// limit 100000", or "" when it gave no figures.
func OverflowFigures(o protocol.Overflow) string {
	switch {
	case o.Tokens > 0 && o.Limit > 0:
		return ": " + strconv.Itoa(o.Tokens) + " tokens, limit " + strconv.Itoa(o.Limit)
	case o.Limit > 0:
		return ": limit " + strconv.Itoa(o.Limit)
	}
	return ""
}
