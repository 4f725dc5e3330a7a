package proxy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/ctxguard/ctxguard/protocol"
)

// maxErrorBody is how much of an upstream error answer the proxy reads to
// tell a context overflow: more than that is not one.
const maxErrorBody = 64 << 10

// RecoveredHeader is set to 1 on an answer to a request that the upstream
// refused as too long and ctxguard retried compacted.
const RecoveredHeader = "X-Ctxguard-Recovered"

// recoverOverflow looks at an error answer of the upstream before anything
// reached the client. When the protocol reads it as a context overflow and
// the Rewriter has a compacted body for it (Outcome.Recover), the request
// is sent again, once, with that body, and the retry's answer is returned
// instead. Otherwise, or when the retry cannot be sent, the original
// answer is returned as it came (what was read of its body is put back).
func (p *Proxy) recoverOverflow(ctx context.Context, r *http.Request, out *http.Request, res *http.Response, oc *Outcome, x *exchange,
	or protocol.OverflowReader, cancel context.CancelCauseFunc) *http.Response {
	if c := strings.TrimSpace(res.Header.Get("Content-Encoding")); c != "" && !strings.EqualFold(c, "identity") {
		return res
	}
	var stop func() bool
	if p.t.Idle > 0 {
		stop = time.AfterFunc(p.t.Idle, func() { cancel(errIdle) }).Stop
	}
	head, err := io.ReadAll(io.LimitReader(res.Body, maxErrorBody+1))
	if stop != nil {
		stop()
	}
	whole := err == nil && len(head) <= maxErrorBody
	res.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), res.Body), res.Body}
	if !whole {
		return res
	}
	o, ok := or.Overflow(res.StatusCode, head)
	if !ok {
		return res
	}
	body, release, ok := oc.Recover(ctx, o)
	if !ok {
		return res
	}
	if release != nil {
		x.lease.onRelease(release)
	}
	retry := out.Clone(ctx)
	setBody(retry, x, body)
	x.changed = true
	res2, err := p.roundTrip(retry, false, cancel)
	if err != nil {
		// Fail open: the upstream's own answer, read whole above.
		p.log.LogAttrs(r.Context(), slog.LevelWarn, "the compacted retry of a request the upstream found too long could not be sent; forwarding the upstream's error",
			slog.String("error_id", protocol.NewErrorID()), slog.String("error", err.Error()))
		return res
	}
	res.Body.Close()
	if oc.RespHeader == nil {
		oc.RespHeader = http.Header{}
	}
	oc.RespHeader.Set(RecoveredHeader, "1")
	x.recovered = true
	p.log.LogAttrs(r.Context(), slog.LevelInfo, "request too long for the upstream; retried compacted",
		slog.Int("tokens", o.Tokens), slog.Int("limit", o.Limit), slog.Int("status", res2.StatusCode))
	return res2
}
