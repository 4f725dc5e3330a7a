package engine

import (
	"cmp"
	"hash/maphash"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/tokens"
)

// A session's next request repeats its last one byte for byte and appends
// turns (a client may re-encode only its previous last message). The
// Engine keeps, per recent session, the parse of its last request
// (offsets only: the body is not kept) and hashes of that body's pieces
// (fingerprint), so the next request's parse scans only what is new
// (protocol.Protocol.ParseAfter) and passes can skip the messages they
// have already judged (pipeline.Request.Stable). Nothing a rewrite decides
// depends on this memory: with it or without it (a restart, a second
// instance, an evicted session, two conversations sharing a cache key)
// the output is the same bytes; the tests check that.

// sessionCache holds the cached sessions (the memos) most recently seen,
// bounded in count and in bytes, each dropped once idle: the memory goes
// back when the sessions stop. Safe for concurrent use.
type sessionCache struct {
	max      int              // most memos; 0 remembers none
	maxBytes int64            // most bytes all memos hold together
	idle     time.Duration    // a memo unused this long is dropped by sweep
	now      func() time.Time // the clock

	mu    sync.Mutex
	m     map[string]*cachedSession
	bytes int64 // the sum of the memos' sizes
}

// newSessionCache returns an empty cache with the given bounds.
func newSessionCache(max int, maxBytes int64, idle time.Duration) *sessionCache {
	return &sessionCache{max: max, maxBytes: maxBytes, idle: idle, now: time.Now, m: map[string]*cachedSession{}}
}

// cachedSession (a memo) is one session's last request: its parse, whose
// Body is nil (the spans index into a body the memo does not hold), and
// the fingerprint of that body.
type cachedSession struct {
	cache       *sessionCache
	mu          sync.Mutex // held by the request using it; others skip it
	conv        *conversation.Conversation
	fingerprint fingerprint
	shared      int // how many bytes of the current request repeat the remembered body (set by acquire)
	verified    int // how many of fingerprint.sums they cover
	used        time.Time
	pass        map[string]any // what passes keep between requests (pipeline.Request.Memo)
	msgTokens   []int          // the estimate of each message of conv (promptTokens)
	model       string         // the model the last request named
	size        int64          // what the memo holds, in bytes (changed under both cache.mu and mu)
	gone        bool           // removed from cache.m (under cache.mu)
}

// hashSeed seeds the hashes memos compare bodies with. It is random per
// process, so a client cannot craft bodies whose hashes collide.
var hashSeed = maphash.MakeSeed()

// fingerprint is what a memo keeps of a body instead of its bytes:
// hashes of its pieces, cut at the offsets protocol.Protocol.Stable looks
// at, so that the next request can be checked against them to find the
// bytes it repeats, and so that messages can be compared at moved
// offsets (extendsPrev).
//
// The cuts are, for each message k of the parse, Span.Start+1 (its first
// byte) and Span.End: sums[2k] hashes the bytes from the cut before (0 for
// k = 0) to Span.Start+1, sums[2k+1] the rest of the message, from
// Span.Start+1 to Span.End. The Stable of every protocol depends on how
// many bytes two bodies share only through comparisons with those offsets
// (a message counts when the next one starts, or ends, in the shared
// bytes): so the longest verified cut gives the same Stable as the longest
// common prefix of the two bodies did.
type fingerprint struct {
	sums []uint64
	sys  uint64 // the system prompt's bytes
	last uint64 // the text literals of the last message (textSum)
}

// cut returns the offset of cut j of c (see fingerprint).
func cut(c *conversation.Conversation, j int) int {
	if j%2 == 0 {
		return c.Messages[j/2].Span.Start + 1
	}
	return c.Messages[j/2].Span.End
}

// fill makes p the fingerprint of c (whose Body is set), keeping the
// first reuse sums, which the caller knows to hash the same bytes.
func (p *fingerprint) fill(c *conversation.Conversation, reuse int) {
	b := c.Body
	p.sums = p.sums[:reuse]
	pos := 0
	if reuse > 0 {
		pos = cut(c, reuse-1)
	}
	for j := reuse; j < 2*len(c.Messages); j++ {
		at := cut(c, j)
		p.sums = append(p.sums, maphash.Bytes(hashSeed, b[pos:at]))
		pos = at
	}
	p.sys = maphash.Bytes(hashSeed, c.Bytes(c.System))
	p.last = 0
	if n := len(c.Messages); n > 0 {
		p.last = textSum(c, n-1)
	}
}

