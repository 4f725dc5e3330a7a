package store

import (
	"bytes"
	"io"
	"sync"
	"time"
)

// Memory is a Store held in memory, for tests and replays. It never
// expires anything. It is safe for concurrent use.
type Memory struct {
	mu      sync.Mutex
	blobs   map[string][]byte
	records map[string][]byte
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{blobs: map[string][]byte{}, records: map[string][]byte{}}
}

func (m *Memory) PutBlob(id string, data []byte) error {
	if !ValidID(id) {
		return ErrBadID
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.blobs[id]; !ok {
		m.blobs[id] = bytes.Clone(data)
	}
	return nil
}

func (m *Memory) HasBlob(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.blobs[id]
	return ok
}

func (m *Memory) OpenBlob(id string) (io.ReadCloser, error) {
	if !ValidID(id) {
		return nil, ErrBadID
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blobs[id]
	if !ok {
		return nil, ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (m *Memory) BlobPath(string) string { return "" }
func (m *Memory) BlobDir() string        { return "" }

func (m *Memory) Get(key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.records[key]
	if !ok {
		return nil, ErrNotFound
	}
	return bytes.Clone(b), nil
}

func (m *Memory) Put(key string, val []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.records[key] = bytes.Clone(val)
	return nil
}

func (m *Memory) Sweep(time.Time) (int, error) { return 0, nil }
func (m *Memory) Close() error                 { return nil }

// Len reports the number of blobs held.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.blobs)
}
