package thinking

import (
	"hash/maphash"
	"sync"
	"time"
)

// Signatures remembers who minted thinking blocks: the model family, by a
// hash of the block's signature (a thinking block's signature, a
// redacted_thinking block's data, a Responses reasoning item's
// encrypted_content, each as the JSON string it is sent as). It keeps no
// copy of a signature: 8 bytes of hash and the family per entry.
//
// An entry lives TTL after its last use (Record, or a Family lookup that
// finds it): the blocks of a session in use never expire. The cache holds
// at most MaxEntries entries, in two generations of MaxEntries/2 each:
// new and refreshed entries go to the young one; when it is full, the old
// one, whose entries were not used since, is dropped whole and the young
// one becomes the old one. Every operation is O(1) (no scans), and an
// entry in use survives at least MaxEntries/2 newer entries. About 50
// bytes an entry once Go's map overhead is counted (TestSignaturesMemory
// measures it): 100,000 entries, the default, take about 5 MiB.
//
// It is in memory only: a restarted process knows no signature, so the
// guard keeps every block it cannot attribute (the safe side).
//
// Safe for concurrent use.
type Signatures struct {
	ttl  time.Duration
	half int // entries per generation
	now  func() time.Time

	mu         sync.Mutex
	young, old map[uint64]entry
}

// entry is one remembered signature: who minted it and when it was last
// used (Unix nanoseconds of the cache's clock).
type entry struct {
	family string // one of a few strings, shared: 16 bytes of header
	used   int64
}

// seed keys the hashes: entries live in this process only, so a random
// seed costs nothing and denies anyone a chosen collision.
var seed = maphash.MakeSeed()

// NewSignatures returns an empty cache for cfg (TTL and MaxEntries; zero
// or negative values take the defaults); now is the clock (nil:
// time.Now).
func NewSignatures(cfg Config, now func() time.Time) *Signatures {
	if now == nil {
		now = time.Now
	}
	d := Defaults()
	if cfg.TTL <= 0 {
		cfg.TTL = d.TTL
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = d.MaxEntries
	}
	half := max(1, cfg.MaxEntries/2)
	return &Signatures{ttl: cfg.TTL, half: half, now: now, young: make(map[uint64]entry), old: make(map[uint64]entry)}
}

// Record attributes the signature sig (the JSON string as sent, quotes
// included) to family. An empty family or signature is ignored. sig is
// not retained.
func (s *Signatures) Record(family string, sig []byte) {
	if family == "" || len(sig) == 0 {
		return
	}
	h := maphash.Bytes(seed, sig)
	now := s.now().UnixNano()
	s.mu.Lock()
	delete(s.old, h)
	s.putLocked(h, entry{family: family, used: now})
	s.mu.Unlock()
}

// Family returns who minted the block with signature sig, and refreshes
// the entry; ok is false when the signature is unknown or its entry
// expired. sig is not retained.
func (s *Signatures) Family(sig []byte) (family string, ok bool) {
	if len(sig) == 0 {
		return "", false
	}
	h := maphash.Bytes(seed, sig)
	now := s.now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.young[h]
	if !ok {
		if e, ok = s.old[h]; ok {
			delete(s.old, h)
		}
	}
	if !ok {
		return "", false
	}
	if time.Duration(now-e.used) >= s.ttl {
		delete(s.young, h)
		return "", false
	}
	e.used = max(e.used, now) // a clock that steps back never shortens a life
	s.putLocked(h, e)
	return e.family, true
}

// putLocked stores e under h in the young generation, turning the
// generations over first when the young one is full and h is new to it.
func (s *Signatures) putLocked(h uint64, e entry) {
	if _, ok := s.young[h]; !ok && len(s.young) >= s.half {
		s.old, s.young = s.young, make(map[uint64]entry, s.half)
	}
	s.young[h] = e
}

// Len reports how many signatures are remembered, expired entries not
// yet dropped included.
func (s *Signatures) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.young) + len(s.old)
}
