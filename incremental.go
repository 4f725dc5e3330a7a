package ctxguard

import (
	"net/http"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/session"
	"github.com/ctxguard/ctxguard/tokens"
)

// A session's next request repeats its last one byte for byte and appends
// turns (BRIEF, wire facts). The Guard keeps, per recent session, a copy
// of the last body and its parse, so the next request's parse scans only
// what is new (protocol.Protocol.ParseAfter) and passes can skip the messages they
// have already judged (pipeline.Request.Stable). Nothing a rewrite decides
// depends on this memory: with it or without it (a restart, a second
// instance, an evicted session) the output is the same bytes; the tests
// check that.

// recent holds the memos of the most recently seen sessions, bounded in
// count and in bytes, each dropped once idle: the memory goes back when
// the sessions stop. Safe for concurrent use.
type recent struct {
	max      int              // most memos; 0 remembers none
	maxBytes int64            // most bytes all memos hold together
	idle     time.Duration    // a memo unused this long is dropped by sweep
	now      func() time.Time // the clock

	mu    sync.Mutex
	m     map[string]*memo
	bytes int64 // the sum of the memos' sizes
}

// newRecent returns an empty recent with the given bounds.
func newRecent(max int, maxBytes int64, idle time.Duration) *recent {
	return &recent{max: max, maxBytes: maxBytes, idle: idle, now: time.Now, m: map[string]*memo{}}
}

// memo is one session's last request.
type memo struct {
	r         *recent
	mu        sync.Mutex // held by the request using it; others skip it
	body      []byte     // a copy of the last body, owned
	conv      *conversation.Conversation
	used      time.Time
	pass      map[string]any // what passes keep between requests (pipeline.Request.Memo)
	msgTokens []int          // the estimate of each message of conv (promptTokens)
	model     string         // the model the last request named
	size      int64          // what the memo holds, in bytes (changed under both r.mu and mu)
	gone      bool           // removed from r.m (under r.mu)
}

// memoKey returns the session key a request can be matched with before it is
// parsed: its protocol and a client's session header. Requests without one
// are not remembered.
func memoKey(proto protocol.Protocol, h http.Header) string {
	for _, name := range session.Headers {
		if v := h.Get(name); v != "" {
			return proto.Name() + "|" + name + ":" + v
		}
	}
	return ""
}

// acquire returns the session's memo, locked, or nil when the session is
// not to be remembered (no key, no room), or when another request of the
// session holds it (concurrent requests of one session, such as
// subagents sharing a header, just parse in full).
func (r *recent) acquire(key string) *memo {
	if key == "" || r.max <= 0 {
		return nil
	}
	r.mu.Lock()
	m := r.m[key]
	if m == nil {
		if len(r.m) >= r.max && !r.evictLocked(nil) {
			r.mu.Unlock()
			return nil // every memo is in use
		}
		m = &memo{r: r, used: r.now()}
		r.m[key] = m
	}
	r.mu.Unlock()
	if !m.mu.TryLock() {
		return nil
	}
	return m
}

// evictLocked drops the least recently used memo that is not in use and
// is not keep, and reports whether it found one. r.mu is held.
func (r *recent) evictLocked(keep *memo) bool {
	var oldest *memo
	var key string
	for k, m := range r.m {
		if m == keep || (oldest != nil && !m.used.Before(oldest.used)) {
			continue
		}
		if m.mu.TryLock() {
			if oldest != nil {
				oldest.mu.Unlock()
			}
			oldest, key = m, k
		}
	}
	if oldest == nil {
		return false
	}
	r.removeLocked(key, oldest)
	oldest.mu.Unlock()
	return true
}

// removeLocked forgets memo m (held by the caller) under key. r.mu is held.
func (r *recent) removeLocked(key string, m *memo) int64 {
	freed := m.size
	m.drop()
	r.bytes -= freed
	m.size = 0
	m.gone = true
	delete(r.m, key)
	return freed
}

// parse parses body with proto, reusing what the memo holds (the memo's
// key names the protocol).
func (m *memo) parse(proto protocol.Protocol, body []byte) (*conversation.Conversation, int, error) {
	if m == nil || m.conv == nil {
		c, err := proto.Parse(body)
		return c, 0, err
	}
	st := proto.Stable(m.conv, body)
	c, err := proto.ParseAfter(body, m.conv, st)
	return c, st, err
}

