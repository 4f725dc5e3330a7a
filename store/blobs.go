package store

import (
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"unicode/utf8"
)

// Ref says where a kept blob can be fetched.
type Ref struct {
	ID   string // content address
	Path string // local file, or "" for stores without files
	URL  string // the proxy's retrieval URL, or "" when none is configured
}

// Blobs puts removed content into a Store and returns where to find it.
// Passes keep the same content on every request of a session, so Blobs
// remembers, for the life of the process, what it already stored, keyed
// by a fast in-memory hash of the bytes the caller passed: a repeat costs
// that hash instead of a decode, a SHA-256 and a file system call. The
// memo is bounded; forgetting only costs a repeat of that work. Safe for
// concurrent use.
type Blobs struct {
	Store   Store
	BaseURL string // e.g. "http://127.0.0.1:8787"; the URL is BaseURL + "/ctxguard/v1/blobs/" + id

	seed  maphash.Seed
	once  sync.Once
	mu    sync.Mutex
	known map[uint64]Kept
}

// Kept is what Keep stored: where, and how many characters (Unicode code
// points) the content has.
type Kept struct {
	Ref
	Chars int
}

// maxKnown bounds the memo (about 100 bytes an entry).
const maxKnown = 1 << 17

// Keep stores content (if not stored yet) and returns its reference. The
// reference is a function of content and configuration only, so every
// request and every process computes the same one. content is not
// retained.
func (b *Blobs) Keep(content []byte) (Kept, error) {
	return b.KeepFrom(content, nil)
}

// KeepFrom is Keep for content in an encoded form (a JSON string literal,
// say): decode turns raw into the content to store, and is called only
// when raw was not seen before. A nil decode stores raw itself. raw is not
// retained.
func (b *Blobs) KeepFrom(raw []byte, decode func([]byte) ([]byte, error)) (Kept, error) {
	b.once.Do(func() {
		b.seed = maphash.MakeSeed()
		b.known = map[uint64]Kept{}
	})
	h := maphash.Bytes(b.seed, raw) ^ uint64(len(raw))
	b.mu.Lock()
	k, ok := b.known[h]
	b.mu.Unlock()
	if ok {
		return k, nil
	}
	content := raw
	if decode != nil {
		var err error
		if content, err = decode(raw); err != nil {
			return Kept{}, err
		}
	}
	id := ID(content)
	if err := b.Store.PutBlob(id, content); err != nil {
		return Kept{}, fmt.Errorf("keeping removed content: %w", err)
	}
	k = Kept{Ref: b.Ref(id), Chars: utf8.RuneCount(content)}
	b.mu.Lock()
	if len(b.known) >= maxKnown {
		clear(b.known)
	}
	b.known[h] = k
	b.mu.Unlock()
	return k, nil
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
