package store

import (
	"fmt"
	"strings"
	"hash/maphash"
	"sync"
)

// Ref says where a kept blob can be fetched.
type Ref struct {
	ID   string // content address
	Path string // local file, or "" for stores without files
	URL  string // the proxy's retrieval URL, or "" when none is configured
}

// Blobs puts removed content into a Store and returns where to find it.
// Passes call Keep for the same content on every request of a session, so
// Blobs remembers, for the life of the process, which content it already
// stored: a repeat costs one fast in-memory hash instead of a SHA-256 and a
// file system call. The remembered set is bounded; forgetting only costs a
// repeat of that work. Safe for concurrent use.
type Blobs struct {
	Store   Store
	BaseURL string // e.g. "http://127.0.0.1:8787"; the URL is BaseURL + "/ctxguard/v1/blobs/" + id

	seed  maphash.Seed
	once  sync.Once
	mu    sync.Mutex
	known map[uint64]string // maphash of content -> id
}

// maxKnown bounds the memo (about 100 bytes an entry).
const maxKnown = 1 << 17

// Keep stores content (if not stored yet) and returns its reference. The
// reference is a function of content and configuration only, so every
// request and every process computes the same one. content is not
// retained.
func (b *Blobs) Keep(content []byte) (Ref, error) {
	b.once.Do(func() {
		b.seed = maphash.MakeSeed()
		b.known = map[uint64]string{}
	})
	h := maphash.Bytes(b.seed, content) ^ uint64(len(content))
	b.mu.Lock()
	id, ok := b.known[h]
	b.mu.Unlock()
	if !ok {
		id = ID(content)
		if err := b.Store.PutBlob(id, content); err != nil {
			return Ref{}, fmt.Errorf("keeping removed content: %w", err)
		}
		b.mu.Lock()
		if len(b.known) >= maxKnown {
			clear(b.known)
		}
		b.known[h] = id
		b.mu.Unlock()
	}
	return b.Ref(id), nil
}

// Ref returns the reference for a stored id.
func (b *Blobs) Ref(id string) Ref {
	r := Ref{ID: id, Path: b.Store.BlobPath(id)}
	if b.BaseURL != "" {
		r.URL = b.BaseURL + "/ctxguard/v1/blobs/" + id
	}
	return r
}

// Howto tells the model, once per request, how to get any blob back by
// its id.
func (b *Blobs) Howto() string {
	var ways []string
	if d := b.Store.BlobDir(); d != "" {
		ways = append(ways, "read the file "+d+"/<blob>.txt")
	}
	if b.BaseURL != "" {
		ways = append(ways, "GET "+b.BaseURL+"/ctxguard/v1/blobs/<blob>")
	}
	if len(ways) == 0 {
		return "ask the user for ctxguard blob <blob>"
	}
	return strings.Join(ways, ", or ")
}

// Where renders how to get this blob back: the file path when the store
// has files, else the URL, else the id.
func (r Ref) Where() string {
	switch {
	case r.Path != "":
		return r.Path
	case r.URL != "":
		return r.URL
	}
	return "ctxguard blob " + r.ID
}
