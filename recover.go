package ctxguard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/proxy"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
)

// Overflow recovery. When the upstream refuses a request as too long
// before any byte of its answer reached the client, the proxy calls the
// Outcome's Recover: the Guard learns the model's real limit from the
// error, rewrites the client's body again under it (compacting with the
// summary that is ready, or the extractive one: no waiting), and the
// proxy retries once with that body.

// recoverer returns the Recover function for a request whose first
// rewrite was res, recorded in rec and described to the client by hdr.
// Once the retry's answer arrives (proxy.Retry.Sent), both take the
// retry's figures: they describe the body whose answer the client gets.
// body is the client's body: the proxy keeps it until the exchange ends,
// which is after Recover returns.
func (g *Guard) recoverer(s *setup, proto protocol.Protocol, h http.Header, body []byte, res Result, rec *record.Exchange, hdr http.Header) func(context.Context, protocol.Overflow) (proxy.Retry, error) {
	info, sent := res.Model, res.TokensAfter
	return func(ctx context.Context, o protocol.Overflow) (proxy.Retry, error) {
		g.limits.learn(ctx, g, info, o, sent)
		r := g.rewrite(ctx, s, proto, h, body, outBufs.get, true)
		if r.Err != nil || !r.Changed || r.TokensAfter >= sent {
			if r.Changed {
				outBufs.put(r.Body)
			}
			g.log.Warn("the upstream found a request too long, and compacting it harder does not make it smaller; forwarding its error",
				"session", r.Session, "model", info.ID, "tokens", o.Tokens, "limit", o.Limit, "sent_estimate", sent)
			if r.Err != nil {
				return proxy.Retry{}, fmt.Errorf("compacting it again failed (error ID %s)", r.ID)
			}
			return proxy.Retry{}, fmt.Errorf("compacting it harder leaves %d estimated tokens, no fewer than the %d sent", r.TokensAfter, sent)
		}
		g.log.Info("the upstream found a request too long; retrying it compacted", "session", r.Session, "model", info.ID,
			"tokens", o.Tokens, "limit", o.Limit, "sent_estimate", sent, "retry_estimate", r.TokensAfter)
		return proxy.Retry{Body: r.Body, Release: func() { outBufs.put(r.Body) }, Sent: func() {
			rec.TokensAfter, rec.TokensAdded, rec.Passes, rec.Notes, rec.Stubs = r.TokensAfter, r.TokensAdded, r.Passes, r.Notes, r.Stubs
			g.calibrate(rec)
			rec.Event = rec.Event || r.Event
			if rec.Bodies != nil {
				rec.Bodies.After = bytes.Clone(r.Body)
			}
			if r.Compaction != "" {
				rec.Compaction = r.Compaction
			}
			rec.Outcome = record.Rewritten
			g.describe(hdr, &r, rec)
		}}, nil
	}
}

// learnedLimits are the windows overflow errors taught, per model, in the
// estimator's tokens: the largest window under which the request that
// overflowed would have been compacted. They live in the store, so every
// instance on the store and every restart uses them, as a chain of lessons
// decided once each: "limit/<model>/1", "/2", ..., each lower than the one
// before, written with PutIfAbsent so two instances that learn at once
// agree on one lesson. An instance reads the lessons it has not seen at
// most every limitRefresh.
type learnedLimits struct {
	mu sync.Mutex
	m  map[string]lesson // canonical model id → the last lesson read
}

// lesson is the last lesson of a model read from the store.
type lesson struct {
	n, window int       // its number and window; 0, 0: none stored
	read      time.Time // when the store was last asked for a later one
}

// limitRefresh is how often an instance asks the store for lessons other
// instances learned.
const limitRefresh = time.Minute

// maxLessons bounds the chain a model's limit is read from.
const maxLessons = 64

func limitKey(id string, n int) string {
	return "limit/" + model.Canonical(id) + "/" + strconv.Itoa(n)
}

// window returns the learned window of model id, or 0.
func (l *learnedLimits) window(ctx context.Context, g *Guard, id string) int {
	if id == "" {
		return 0
	}
	key := model.Canonical(id)
	now := g.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	le, ok := l.m[key]
	if ok && now.Sub(le.read) < limitRefresh {
		return le.window
	}
	for le.n < maxLessons {
		b, err := g.store.Get(ctx, limitKey(id, le.n+1))
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return le.window // try again next time
		}
		w, err := strconv.Atoi(string(b))
		if err != nil || w <= 0 {
			break // not a lesson of ours: the chain ends before it
		}
		le.n, le.window = le.n+1, w
	}
	le.read = now
	if l.m == nil || len(l.m) >= 4096 {
		l.m = map[string]lesson{}
	}
	l.m[key] = le
	return le.window
}

// learn lowers the window of info's model after the upstream refused a
// request estimated at sent tokens with overflow o. The API counted
// o.Tokens where ctxguard estimated sent; its limit o.Limit is, in the
// estimator's tokens, o.Limit × sent / o.Tokens, and the overflow line
// (window − max output) must sit below that. With no figures in the
// error, the line goes to 80% of what was sent.
func (l *learnedLimits) learn(ctx context.Context, g *Guard, info model.Info, o protocol.Overflow, sent int) {
	if info.ID == "" || sent <= 0 {
		return
	}
	line := sent * 8 / 10
	if o.Limit > 0 && o.Tokens > o.Limit {
		line = int(int64(o.Limit) * int64(sent) / int64(o.Tokens))
	}
	w := line + info.MaxOutput
	cur := l.window(ctx, g, info.ID)
	if cur == 0 {
		cur = info.Window
	}
	if w >= cur {
		// Already under it (the estimate was right and the request was
		// over the real limit anyway): lower the line by a tenth.
		w = cur - max((cur-info.MaxOutput)/10, 1)
	}
	if w <= info.MaxOutput {
		return
	}
	key := model.Canonical(info.ID)
	l.mu.Lock()
	defer l.mu.Unlock()
	le := l.m[key]
	if le.n >= maxLessons {
		return
	}
	b, stored, err := g.store.PutIfAbsent(ctx, limitKey(info.ID, le.n+1), strconv.AppendInt(nil, int64(w), 10))
	if err != nil {
		// This process uses it anyway; the lesson's number stays free,
		// so a lesson another instance stores under it is still read.
		g.log.Warn("storing a learned model limit", "model", info.ID, "err", err)
		le.window = w
		l.m[key] = le
		return
	}
	if !stored {
		// Another instance learned this lesson first: theirs stands.
		if v, err := strconv.Atoi(string(b)); err == nil && v > 0 {
			w = v
		}
	}
	le.n, le.window = le.n+1, w
	l.m[key] = le
	g.log.Info("learned a model's limit from an overflow error", "model", info.ID, "window", w, "api_tokens", o.Tokens, "api_limit", o.Limit, "estimate", sent)
}
