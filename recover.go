package ctxguard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"

	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/protocol"
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
// rewrite was res, recorded in rec (which then takes the retry's
// figures). body is the client's body: the proxy keeps it until the
// exchange ends, which is after Recover returns.
func (g *Guard) recoverer(proto protocol.Protocol, h http.Header, body []byte, res Result, rec *record.Exchange) func(context.Context, protocol.Overflow) ([]byte, func(), bool) {
	info, sent := res.Model, res.TokensAfter
	return func(ctx context.Context, o protocol.Overflow) ([]byte, func(), bool) {
		g.limits.learn(g, info, o, sent)
		r := g.rewrite(ctx, proto, h, body, outBufs.get, true)
		if r.Err != nil || !r.Changed || r.TokensAfter >= sent {
			if r.Changed {
				outBufs.put(r.Body)
			}
			g.log.Warn("the upstream found a request too long, and compacting it harder does not make it smaller; forwarding its error",
				"session", r.Session, "model", info.ID, "tokens", o.Tokens, "limit", o.Limit, "sent_estimate", sent)
			return nil, nil, false
		}
		rec.TokensAfter, rec.Passes, rec.Notes, rec.Stubs = r.TokensAfter, r.Passes, r.Notes, r.Stubs
		g.calibrate(rec)
		rec.Event = rec.Event || r.Event
		if rec.Bodies != nil {
			rec.Bodies.After = bytes.Clone(r.Body)
		}
		if r.Compaction != "" {
			rec.Compaction = r.Compaction
		}
		g.log.Info("the upstream found a request too long; retrying it compacted", "session", r.Session, "model", info.ID,
			"tokens", o.Tokens, "limit", o.Limit, "sent_estimate", sent, "retry_estimate", r.TokensAfter)
		return r.Body, func() { outBufs.put(r.Body) }, true
	}
}

// learnedLimits are the windows overflow errors taught, per model, in the
// estimator's tokens: the largest window under which the request that
// overflowed would have been compacted. They are records in the store
// ("limit/<model>"), so every instance on the store and every restart
// uses them; a later lesson only ever lowers one.
type learnedLimits struct {
	mu sync.Mutex
	m  map[string]int // canonical model id → window; 0: none stored
}

func limitKey(id string) string { return "limit/" + model.Canonical(id) }

// window returns the learned window of model id, or 0.
func (l *learnedLimits) window(st store.Store, id string) int {
	if id == "" {
		return 0
	}
	key := limitKey(id)
	l.mu.Lock()
	defer l.mu.Unlock()
	if w, ok := l.m[key]; ok {
		return w
	}
	if l.m == nil {
		l.m = map[string]int{}
	}
	w := 0
	if b, err := st.Get(key); err == nil {
		_ = json.Unmarshal(b, &w)
	} else if !errors.Is(err, store.ErrNotFound) {
		return 0 // try again next time
	}
	if len(l.m) >= 4096 {
		clear(l.m)
	}
	l.m[key] = max(w, 0)
	return l.m[key]
}

// learn lowers the window of info's model after the upstream refused a
// request estimated at sent tokens with overflow o. The API counted
// o.Tokens where ctxguard estimated sent; its limit o.Limit is, in the
// estimator's tokens, o.Limit × sent / o.Tokens, and the overflow line
// (window − max output) must sit below that. With no figures in the
// error, the line goes to 80% of what was sent.
func (l *learnedLimits) learn(g *Guard, info model.Info, o protocol.Overflow, sent int) {
	if info.ID == "" || sent <= 0 {
		return
	}
	line := sent * 8 / 10
	if o.Limit > 0 && o.Tokens > o.Limit {
		line = int(int64(o.Limit) * int64(sent) / int64(o.Tokens))
	}
	w := line + info.MaxOutput
	cur := l.window(g.store, info.ID)
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
	key := limitKey(info.ID)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[key] = w
	if err := g.store.Put(key, []byte(strconv.Itoa(w))); err != nil {
		g.log.Warn("storing a learned model limit", "model", info.ID, "err", err)
	}
	g.log.Info("learned a model's limit from an overflow error", "model", info.ID, "window", w, "api_tokens", o.Tokens, "api_limit", o.Limit, "estimate", sent)
}
