package compress

import (
	"container/list"
	"crypto/sha256"
	"sync"
	"unsafe"
)

// htmlMemo remembers HTML conversions by the SHA-256 of their input. The
// converter runs at about 12 MB/s, and a sticky rewrite repeats on every
// later request of a session, so without it one 100 KB page would cost
// some 10 ms per request for the rest of the session.
//
// It is a pure memo: a hit returns exactly what converting again would
// return (the conversion is a deterministic function of the input and the
// Pass's fixed configuration), so requests never see whether it hit. It
// is bounded in bytes, evicts the least recently used entry, and is safe
// for concurrent use.
type htmlMemo struct {
	mu    sync.Mutex
	limit int
	size  int
	ll    *list.List // front: most recently used
	m     map[[32]byte]*list.Element
}

type memoEntry struct {
	key [32]byte
	out string
}

func newHTMLMemo(limit int) *htmlMemo {
	if limit <= 0 {
		return nil
	}
	return &htmlMemo{limit: limit, ll: list.New(), m: map[[32]byte]*list.Element{}}
}

func memoKey(s string) [32]byte {
	return sha256.Sum256(unsafe.Slice(unsafe.StringData(s), len(s)))
}

// get returns the remembered conversion of the input with key k.
func (c *htmlMemo) get(k [32]byte) (string, bool) {
	if c == nil {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok {
		return "", false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*memoEntry).out, true
}

const memoOverhead = 128 // bytes per entry besides the output, roughly

// put remembers out for key k, evicting old entries to stay in bounds.
// Outputs larger than a quarter of the limit are not kept.
func (c *htmlMemo) put(k [32]byte, out string) {
	if c == nil || len(out)+memoOverhead > c.limit/4 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		return
	}
	c.m[k] = c.ll.PushFront(&memoEntry{key: k, out: out})
	c.size += len(out) + memoOverhead
	for c.size > c.limit {
		e := c.ll.Back()
		old := e.Value.(*memoEntry)
		c.ll.Remove(e)
		delete(c.m, old.key)
		c.size -= len(old.out) + memoOverhead
	}
}
