package engine

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/cachelife"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
)

// The cache's clock. A provider keeps a prompt's cached prefix for a while
// after its last use (model.Info.CacheTTL): a request that comes later
// finds it gone and is written to the cache whole, whatever was edited.
// Such a request is "cold", and an edit made there costs no cache write of
// its own. Whether a request is cold depends on when it came, which a
// replay of the session's history cannot see; so the engine decides it once,
// when the request arrives, and stores the decision (store.Decisions,
// first writer wins), keyed by session and by the number of messages the
// request held. Every later request reads the session's decisions back
// (pipeline.Env.Cold), and a restarted process or a second instance on the
// same store replays the session's history with the same cold requests,
// and sends the same bytes.

// coldBook keeps the cold decisions of sessions, and when each session was
// last seen by this process. Safe for concurrent use.
type coldBook struct {
	decisions store.Decisions[int] // "cold/<session>/<i>": the i-th cold request's message count
	max       int                  // sessions whose last arrival is remembered

	mu   sync.Mutex
	seen map[string]time.Time // session → last arrival
}

// maxColdPoints bounds the cold requests one session records: past it a
// session is never found cold again (a session idle that often gains
// little from one more).
const maxColdPoints = 1024

// newColdBook keeps decisions in st, whose records live ttl after their
// last use; sessions bounds the sessions remembered in memory.
func newColdBook(st store.Store, ttl time.Duration, now func() time.Time, sessions int) *coldBook {
	b := &coldBook{max: max(sessions, 1024), seen: map[string]time.Time{}}
	b.decisions = store.Decisions[int]{Store: st, Max: 8192, Now: now, Refresh: store.RefreshInterval(ttl),
		Decode: func(v []byte) (int, error) {
			n, err := strconv.Atoi(string(v))
			if err != nil || n < 0 {
				return 0, errors.New("cold: not a message count")
			}
			return n, nil
		},
		Encode: func(n int) ([]byte, error) { return strconv.AppendInt(nil, int64(n), 10), nil },
	}
	return b
}

func coldKey(session string, i int) string { return "cold/" + session + "/" + strconv.Itoa(i) }

// decide returns the cold requests of session (ascending message counts)
// as the store has them, with the current request's decision added: the
// request holding at messages arrived at now, and the session's cache
// keeps a prefix for ttl. A request the store already has as cold (a
// retry, or one another process saw first) stays cold. A request is
// found cold when this process saw the session's previous request more
// than ttl before now; a session it has not seen (a restart, the first
// request) is taken to be warm. A store that fails leaves the current
// request warm and returns what it read (err says why).
func (b *coldBook) decide(ctx context.Context, session string, at int, now time.Time, ttl time.Duration) (points []int, cold bool, err error) {
	if session == "" {
		return nil, false, nil
	}
	prev, seen := b.arrived(session, now)
	for i := 0; i < maxColdPoints; i++ {
		v, ok, err := b.decisions.Get(ctx, coldKey(session, i))
		if err != nil {
			return sorted(points), false, err
		}
		if !ok {
			break
		}
		points = append(points, v)
	}
	if slices.Contains(points, at) {
		return sorted(points), true, nil
	}
	if !seen || ttl <= 0 || now.Sub(prev) <= ttl {
		return sorted(points), false, nil
	}
	// Taken in order: another process may have taken the next slot for
	// a request of its own meanwhile.
	for i := len(points); i < maxColdPoints; i++ {
		v, err := b.decisions.Decide(ctx, coldKey(session, i), at)
		if err != nil {
			return sorted(points), false, err
		}
		points = append(points, v)
		if v == at {
			return sorted(points), true, nil
		}
	}
	return sorted(points), false, nil
}

// arrived records that session has a request at now, and returns when its
// previous one came (seen is false for a session this process has not
// seen). A clock that went back keeps the later time.
func (b *coldBook) arrived(session string, now time.Time) (prev time.Time, seen bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	prev, seen = b.seen[session]
	if !seen && len(b.seen) >= b.max {
		clear(b.seen) // start over: a forgotten session is taken to be warm
	}
	if !seen || now.After(prev) {
		b.seen[session] = now
	}
	return prev, seen
}

func sorted(p []int) []int {
	slices.Sort(p)
	return slices.Compact(p)
}

// coldClock decides whether the request c (res's) found its session's
// prompt cache cold, and gives the passes the session's cold requests
// (env.Cold). The request is timed by the Engine's clock, with its
// model's cache lifetime, or the longer one it asks for. A store that
// fails leaves the decision out (the request is warm), as any pass would
// fail open.
func (e *Engine) coldClock(ctx context.Context, c *conversation.Conversation, env *pipeline.Env, res *Result) {
	res.CacheTTL = res.Model.CacheTTL(cachelife.Extended(c.Body))
	at := len(c.Messages)
	points, cold, err := e.cold.decide(ctx, res.Session, at, e.now(), res.CacheTTL)
	if err != nil {
		e.log.Warn("the store did not answer for the session's cache clock; the request counts as warm", "session", res.Session, "err", err)
	}
	env.Cold, res.Cold = points, cold
}

// cause says why res's edit event happened (record.Cause*): env is the
// request's pipeline environment.
func cause(env *pipeline.Env, res *Result) string {
	switch {
	case env.Urgent:
		return record.CauseRecovery
	case res.Cold:
		return record.CauseCold
	case env.Window > 0 && res.TokensBefore > env.Window-env.MaxOutput:
		return record.CauseOverflow
	}
	return record.CauseThreshold
}
