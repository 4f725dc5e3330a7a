package store

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Ref says where a kept blob can be fetched.
type Ref struct {
	ID   string // content address
	Path string // local file, or "" for stores without files
	URL  string // the proxy's retrieval URL, or "" when none is configured
}

// Blobs puts removed content into a Store and returns where to find it,
// and keeps what requests still refer to alive (Use).
//
// Passes keep the same content on every request of a session, so Blobs
// remembers, for the life of the process, what it already stored, keyed
// by a fast in-memory hash of the bytes the caller passed: a repeat costs
// that hash instead of a decode, a SHA-256 and a file system call. The
// memo is bounded; forgetting only costs a repeat of that work. Because a
// repeat does not refresh the blob, callers report every blob a request
// they send refers to with Use. When Use finds a blob gone (deleted by
// hand, swept by another process with a shorter TTL, evicted from a
// Memory), Blobs forgets the memo and bumps its Epoch, so the next
// request that needs the blob stores it again; callers that memoize what
// KeepFrom returned key their memos by Epoch too.
//
// Set the exported fields before first use. Safe for concurrent use.
type Blobs struct {
	Store   Store
	BaseURL string // e.g. "http://127.0.0.1:8787"; the URL is BaseURL + "/ctxguard/v1/blobs/" + id
	// Sign, if set (with BaseURL), signs the link to a blob: the URL is
	// BaseURL + "/ctxguard/v1/blobs/" + id + "/" + Sign(id), a capability
	// that opens that blob without credentials, and the model reads the
	// blob's name as id/sig (Name). It must be a deterministic function
	// of id, so that every process sends the same bytes.
	Sign func(id string) string
	// TTL is the store's blob TTL; Use refreshes a blob at most every
	// RefreshInterval(TTL).
	TTL time.Duration
	// Now is the clock Use reads; nil means time.Now.
	Now func() time.Time

	seed    maphash.Seed
	once    sync.Once
	mu      sync.Mutex
	known   map[uint64]Kept
	touched map[string]int64 // when each blob was last refreshed (Unix ns), bounded
	epoch   atomic.Uint64
}

// Kept is what Keep stored: where, and how many characters (Unicode code
// points) the content has.
type Kept struct {
	Ref
	Chars int
}

// maxKnown bounds the memo (about 100 bytes an entry), and maxTouched
// the refresh times (about 50).
const (
	maxKnown   = 1 << 17
	maxTouched = 1 << 17
)

func (b *Blobs) init() {
	b.once.Do(func() {
		b.seed = maphash.MakeSeed()
		b.known = map[uint64]Kept{}
		b.touched = map[string]int64{}
	})
}

func (b *Blobs) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// Epoch counts the times Use found a blob missing and made Blobs forget
// what it stored. A memo of KeepFrom's results must include it in its
// key (or be dropped when it changes), else it keeps referring to a blob
// nobody stores again.
func (b *Blobs) Epoch() uint64 { return b.epoch.Load() }

// Use records that a request about to be sent refers to the blobs ids:
// each is refreshed in the store (Store.TouchBlob) unless this Blobs
// refreshed or stored it less than RefreshInterval(TTL) ago. It reports
// how many the store no longer holds; for those it forgets the memo and
// bumps Epoch (see Blobs), so the caller should also drop what it
// memoized of the requests that referred to them. ids is not retained
// (the strings are). A refresh that fails otherwise is retried on the
// next call. The common case, every blob refreshed recently, costs one
// lock and a map lookup per id and does not allocate.
func (b *Blobs) Use(ctx context.Context, ids []string) (missing int) {
	if len(ids) == 0 {
		return 0
	}
	b.init()
	now := b.now().UnixNano()
	every := int64(RefreshInterval(b.TTL))
	var due []string
	b.mu.Lock()
	for _, id := range ids {
		if t, ok := b.touched[id]; ok && now-t < every && now >= t {
			continue
		}
		due = append(due, id)
		b.noteTouchLocked(id, now)
	}
	b.mu.Unlock()
	var lost []string
	for _, id := range due {
		err := b.Store.TouchBlob(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound):
			lost = append(lost, id)
		case err != nil:
			b.mu.Lock()
			delete(b.touched, id)
			b.mu.Unlock()
		}
	}
	if len(lost) > 0 {
		b.mu.Lock()
		clear(b.known)
		for _, id := range lost {
			delete(b.touched, id)
		}
		b.mu.Unlock()
		b.epoch.Add(1)
	}
	return len(lost)
}

func (b *Blobs) noteTouchLocked(id string, now int64) {
	if len(b.touched) >= maxTouched {
		clear(b.touched)
	}
	b.touched[id] = now
}

// Keep stores content (if not stored yet) and returns its reference. The
// reference is a function of content and configuration only, so every
// request and every process computes the same one. content is not
// retained.
func (b *Blobs) Keep(ctx context.Context, content []byte) (Kept, error) {
	return b.KeepFrom(ctx, content, nil)
}

// KeepFrom is Keep for content in an encoded form (a JSON string literal,
// say): decode turns raw into the content to store, and is called only
// when raw was not seen before. A nil decode stores raw itself. raw is not
// retained.
func (b *Blobs) KeepFrom(ctx context.Context, raw []byte, decode func([]byte) ([]byte, error)) (Kept, error) {
	b.init()
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
	if err := b.Store.PutBlob(ctx, id, content); err != nil {
		return Kept{}, fmt.Errorf("keeping removed content: %w", err)
	}
	k = Kept{Ref: b.Ref(id), Chars: utf8.RuneCount(content)}
	now := b.now().UnixNano()
	b.mu.Lock()
	if len(b.known) >= maxKnown {
		clear(b.known)
	}
	b.known[h] = k
	b.noteTouchLocked(id, now) // PutBlob refreshed it
	b.mu.Unlock()
	return k, nil
}

// Ref returns the reference for a stored id.
func (b *Blobs) Ref(id string) Ref {
	r := Ref{ID: id, Path: BlobPath(b.Store, id)}
	if b.BaseURL != "" {
		r.URL = b.BaseURL + "/ctxguard/v1/blobs/" + b.Name(id)
	}
	return r
}

// signed reports whether blob links carry signatures.
func (b *Blobs) signed() bool { return b.Sign != nil && b.BaseURL != "" }

// Name returns how text the model reads names blob id: the id, or, with
// signed links, "id/sig", which Howto explains.
func (b *Blobs) Name(id string) string {
	if !b.signed() {
		return id
	}
	return id + "/" + b.Sign(id)
}

// Howto tells the model, once per request, how to get any blob back by
// its name (Name).
func (b *Blobs) Howto() string {
	var ways []string
	if d := BlobDir(b.Store); d != "" {
		ways = append(ways, "read the file "+d+"/<blob>.txt")
	}
	if b.signed() {
		ways = append(ways, "GET "+b.BaseURL+"/ctxguard/v1/blobs/<blob>/<sig> (no header needed), where a blob is named <blob>/<sig>")
	} else if b.BaseURL != "" {
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
