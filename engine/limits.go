package engine

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/store"
)

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
func (l *learnedLimits) window(ctx context.Context, e *Engine, id string) int {
	if id == "" {
		return 0
	}
	key := model.Canonical(id)
	now := e.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	le, ok := l.m[key]
	if ok && now.Sub(le.read) < limitRefresh {
		return le.window
	}
	for le.n < maxLessons {
		b, err := e.store.Get(ctx, limitKey(id, le.n+1))
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
func (l *learnedLimits) learn(ctx context.Context, e *Engine, info model.Info, o protocol.Overflow, sent int) {
	if info.ID == "" || sent <= 0 {
		return
	}
	line := sent * 8 / 10
	if o.Limit > 0 && o.Tokens > o.Limit {
		line = int(int64(o.Limit) * int64(sent) / int64(o.Tokens))
	}
	w := line + info.MaxOutput
	cur := l.window(ctx, e, info.ID)
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
	b, stored, err := e.store.PutIfAbsent(ctx, limitKey(info.ID, le.n+1), strconv.AppendInt(nil, int64(w), 10))
	if err != nil {
		// This process uses it anyway; the lesson's number stays free,
		// so a lesson another instance stores under it is still read.
		e.log.Warn("storing a learned model limit", "model", info.ID, "err", err)
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
	e.log.Info("learned a model's limit from an overflow error", "model", info.ID, "window", w, "api_tokens", o.Tokens, "api_limit", o.Limit, "estimate", sent)
}
