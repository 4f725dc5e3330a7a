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
	seen map[string]arrival // by session
}

// arrival is what a process remembers of a session's clock.
type arrival struct {
	last      time.Time // the latest request's arrival
	published time.Time // when this process last published one (publish)
}

// publishEvery is how often a process publishes a session's arrival at
// most: a store write per request would cost more than the rest of the
// clock. A process that times a request by another's publication allows
// for it (decide).
const publishEvery = 15 * time.Second

// maxColdPoints bounds the cold requests one session records: past it a
// session is never found cold again (a session idle that often gains
// little from one more).
const maxColdPoints = 1024

// newColdBook keeps decisions in st, whose records live ttl after their
// last use; sessions bounds the sessions remembered in memory.
func newColdBook(st store.Store, ttl time.Duration, now func() time.Time, sessions int) *coldBook {
	b := &coldBook{max: max(sessions, 1024), seen: map[string]arrival{}}
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
// as the store has them, with the current request's decision added, and
// the cache lifetime the request was timed with. The request holds at
// messages and arrived at now; its model's cache keeps a prefix for short,
// and life (called only when it matters) says how long the request asked
// for, at least short. A request the store already has as cold (a retry,
// or one another process saw first) stays cold. A request is found cold
// when the session's previous request, as this process saw it, came more
// than its lifetime before now; when another process (or this one before
// a restart) served the session since, by what the store says, with
// publishEvery more for the publication's lag. The first request of a
// session is warm. A store that fails leaves the current request warm and
// returns what it read (err says why).
func (b *coldBook) decide(ctx context.Context, session string, at int, now time.Time, short time.Duration, life func() time.Duration) (points []int, cold bool, ttl time.Duration, err error) {
	ttl = short
	if session == "" {
		return nil, false, ttl, nil
	}
	prev, seen, publish := b.arrived(session, now)
	slack := time.Duration(0)
	if !seen || now.Sub(prev) > short {
		// Another process on the store may have served the session
		// since this one last did (or this one restarted).
		if t, ok := b.published(ctx, session); ok && (!seen || t.After(prev)) {
			prev, seen, slack = t, true, publishEvery
		}
	}
	if publish {
		b.publish(ctx, session, now)
	}
	for i := 0; i < maxColdPoints; i++ {
		v, ok, err := b.decisions.Get(ctx, coldKey(session, i))
		if err != nil {
			return sorted(points), false, ttl, err
		}
		if !ok {
			break
		}
		points = append(points, v)
	}
	if seen && now.Sub(prev) > short && life != nil {
		ttl = max(life(), short)
	}
	if slices.Contains(points, at) {
		return sorted(points), true, ttl, nil
	}
	if !seen || ttl <= 0 || now.Sub(prev) <= ttl+slack {
		return sorted(points), false, ttl, nil
	}
	// Taken in order: another process may have taken the next slot for
	// a request of its own meanwhile.
	for i := len(points); i < maxColdPoints; i++ {
		v, err := b.decisions.Decide(ctx, coldKey(session, i), at)
		if err != nil {
			return sorted(points), false, ttl, err
		}
		points = append(points, v)
		if v == at {
			return sorted(points), true, ttl, nil
		}
	}
	return sorted(points), false, ttl, nil
}

// seenKey names the record of when a session's latest request arrived,
// which every process on the store writes (publish) and reads when its
// own memory does not say the session's cache is warm (published).
func seenKey(session string) string { return "seen/" + session }

// published returns when the store says session's latest request arrived.
func (b *coldBook) published(ctx context.Context, session string) (time.Time, bool) {
	v, err := b.decisions.Store.Get(ctx, seenKey(session))
	if err != nil {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, n), true
}

// publish tells the store that session has a request at now. A store
// that fails loses only a cold decision another process could have made.
func (b *coldBook) publish(ctx context.Context, session string, now time.Time) {
	_ = b.decisions.Store.Put(ctx, seenKey(session), strconv.AppendInt(nil, now.UnixNano(), 10))
}

// arrived records that session has a request at now, and returns when its
// previous one came (seen is false for a session this process has not
// seen), and whether this process should publish the arrival. A clock
// that went back keeps the later time.
func (b *coldBook) arrived(session string, now time.Time) (prev time.Time, seen, publish bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, seen := b.seen[session]
	if !seen && len(b.seen) >= b.max {
		clear(b.seen) // start over: a forgotten session is taken to be warm
	}
	prev = a.last
	if !seen || now.After(a.last) {
		a.last = now
	}
	if publish = !seen || now.Sub(a.published) >= publishEvery || now.Before(a.published); publish {
		a.published = now
	}
	b.seen[session] = a
	return prev, seen, publish
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
	life := func() time.Duration { return res.Model.CacheTTL(cachelife.Extended(c.Body)) }
	points, cold, ttl, err := e.cold.decide(ctx, res.Session, len(c.Messages), e.now(), res.Model.CacheTTL(false), life)
	res.CacheTTL = ttl
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
