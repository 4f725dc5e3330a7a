package store

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Decisions keeps records that are decided once for every process on a
// store and never replaced: a compaction's summary and the request that
// first carried it, a digest of a tool result. The first writer wins
// (Store.PutIfAbsent); everyone, that process included, then uses the
// stored value, so a fleet on one store sends the same bytes.
//
// Decisions caches decoded values in memory, bounded in count (the cache
// starts over when full). A cached value is always right, since a stored
// decision never changes; it is re-read from the store (which refreshes
// its TTL) at most every Refresh, and written again if the store lost it,
// so a decision in use does not expire.
//
// Set the exported fields before first use. Safe for concurrent use.
type Decisions[T any] struct {
	Store Store
	// Max bounds the values cached; <= 0 means 4096.
	Max int
	// Refresh is how often a value in use is read from the store again
	// (RefreshInterval of the store's TTL, say); <= 0 never.
	Refresh time.Duration
	// Now is the clock Refresh is timed by; nil means time.Now.
	Now func() time.Time
	// Decode turns a stored record into a value, or fails for a record
	// that is not a valid decision (then it is an error, never used).
	Decode func([]byte) (T, error)
	// Encode turns a value into the record to store.
	Encode func(T) ([]byte, error)

	mu sync.Mutex
	m  map[string]decided[T]
}

type decided[T any] struct {
	v    T
	read time.Time // when the store last confirmed it
}

func (d *Decisions[T]) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Get returns the decision stored under key; ok is false when there is
// none.
func (d *Decisions[T]) Get(ctx context.Context, key string) (v T, ok bool, err error) {
	now := d.now()
	d.mu.Lock()
	e, hit := d.m[key]
	d.mu.Unlock()
	if hit && (d.Refresh <= 0 || now.Sub(e.read) < d.Refresh) {
		return e.v, true, nil
	}
	b, err := d.Store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		if hit {
			// Expired or swept while in use: the decision stands, so
			// write it back (unless someone did first).
			v, err := d.Decide(ctx, key, e.v)
			return v, err == nil, err
		}
		return v, false, nil
	}
	if err != nil {
		if hit {
			return e.v, true, nil // refresh again next time
		}
		return v, false, err
	}
	if v, err = d.Decode(b); err != nil {
		return v, false, err
	}
	d.add(key, v, now)
	return v, true, nil
}

// Decide stores v under key unless a decision is there, and returns the
// decision that stands: v, or the one stored first.
func (d *Decisions[T]) Decide(ctx context.Context, key string, v T) (T, error) {
	b, err := d.Encode(v)
	if err != nil {
		return v, err
	}
	cur, stored, err := d.Store.PutIfAbsent(ctx, key, b)
	if err != nil {
		return v, err
	}
	if !stored {
		if v, err = d.Decode(cur); err != nil {
			return v, err
		}
	}
	d.add(key, v, d.now())
	return v, nil
}

func (d *Decisions[T]) add(key string, v T, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	max := d.Max
	if max <= 0 {
		max = 4096
	}
	if d.m == nil || len(d.m) >= max {
		d.m = map[string]decided[T]{}
	}
	d.m[key] = decided[T]{v: v, read: now}
}
