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
	"encoding/hex"
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

// IDLen is the length of a blob id: 64 bits of SHA-256 in hex. Every stub
// the model reads carries one, so it is kept short; a collision in one
// user's store needs billions of blobs.
const IDLen = 16

// ID returns the content address of data: the first 64 bits of its
// SHA-256, in lowercase hex.
func ID(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:IDLen/2])
}

// ValidID reports whether id is a well-formed blob id.
func ValidID(id string) bool {
	if len(id) != IDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
