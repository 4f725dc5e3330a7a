package engine

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/proxy"
	"github.com/ctxguard/ctxguard/record"
)

// Overflow recovery. When the upstream refuses a request as too long
// before any byte of its answer reached the client, the proxy calls the
// Outcome's Recover: the Engine learns the model's real limit from the
// error, rewrites the client's body again under it (compacting with the
// summary that is ready, or the extractive one: no waiting), and the
// proxy retries once with that body.

// recoverer returns the Recover function for a request whose first
// rewrite was res, recorded in rec and described to the client by hdr,
// whose retry body goes into memory of pool (nil: fresh memory).
// Once the retry's answer arrives (proxy.Retry.Sent), both take the
// retry's figures: they describe the body whose answer the client gets.
// body is the client's body: the caller (the proxy, an in-process
// client's middleware) keeps it until the exchange ends, which is after
// Recover returns.
func (e *Engine) recoverer(s *compiled, proto protocol.Protocol, h http.Header, body []byte, res Result, rec *record.Exchange, hdr http.Header,
	pool *bufPool) func(context.Context, protocol.Overflow) (proxy.Retry, error) {
	info, sent := res.Model, res.TokensAfter
	var out func(int) []byte
	if pool != nil {
		out = pool.get
	}
	return func(ctx context.Context, o protocol.Overflow) (proxy.Retry, error) {
		e.limits.learn(ctx, e, info, o, sent)
		r := e.rewrite(ctx, s, proto, h, body, out, true)
		if r.Err != nil || !r.Changed || r.TokensAfter >= sent {
			if r.Changed && pool != nil {
				pool.put(r.Body)
			}
			e.log.Warn("the upstream found a request too long, and compacting it harder does not make it smaller; forwarding its error",
				"session", r.Session, "model", info.ID, "tokens", o.Tokens, "limit", o.Limit, "sent_estimate", sent)
			if r.Err != nil {
				return proxy.Retry{}, fmt.Errorf("compacting it again failed (error ID %s)", r.ID)
			}
			return proxy.Retry{}, fmt.Errorf("compacting it harder leaves %d estimated tokens, no fewer than the %d sent", r.TokensAfter, sent)
		}
		e.log.Info("the upstream found a request too long; retrying it compacted", "session", r.Session, "model", info.ID,
			"tokens", o.Tokens, "limit", o.Limit, "sent_estimate", sent, "retry_estimate", r.TokensAfter)
		retry := proxy.Retry{Body: r.Body, Sent: func() {
			rec.TokensAfter, rec.TokensAdded, rec.Passes, rec.Notes, rec.Stubs = r.TokensAfter, r.TokensAdded, r.Passes, r.Notes, r.Stubs
			e.calibrate(rec)
			if r.Event {
				rec.Event, rec.Cause = true, r.Cause
			}
			if rec.Bodies != nil {
				rec.Bodies.After = bytes.Clone(r.Body)
			}
			if r.Compaction != "" {
				rec.Compaction = r.Compaction
			}
			rec.Outcome = record.Rewritten
			e.describe(hdr, &r, rec)
		}}
		if pool != nil {
			retry.Release = func() { pool.put(r.Body) }
		}
		return retry, nil
	}
}
