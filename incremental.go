package ctxguard

import (
	"net/http"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/session"
	"github.com/ctxguard/ctxguard/tokens"
)

// A session's next request repeats its last one byte for byte and appends
// turns (BRIEF, wire facts). The Guard keeps, per recent session, a copy
// of the last body and its parse, so the next request's parse scans only
// what is new (anthropic.ParseAfter) and passes can skip the messages they
// have already judged (pipeline.Request.Stable). Nothing a rewrite decides
// depends on this memory: with it or without it (a restart, a second
// instance, an evicted session) the output is the same bytes; the tests
// check that.

// recent holds the memos of the most recently seen sessions.
type recent struct {
	mu sync.Mutex
	m  map[string]*memo
}

// maxMemos bounds the sessions remembered; each costs about twice its last
// body (the copy, and the parse and pass results kept with it).
const maxMemos = 32

// memo is one session's last request.
type memo struct {
	mu        sync.Mutex // held by the request using it; others skip it
	body      []byte     // a copy of the last body, owned
	conv      *conversation.Conversation
	used      time.Time
	pass      map[string]any // what passes keep between requests (pipeline.Request.Memo)
	msgTokens []int          // the estimate of each message of conv (promptTokens)
}

// memoKey returns the session key a request can be matched with before it is
// parsed: a client's session header. Requests without one are not
// remembered.
func memoKey(h http.Header) string {
	for _, name := range session.Headers {
		if v := h.Get(name); v != "" {
			return name + ":" + v
		}
	}
	return ""
}

// acquire returns the session's memo, locked, or nil when the session has
// none yet and is not to be remembered, or when another request of the
// session holds it (concurrent requests of one session, such as
// subagents sharing a header, just parse in full).
func (r *recent) acquire(key string) *memo {
	if key == "" {
		return nil
	}
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]*memo{}
	}
	m := r.m[key]
	if m == nil {
		if len(r.m) >= maxMemos {
			r.evictLocked()
		}
		m = &memo{}
		r.m[key] = m
	}
	r.mu.Unlock()
	if !m.mu.TryLock() {
		return nil
	}
	return m
}

func (r *recent) evictLocked() {
	var oldest string
	var t time.Time
	for k, m := range r.m {
		if oldest == "" || m.used.Before(t) {
			oldest, t = k, m.used
		}
	}
	if m := r.m[oldest]; m != nil && m.mu.TryLock() {
		m.drop()
		m.mu.Unlock()
	}
	delete(r.m, oldest)
}

// parse parses body, reusing what the memo holds.
func (m *memo) parse(body []byte) (*conversation.Conversation, int, error) {
	if m == nil || m.conv == nil {
		c, err := anthropic.Parse(body)
		return c, 0, err
	}
	st := anthropic.Stable(m.conv, body)
	c, err := anthropic.ParseAfter(body, m.conv, st)
	return c, st, err
}

// keep makes c (a parse of body) the memo's last request: it copies body
// into the memory the memo owns (the previous body is no longer needed: c
// took what it reused from the previous parse by value), points c at it,
// and releases the previous parse. c must not be released by the caller
// afterwards.
func (m *memo) keep(c *conversation.Conversation, body []byte) {
	if m.conv != nil {
		m.conv.Release()
	}
	m.body = append(m.body[:0], body...)
	c.Body = m.body
	m.conv = c
	m.used = time.Now()
}

// drop forgets everything.
func (m *memo) drop() {
	if m.conv != nil {
		m.conv.Release()
	}
	m.conv, m.body, m.pass, m.msgTokens = nil, nil, nil, nil
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

// sweep forgets memos unused for longer than idle.
func (r *recent) sweep(idle time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, m := range r.m {
		if time.Since(m.used) > idle && m.mu.TryLock() {
			m.drop()
			m.mu.Unlock()
			delete(r.m, k)
		}
	}
}

// dropAll forgets every session's memo. A memo a request holds is only
// unlinked: that request finishes with it, and nobody acquires it again.
func (r *recent) dropAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, m := range r.m {
		if m.mu.TryLock() {
			m.drop()
			m.mu.Unlock()
		}
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