// keep makes c (a parse of body) the memo's last request: it copies body
// into the memory the memo owns (the previous body is no longer needed: c
// took what it reused from the previous parse by value), points c at it,
// and releases the previous parse. c must not be released by the caller
// afterwards. If the memo would not fit the byte bound even alone, or was
// evicted meanwhile, it keeps nothing; otherwise older memos make room.
func (m *memo) keep(c *conversation.Conversation, body []byte) {
	if m.conv != nil {
		m.conv.Release()
	}
	m.body = append(m.body[:0], body...)
	c.Body = m.body
	m.conv = c
	size := int64(cap(m.body)) + int64(c.Footprint()) + int64(8*cap(m.msgTokens)) + int64(pipeline.MemoFootprint(m.pass))
	r := m.r
	r.mu.Lock()
	defer r.mu.Unlock()
	m.used = r.now()
	if m.gone || size > r.maxBytes {
		r.bytes -= m.size
		m.size = 0
		m.drop()
		return
	}
	r.bytes += size - m.size
	m.size = size
	for r.bytes > r.maxBytes && r.evictLocked(m) {
	}
}

// drop forgets everything.
func (m *memo) drop() {
	if m.conv != nil {
		m.conv.Release()
	}
	m.conv, m.body, m.pass, m.msgTokens = nil, nil, nil, nil
}

// forget drops what the memo holds (after a failed request: what passes
// kept may belong to it), keeping its place.
func (m *memo) forget() {
	r := m.r
	r.mu.Lock()
	r.bytes -= m.size
	m.size = 0
	r.mu.Unlock()
	m.drop()
}

// passes returns the memory passes keep between the session's requests,
// or nil without a memo.
func (m *memo) passes() map[string]any {
	if m == nil {
		return nil
	}
	if m.pass == nil {
		m.pass = map[string]any{}
	}
	return m.pass
}

// release unlocks a memo acquired by acquire.
func (m *memo) release() {
	if m != nil {
		m.mu.Unlock()
	}
}

// sweep forgets the memos unused for longer than the idle bound (all of
// them when it is 0) and returns the bytes freed.
func (r *recent) sweep() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	var freed int64
	for k, m := range r.m {
		if now.Sub(m.used) >= r.idle && m.mu.TryLock() {
			freed += r.removeLocked(k, m)
			m.mu.Unlock()
		}
	}
	return freed
}

// usage reports how many memos there are and the bytes they hold.
func (r *recent) usage() (n int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m), r.bytes
}

// dropAll forgets every session's memo. A memo a request holds is only
// unlinked: that request finishes with it, its keep sees it gone and
// keeps nothing, and nobody acquires it again.
func (r *recent) dropAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, m := range r.m {
		if m.mu.TryLock() {
			r.removeLocked(k, m)
			m.mu.Unlock()
			continue
		}
		r.bytes -= m.size
		m.size, m.gone = 0, true
		delete(r.m, k)
	}
}

// promptTokens estimates a request's tokens as the sum of fixed pieces:
// what precedes the first message, each message with the separator after
// it, and the rest. Summing pieces lets a session's next request reuse the
// estimates of the messages it shares (stable of them, from prev); the
// decomposition does not depend on what was reused, so the figure is the
// same either way. It returns the per-message estimates too, appended to
// into[:0]; into may be prev (each estimate is read before it is
// overwritten).
func promptTokens(c *conversation.Conversation, stable int, prev []int, into []int) (int, []int) {
	b := c.Body
	msgs := c.Messages
	if len(msgs) == 0 {
		return tokens.Estimate(b), into[:0]
	}
	total := tokens.Estimate(b[:msgs[0].Span.Start]) + tokens.Estimate(b[c.List.End:])
	into = into[:0]
	for i := range msgs {
		var t int
		if i < stable && i < len(prev) {
			t = prev[i]
		} else {
			end := c.List.End
			if i+1 < len(msgs) {
				end = msgs[i+1].Span.Start
			}
			t = tokens.Estimate(b[msgs[i].Span.Start:end])
		}
		into = append(into, t)
		total += t
	}
	return total, into
}
