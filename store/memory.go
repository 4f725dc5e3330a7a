package store

import (
	"bytes"
	"container/list"
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Memory is a Store held in memory: for tests and replays (NewMemory:
// unbounded, nothing expires), and for serving when the data directory
// cannot be written (NewMemoryWith: a byte cap and a TTL). What it holds
// is lost on exit. It copies what it is given and hands out readers over
// its own copies, which it never modifies. Safe for concurrent use.
type Memory struct {
	opt MemoryOptions

	mu      sync.Mutex
	blobs   map[string]*list.Element // of *memBlob
	lru     list.List                // most recently used first
	bytes   int64                    // of the blobs' data
	records map[string]memRecord
}

// MemoryOptions bound a Memory. The zero value bounds nothing.
type MemoryOptions struct {
	// MaxBytes caps the bytes of blob data held; <= 0 means no cap.
	// Storing a blob over the cap evicts the least recently used ones
	// (PutBlob and TouchBlob count as uses); a blob larger than the cap
	// is refused with ErrTooLarge.
	MaxBytes int64
	// TTL: Sweep removes blobs unused for longer than
	// TTL + RefreshInterval(TTL) and records not Put or Get for longer
	// than TTL. <= 0 keeps them until evicted.
	TTL time.Duration
	// Now is the clock uses are timed by; nil means time.Now.
	Now func() time.Time
}

type memBlob struct {
	id   string
	data []byte
	used time.Time
}

type memRecord struct {
	val []byte
	put time.Time
}

// NewMemory returns an empty, unbounded in-memory store that never
// expires anything.
func NewMemory() *Memory { return NewMemoryWith(MemoryOptions{}) }

// NewMemoryWith returns an empty in-memory store bounded by o.
func NewMemoryWith(o MemoryOptions) *Memory {
	return &Memory{opt: o, blobs: map[string]*list.Element{}, records: map[string]memRecord{}}
}

func (m *Memory) now() time.Time {
	if m.opt.Now != nil {
		return m.opt.Now()
	}
	return time.Now()
}

// PutBlob implements Store.
func (m *Memory) PutBlob(_ context.Context, id string, data []byte) error {
	if !ValidID(id) {
		return ErrBadID
	}
	if m.opt.MaxBytes > 0 && int64(len(data)) > m.opt.MaxBytes {
		return fmt.Errorf("%w (%d bytes, cap %d)", ErrTooLarge, len(data), m.opt.MaxBytes)
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.blobs[id]; ok {
		m.useLocked(e, now)
		return nil
	}
	m.blobs[id] = m.lru.PushFront(&memBlob{id: id, data: bytes.Clone(data), used: now})
	m.bytes += int64(len(data))
	for m.opt.MaxBytes > 0 && m.bytes > m.opt.MaxBytes {
		m.removeLocked(m.lru.Back()) // never the one just added: it fits alone
	}
	return nil
}

func (m *Memory) useLocked(e *list.Element, now time.Time) {
	e.Value.(*memBlob).used = now
	m.lru.MoveToFront(e)
}

func (m *Memory) removeLocked(e *list.Element) {
	b := m.lru.Remove(e).(*memBlob)
	delete(m.blobs, b.id)
	m.bytes -= int64(len(b.data))
}

// TouchBlob implements Store.
func (m *Memory) TouchBlob(_ context.Context, id string) error {
	if !ValidID(id) {
		return ErrBadID
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.blobs[id]
	if !ok {
		return ErrNotFound
	}
	m.useLocked(e, now)
	return nil
}

// HasBlob implements Store.
func (m *Memory) HasBlob(_ context.Context, id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.blobs[id]
	return ok
}

// OpenBlob implements Store. Reading is not a use.
func (m *Memory) OpenBlob(_ context.Context, id string) (io.ReadCloser, error) {
	if !ValidID(id) {
		return nil, ErrBadID
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.blobs[id]
	if !ok {
		return nil, ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(e.Value.(*memBlob).data)), nil
}

// Get implements Store.
func (m *Memory) Get(_ context.Context, key string) ([]byte, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.records[key]
	if !ok {
		return nil, ErrNotFound
	}
	r.put = now
	m.records[key] = r
	return bytes.Clone(r.val), nil
}

// Put implements Store.
func (m *Memory) Put(_ context.Context, key string, val []byte) error {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records[key] = memRecord{val: bytes.Clone(val), put: now}
	return nil
}

// PutIfAbsent implements Store.
func (m *Memory) PutIfAbsent(_ context.Context, key string, val []byte) ([]byte, bool, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.records[key]; ok {
		r.put = now
		m.records[key] = r
		return bytes.Clone(r.val), false, nil
	}
	m.records[key] = memRecord{val: bytes.Clone(val), put: now}
	return bytes.Clone(val), true, nil
}

// Ping implements Store: a Memory always answers.
func (m *Memory) Ping(context.Context) error { return nil }

// Sweep implements Store.
func (m *Memory) Sweep(_ context.Context, now time.Time) (int, error) {
	if m.opt.TTL <= 0 {
		return 0, nil
	}
	life := blobLife(m.opt.TTL)
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for e := m.lru.Back(); e != nil; {
		prev := e.Prev()
		if now.Sub(e.Value.(*memBlob).used) > life {
			m.removeLocked(e)
			n++
		}
		e = prev
	}
	for k, r := range m.records {
		if now.Sub(r.put) > m.opt.TTL {
			delete(m.records, k)
			n++
		}
	}
	return n, nil
}

// Close implements Store.
func (m *Memory) Close() error { return nil }

// Len reports the number of blobs held.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.blobs)
}

// Bytes reports the bytes of blob data held.
func (m *Memory) Bytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bytes
}