// verify returns how many bytes of body are known to repeat the body
// prev (a parse without its body) was made of, whose fingerprint p is: the
// longest cut at which every piece before hashes the same. It returns
// the number of pieces verified too.
func (p *fingerprint) verify(prev *conversation.Conversation, body []byte) (shared, pieces int) {
	pos := 0
	for j := range p.sums {
		at := cut(prev, j)
		if at > len(body) || maphash.Bytes(hashSeed, body[pos:at]) != p.sums[j] {
			return pos, j
		}
		pos = at
	}
	return pos, len(p.sums)
}

// textSum hashes the text literals of message mi of c, in order: what
// extendsPrev compares. JSON string literals (quotes included) follow each
// other unambiguously.
func textSum(c *conversation.Conversation, mi int) uint64 {
	var h maphash.Hash
	h.SetSeed(hashSeed)
	for _, b := range c.Messages[mi].Blocks {
		if b.Kind == conversation.Text {
			h.Write(c.Bytes(b.Text))
		}
	}
	return h.Sum64()
}

// slots is how many memos one key may have: conversations that share a
// key (requests without a session header that start alike, subagents
// under their session's header) each keep their own.
const slots = 4

// slotKey names slot i of key in sessionCache.m.
func slotKey(key string, i int) string {
	if i == 0 {
		return key
	}
	return key + "#" + strconv.Itoa(i)
}

// acquire returns the memo a request with body under key is to use,
// locked, with what body repeats of it verified (memo.shared), or nil
// when the request is not to be remembered (no key, no room, every slot
// in use by other requests: concurrent requests then just parse in full).
// Of the key's memos no other request holds, it takes the one whose
// body the request repeats furthest, if the request continues it (it
// repeats all of that body but the last message's bytes after its
// first); if the request only starts as one does (another conversation),
// an empty slot, else the least recently used memo; if it starts as none
// does, the most recently used.
func (r *sessionCache) acquire(key string, body []byte) *cachedSession {
	if key == "" || r.max <= 0 {
		return nil
	}
	var held [slots]*cachedSession // the key's memos locked here
	free := held[:0]
	empty := -1
	r.mu.Lock()
	for i := range slots {
		m := r.m[slotKey(key, i)]
		switch {
		case m == nil:
			if empty < 0 {
				empty = i
			}
		case m.mu.TryLock():
			free = append(free, m)
		}
	}
	r.mu.Unlock()
	// The memo the body repeats furthest: verified in order of how much
	// each could share, until one is repeated whole.
	slices.SortFunc(free, func(a, b *cachedSession) int { return cmp.Compare(b.reach(), a.reach()) })
	for _, m := range free {
		m.shared, m.verified = 0, 0 // until verified
	}
	var best *cachedSession
	for _, m := range free {
		if m.conv != nil {
			m.shared, m.verified = m.fingerprint.verify(m.conv, body)
		}
		if best == nil || m.shared > best.shared {
			best = m
		}
		if m.verified == len(m.fingerprint.sums) {
			break // none after it can share more
		}
	}
	var use *cachedSession
	switch {
	case best != nil && best.conv != nil && best.verified >= len(best.fingerprint.sums)-1:
		use = best // the request continues it
	case best != nil && best.verified > 0:
		// Another conversation that starts the same way (or this one
		// with its history changed): a memo of its own, else the least
		// recently used.
		if empty >= 0 {
			use = r.add(slotKey(key, empty))
		}
		if use == nil {
			use = pick(free, func(a, b *cachedSession) bool { return a.used.Before(b.used) })
		}
	default:
		// Nothing the request starts with matches, as when the model
		// changed: the most recently used memo, as the same session's
		// (extendsPrev compares its messages at their moved offsets).
		use = pick(free, func(a, b *cachedSession) bool { return a.used.After(b.used) })
		if use == nil && empty >= 0 {
			use = r.add(slotKey(key, empty))
		}
	}
	for _, m := range free {
		if m != use {
			m.mu.Unlock()
		}
	}
	return use
}

// pick returns the memo of ms that comes first by less, or nil.
func pick(ms []*cachedSession, less func(a, b *cachedSession) bool) *cachedSession {
	var p *cachedSession
	for _, m := range ms {
		if p == nil || less(m, p) {
			p = m
		}
	}
	return p
}

