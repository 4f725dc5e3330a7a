package store

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Dir is the embedded store: files in a private directory.
//
//	DIR/blobs/<id>.txt          blob, mode 0600
//	DIR/records/<sha256 of key>  record, mode 0600
//
// Directories are created with mode 0700. Writes go to a temporary file
// that is renamed into place, so readers never see half a blob and a crash
// never leaves one. Several processes may share a Dir.
type Dir struct {
	root string
	ttl  time.Duration
}

// OpenDir opens (creating if needed) the store at root. Blobs and records
// untouched for longer than ttl are removed by Sweep; ttl <= 0 keeps them
// forever.
func OpenDir(root string, ttl time.Duration) (*Dir, error) {
	if root == "" {
		return nil, errors.New("store: empty data directory")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{abs, filepath.Join(abs, "blobs"), filepath.Join(abs, "records")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		// MkdirAll leaves existing directories alone; tighten them.
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	return &Dir{root: abs, ttl: ttl}, nil
}

// Root returns the store's directory.
func (d *Dir) Root() string { return d.root }

// BlobDir returns the directory holding the blobs: each blob is the file
// BlobDir()/<id>.txt.
func (d *Dir) BlobDir() string { return filepath.Join(d.root, "blobs") }

// BlobPath returns the file a blob is (or would be) stored in, or "" for an
// invalid id.
func (d *Dir) BlobPath(id string) string {
	if !ValidID(id) {
		return ""
	}
	return filepath.Join(d.root, "blobs", id+".txt")
}

// PutBlob implements Store.
func (d *Dir) PutBlob(id string, data []byte) error {
	p := d.BlobPath(id)
	if p == "" {
		return ErrBadID
	}
	now := time.Now()
	if err := os.Chtimes(p, now, now); err == nil {
		return nil // present: refreshed
	}
	return writeFile(p, data)
}

// HasBlob implements Store.
func (d *Dir) HasBlob(id string) bool {
	p := d.BlobPath(id)
	if p == "" {
		return false
	}
	_, err := os.Stat(p)
	return err == nil
}

// OpenBlob implements Store.
func (d *Dir) OpenBlob(id string) (io.ReadCloser, error) {
	p := d.BlobPath(id)
	if p == "" {
		return nil, ErrBadID
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	return f, err
}

func (d *Dir) recordPath(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(d.root, "records", hex.EncodeToString(sum[:16]))
}

// Get implements Store.
func (d *Dir) Get(key string) ([]byte, error) {
	b, err := os.ReadFile(d.recordPath(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	return b, err
}

// Put implements Store.
func (d *Dir) Put(key string, val []byte) error { return writeFile(d.recordPath(key), val) }

// Sweep implements Store.
func (d *Dir) Sweep(now time.Time) (int, error) {
	if d.ttl <= 0 {
		return 0, nil
	}
	n := 0
	err := filepath.WalkDir(d.root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		if now.Sub(info.ModTime()) > d.ttl {
			if os.Remove(p) == nil {
				n++
			}
		}
		return nil
	})
	return n, err
}

// Close implements Store.
func (d *Dir) Close() error { return nil }

func writeFile(p string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp, 0o600)
	}
	if werr == nil {
		werr = os.Rename(tmp, p)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("store: %w", werr)
	}
	return nil
}

var (
	_ Store = (*Dir)(nil)
	_ Store = (*Memory)(nil)
)
