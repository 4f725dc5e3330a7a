// Package store keeps what ctxguard must remember beyond one request:
// content-addressed blobs (tool output a pass removed from a request, so the
// model can get it back) and small named records (token calibration,
// session statistics).
//
// Nothing a rewrite decides depends on the store: every decision is
// reproducible from the request alone (BRIEF principle 3). The store makes
// removed content retrievable (principle 6) and lets reports survive a
// restart. Implementations are safe for concurrent use.
package store

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"time"
)

// ErrNotFound is returned for absent blobs and records.
var ErrNotFound = errors.New("store: not found")

// ErrBadID is returned for a blob id that is not IDLen lowercase hex digits.
var ErrBadID = errors.New("store: invalid blob id")

// Store is the interface every store implements.
type Store interface {
	// PutBlob stores data under its ID unless already
	// present, and refreshes its age either way. data is not retained.
	PutBlob(id string, data []byte) error
	// HasBlob reports whether the blob is present.
	HasBlob(id string) bool
	// OpenBlob opens a stored blob for reading.
	OpenBlob(id string) (io.ReadCloser, error)
	// BlobPath returns where a blob lives on the local file system, or ""
	// if the store has no local files.
	BlobPath(id string) string
	// BlobDir returns the directory holding blobs as <id>.txt files, or
	// "" if the store has no local files.
	BlobDir() string
	// Get returns the record stored under key.
	Get(key string) ([]byte, error)
	// Put stores a record under key; val is not retained.
	Put(key string, val []byte) error
	// Sweep deletes blobs and records older than the store's TTL and
	// reports how many it removed.
	Sweep(now time.Time) (int, error)
	Close() error
}

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