// reach is how many bytes of a body the memo could be found to share.
func (m *cachedSession) reach() int {
	if m.conv == nil || len(m.conv.Messages) == 0 {
		return 0
	}
	return m.conv.Messages[len(m.conv.Messages)-1].Span.End
}

// add puts a new memo under key, locked, making room if needed; nil when
// every memo is in use or key was taken meanwhile.
func (r *sessionCache) add(key string) *cachedSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[key] != nil || len(r.m) >= r.max && !r.evictLocked(nil) {
		return nil
	}
	m := &cachedSession{cache: r, used: r.now()}
	m.mu.Lock()
	r.m[key] = m
	return m
}

// evictLocked drops the least recently used memo that is not in use and
// is not keep, and reports whether it found one. r.mu is held.
func (r *sessionCache) evictLocked(keep *cachedSession) bool {
	var oldest *cachedSession
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
func (r *sessionCache) removeLocked(key string, m *cachedSession) int64 {
	freed := m.size
	m.drop()
	r.bytes -= freed
	m.size = 0
	m.gone = true
	delete(r.m, key)
	return freed
}

// parse parses body with proto, reusing what the memo holds (the memo's
// key names the protocol): the messages of the remembered parse that lie
// within the bytes body verifiably repeats (fingerprint.verify).
func (m *cachedSession) parse(proto protocol.Protocol, body []byte) (*conversation.Conversation, int, error) {
	if m == nil || m.conv == nil {
		c, err := proto.Parse(body)
		return c, 0, err
	}
	prev := m.conv
	// prev's spans up to shared (verified by acquire) are spans of body
	// too: Stable measures them against the bytes verified (and finds
	// exactly what it would against the old body), ParseAfter takes them
	// over.
	prev.Body = body[:m.shared]
	st := proto.Stable(prev, body)
	c, err := proto.ParseAfter(body, prev, st)
	prev.Body = nil
	return c, st, err
}

// keep makes c (a parse of body) the memo's last request: it hashes the
// pieces of body the memo has no sum for yet (fingerprint.fill), releases the
// previous parse and keeps c without its body (c.Body is set to nil: the
// caller keeps ownership of body, which may be reused as soon as the
// request is done). c must not be released by the caller afterwards. If
// the memo would not fit the byte bound even alone, or was evicted
// meanwhile, it keeps nothing; otherwise older memos make room.
func (m *cachedSession) keep(c *conversation.Conversation, body []byte) {
	// The pieces verified before a cut that c shares with the previous
	// parse hash the same bytes.
	reuse := 0
	if prev := m.conv; prev != nil {
		for reuse < m.verified && reuse < 2*len(c.Messages) && cut(prev, reuse) == cut(c, reuse) {
			reuse++
		}
		prev.Release()
	}
	m.shared, m.verified = 0, 0
	c.Body = body
	m.fingerprint.fill(c, reuse)
	c.Body = nil
	m.conv = c
	size := int64(c.Footprint()) + int64(8*cap(m.fingerprint.sums)) + int64(8*cap(m.msgTokens)) + int64(pipeline.MemoFootprint(m.pass))
	r := m.cache
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
func (m *cachedSession) drop() {
	if m.conv != nil {
		m.conv.Release()
	}
	m.conv, m.pass, m.msgTokens = nil, nil, nil
	m.fingerprint = fingerprint{}
}

// forget drops what the memo holds (after a failed request: what passes
// kept may belong to it), keeping its place.
func (m *cachedSession) forget() {
	r := m.cache
	r.mu.Lock()
	r.bytes -= m.size
	m.size = 0
	r.mu.Unlock()
	m.drop()
}

// passes returns the memory passes keep between the session's requests,
// or nil without a memo.
func (m *cachedSession) passes() map[string]any {
	if m == nil {
		return nil
	}
	if m.pass == nil {
		m.pass = map[string]any{}
	}
	return m.pass
}

// release unlocks a memo acquired by acquire.
func (m *cachedSession) release() {
	if m != nil {
		m.mu.Unlock()
	}
}

// sweep forgets the memos unused for longer than the idle bound (all of
// them when it is 0) and returns the bytes freed.
func (r *sessionCache) sweep() int64 {
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
func (r *sessionCache) usage() (n int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m), r.bytes
}

// dropAll forgets every session's memo. A memo a request holds is only
// unlinked: that request finishes with it, its keep sees it gone and
// keeps nothing, and nobody acquires it again.
func (r *sessionCache) dropAll() {
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
