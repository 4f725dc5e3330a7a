// Package store keeps what ctxguard must remember beyond one request:
// content-addressed blobs (tool output a pass removed from a request, so the
// model can get it back) and small named records (token calibration,
// session statistics).
//
// Nothing a rewrite decides depends on the store: every decision is
// reproducible from the request alone (a restarted process, or a second
// instance, sends the same bytes). The store makes removed content
// retrievable, whole, and lets reports survive a
// restart. Implementations are safe for concurrent use.
//
// Ownership. A store copies what it is given (PutBlob's data, Put's val)
// and hands out copies (Get's result, OpenBlob's reader); callers keep
// their slices. Dir, the embedded store, owns only what it created in its
// data directory: the marker file .ctxguard-store and the entries of
// blobs/ and records/ whose names it gives (see Dir). It refuses a
// directory holding anything else, and neither reads, moves, deletes nor
// re-permissions files it did not create.
//
// Expiry. A blob lives until blob_ttl after its last use: every request
// that refers to it (by a stub or a preview) counts as a use, through
// Blobs.Use, which refreshes the blob at most every RefreshInterval(ttl);
// the stores keep a blob for ttl + RefreshInterval(ttl) after its last
// refresh, so that granularity never expires a blob used within ttl.
// Records live ttl after their last Put or Get.
package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"time"
)

// ErrNotFound is returned for absent blobs and records.
var ErrNotFound = errors.New("store: not found")

// ErrBadID is returned for a blob id that is not IDLen lowercase letters.
var ErrBadID = errors.New("store: invalid blob id")

// ErrNotWritable is matched (errors.Is) by OpenDir's error when the data
// directory cannot be created or written: see OpenDir for the OS errors
// that count. The error also wraps the OS error. A caller may serve
// without persistence instead (ctxguard.New falls back to a Memory).
var ErrNotWritable = errors.New("store: data directory cannot be written")

// ErrNotOurs is matched by OpenDir's error when the data directory holds
// files that are not ctxguard's, or was written by a newer ctxguard. It is
// never a reason to fall back: the user must choose another folder.
var ErrNotOurs = errors.New("store: data directory is not ctxguard's")

// ErrTooLarge is matched by PutBlob's error for a blob larger than the
// store takes: a Memory's whole byte cap, a Redis store's blob limit. The
// error says the size and the limit.
var ErrTooLarge = errors.New("store: blob larger than the store takes")

// Store is the interface every store implements. Every method takes a
// context: a store on a server (Redis) gives up when it ends, and callers
// bound each call (a request's context, or a timeout of their own).
// Stores on the local machine may ignore it.
//
// A store may be shared by several ctxguard processes (a Dir by
// processes on one machine, a Redis by a fleet): what must be decided
// once for all of them goes through PutIfAbsent.
type Store interface {
	// PutBlob stores data under its ID unless already
	// present, and refreshes its age either way. data is not retained.
	// An invalid id is ErrBadID.
	PutBlob(ctx context.Context, id string, data []byte) error
	// HasBlob reports whether the blob is present (false for an invalid
	// id, and when the store cannot answer).
	HasBlob(ctx context.Context, id string) bool
	// OpenBlob opens a stored blob for reading: ErrNotFound if absent,
	// ErrBadID for an invalid id. The reader does not change when the
	// blob is swept or replaced afterwards. Reading is not a use.
	OpenBlob(ctx context.Context, id string) (io.ReadCloser, error)
	// TouchBlob refreshes a stored blob's age, as PutBlob does for a
	// present blob: ErrNotFound if absent, ErrBadID for an invalid id.
	TouchBlob(ctx context.Context, id string) error
	// Get returns the record stored under key (ErrNotFound if absent),
	// and refreshes its age: a record lives TTL after its last Put or
	// Get.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put stores a record under key, replacing any; val is not retained.
	Put(ctx context.Context, key string, val []byte) error
	// PutIfAbsent stores val under key unless a record is there, in one
	// atomic step for every process on the store, and returns the record
	// that stands: val and true when it stored val, else the record
	// found and false (its age refreshed, as by Get). val is not
	// retained; the result is the caller's.
	PutIfAbsent(ctx context.Context, key string, val []byte) (cur []byte, stored bool, err error)
	// Sweep deletes, as of now, the blobs older than the store's TTL
	// plus RefreshInterval(TTL) and the records older than the TTL, and
	// reports how many it removed. A TTL <= 0 keeps them forever. A
	// store whose server expires entries itself returns 0, nil.
	Sweep(ctx context.Context, now time.Time) (int, error)
	// Ping reports whether the store answers (for /readyz).
	Ping(ctx context.Context) error
	Close() error
}

// Files is implemented by stores that keep each blob as a file on the
// local file system (Dir). Other stores serve blobs only through
// ctxguard's blob endpoint, so a stub names no path.
type Files interface {
	// BlobPath returns the file a blob lives in, or "" for an invalid
	// id.
	BlobPath(id string) string
	// BlobDir returns the directory holding blobs as <id>.txt files.
	BlobDir() string
}

// BlobPath returns where s keeps blob id on the local file system, or ""
// when s has no files (see Files; a wrapped store's are found, see As).
func BlobPath(s Store, id string) string {
	if f, ok := As[Files](s); ok {
		return f.BlobPath(id)
	}
	return ""
}

// BlobDir returns the directory where s keeps blobs as files, or "" when
// s has no files (see Files).
func BlobDir(s Store) string {
	if f, ok := As[Files](s); ok {
		return f.BlobDir()
	}
	return ""
}

// RefreshInterval is how often Blobs.Use refreshes a blob a session keeps
// using: an eighth of the TTL, at most an hour (an hour when blobs never
// expire, so a lost blob is still noticed). Stores keep a blob for
// ttl + RefreshInterval(ttl) after its last refresh, so a blob used within
// ttl is never swept.
func RefreshInterval(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return time.Hour
	}
	return min(ttl/8, time.Hour)
}

// CallTimeout bounds a store call that no request bounds (a readiness
// probe, a report, a background save).
const CallTimeout = 5 * time.Second

// CallContext returns a context for a store call that no request bounds:
// it ends after CallTimeout.
func CallContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), CallTimeout)
}

// blobLife is how long after its last refresh a blob is kept.
func blobLife(ttl time.Duration) time.Duration { return ttl + RefreshInterval(ttl) }

// IDLen is the length of a blob id: 13 lowercase letters, 61 bits of the
// content's SHA-256. Every stub the model reads carries one, so it is kept
// short and free of digits, which tokenizers split finely; a collision in
// one user's store needs about a billion blobs.
const IDLen = 13

// ID returns the content address of data: the first 64 bits of its
// SHA-256 written in base 26 with the letters a-z, truncated to IDLen.
func ID(data []byte) string {
	sum := sha256.Sum256(data)
	v := binary.BigEndian.Uint64(sum[:8])
	var b [IDLen]byte
	for i := range b {
		b[i] = 'a' + byte(v%26)
		v /= 26
	}
	return string(b[:])
}

// ValidID reports whether id is a well-formed blob id.
func ValidID(id string) bool {
	if len(id) != IDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 'a' || id[i] > 'z' {
			return false
		}
	}
	return true
}
