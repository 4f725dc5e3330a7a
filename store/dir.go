package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Dir is the embedded store: files in a data directory that ctxguard owns.
//
//	DIR/.ctxguard-store          marker: "ctxguard store\nformat 1\n"
//	DIR/blobs/<id>.txt           blob, mode 0600
//	DIR/records/<32 hex digits>  record (first half of the key's SHA-256), mode 0600
//
// The marker says the directory is a ctxguard store, and which layout it
// has; OpenDir refuses any other non-empty directory (see OpenDir), so
// pointing the data directory at a folder of one's own files is an error,
// never a loss. blobs/ and records/ are created with mode 0700 (and
// tightened to it); the data directory's own mode is left as the user set
// it, unless Dir created it (0700).
//
// Dir writes, deletes and re-permissions only its own files: the marker,
// blobs/ and records/, the files in them with the names above, and its
// temporary files (".tmp-*" in the same folders). Sweep deletes only
// regular files in blobs/ and records/ with those names, never looks into
// subfolders and never follows a symbolic link; anything else dropped
// into those folders stays. A blob or record name that is not a regular
// file (a link, say) is treated as absent and never written through.
//
// Writes go to a temporary file that is renamed into place, so readers
// never see half a blob and a crash never leaves one. Several processes
// may share a Dir: a blob's age is its file's modification time, which
// every process's PutBlob and TouchBlob refresh. Safe for concurrent use.
type Dir struct {
	root     string
	ttl      time.Duration
	warnings []string
	// Now is the clock for the modification times PutBlob, TouchBlob and
	// Put set; nil means time.Now. Set it before the Dir is used.
	Now func() time.Time
}

// Marker is the name of the file that marks a ctxguard data directory.
const Marker = ".ctxguard-store"

// Format is the store layout this version reads and writes.
const Format = 1

// markerText is the marker file's content for Format.
var markerText = []byte("ctxguard store\nformat " + strconv.Itoa(Format) + "\n")

// markerTemp prefixes the temporary file the marker is written to.
const markerTemp = Marker + ".tmp-"

// tempPrefix prefixes Dir's temporary files in blobs/ and records/; Sweep
// removes those older than tempLife (a crashed write's leftovers).
const (
	tempPrefix = ".tmp-"
	tempLife   = time.Hour
)

// OpenDir opens the store at root, a directory:
//
//   - absent: it is created, with mode 0700 (and any missing parents),
//     and marked;
//   - empty: it is adopted (marked) and its mode left alone;
//   - holding only what earlier ctxguard versions wrote (blobs/ and
//     records/, each holding only files with their names): adopted;
//   - marked: it is ours; a marker of a newer format is refused;
//   - anything else: refused with an error matching ErrNotOurs that names
//     the folder and one foreign entry. Nothing in it is changed.
//
// blobs/ and records/ must be real directories, not links. OpenDir checks
// that it can write both (creating and removing a temporary file). The
// root is the path given, links followed; its mode is never changed, and
// Warnings says so when other users may access it.
//
// If the directory cannot be created or written, the error matches
// ErrNotWritable and wraps the OS error. These OS errors count: permission
// denied (EACCES, EPERM), a read-only file system (EROFS), no space or
// quota left (ENOSPC, EDQUOT), and a path through a regular file
// (ENOTDIR: a parent of root is a file, so root can never be created).
// Other errors, and a root that is itself a file, are plain errors.
//
// Blobs untouched for longer than ttl + RefreshInterval(ttl), and records
// untouched for longer than ttl, are removed by Sweep; ttl <= 0 keeps them
// forever.
func OpenDir(root string, ttl time.Duration) (*Dir, error) {
	if root == "" {
		return nil, errors.New("store: empty data directory")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	d := &Dir{root: abs, ttl: ttl}
	if err := d.claim(); err != nil {
		return nil, err
	}
	subs := []string{"blobs", "records"}
	for _, sub := range subs {
		if err := d.checkSubdir(sub); err != nil {
			return nil, err
		}
	}
	for _, sub := range subs {
		if err := d.subdir(sub); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// claim makes sure root is a directory that is ctxguard's, creating,
// adopting or refusing it as OpenDir says.
func (d *Dir) claim() error {
	root := d.root
	fi, err := os.Stat(root)
	created := false
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(root, 0o700); err != nil {
			return notWritable(root, err)
		}
		created = true
		fi, err = os.Stat(root)
	}
	if err != nil {
		return notWritable(root, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: data dir %s is not a folder", ErrNotOurs, root)
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return notWritable(root, err)
	}
	if !created && fi.Mode().Perm()&0o077 != 0 {
		d.warnings = append(d.warnings, fmt.Sprintf(
			"data dir %s is accessible to other users (mode %#o); ctxguard keeps its own files in private subfolders and leaves the folder's mode as it is (chmod 700 it to make it private)",
			root, fi.Mode().Perm()))
	}
	for _, e := range ents {
		if e.Name() == Marker {
			return d.checkMarker()
		}
	}
	if foreign := foreignEntry(root, ents); foreign != "" {
		return fmt.Errorf("%w: data dir %s holds files that are not ctxguard's (no %s marker; for example %q); choose an empty or new folder",
			ErrNotOurs, root, Marker, foreign)
	}
	return d.writeMarker()
}

// foreignEntry returns the name (relative to root) of an entry of a
// directory without a marker that keeps ctxguard from adopting it, or ""
// when it holds nothing but what ctxguard (or an earlier version) wrote:
// its own temporary marker files, and blobs/ and records/ holding only
// regular files with their names.
func foreignEntry(root string, ents []fs.DirEntry) string {
	for _, e := range ents {
		name := e.Name()
		var ours func(string) bool
		switch {
		case strings.HasPrefix(name, markerTemp) && e.Type().IsRegular():
			continue
		case name == "blobs" && e.IsDir():
			ours = isBlobName
		case name == "records" && e.IsDir():
			ours = isRecordName
		default:
			return name
		}
		sub, err := os.ReadDir(filepath.Join(root, name))
		if err != nil {
			return name
		}
		for _, f := range sub {
			if n := f.Name(); !f.Type().IsRegular() || !(ours(n) || strings.HasPrefix(n, tempPrefix)) {
				return filepath.Join(name, n)
			}
		}
	}
	return ""
}

// checkMarker reads the marker of a marked root.
func (d *Dir) checkMarker() error {
	p := filepath.Join(d.root, Marker)
	f, err := openRegular(p)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %s is not a regular file; choose another folder", ErrNotOurs, p)
	}
	if err != nil {
		return notWritable(p, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return fmt.Errorf("store: reading the marker: %w", err)
	}
	head, rest, _ := bytes.Cut(b, []byte("\n"))
	line, _, _ := bytes.Cut(rest, []byte("\n"))
	vs, ok := strings.CutPrefix(string(line), "format ")
	v, err := strconv.Atoi(vs)
	if string(head) != "ctxguard store" || !ok || err != nil || v < 1 {
		return fmt.Errorf("%w: %s is not a ctxguard store marker; choose another folder", ErrNotOurs, p)
	}
	if v > Format {
		return fmt.Errorf("%w: data dir %s holds a store of format %d, written by a newer ctxguard (this one reads format %d); upgrade ctxguard or choose another folder",
			ErrNotOurs, d.root, v, Format)
	}
	return nil
}

// writeMarker marks root. Two processes adopting one folder at once write
// the same bytes, so the rename of one over the other's is harmless.
func (d *Dir) writeMarker() error {
	f, err := os.CreateTemp(d.root, markerTemp+"*")
	if err != nil {
		return notWritable(d.root, err)
	}
	tmp := f.Name()
	_, err = f.Write(markerText)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(d.root, Marker))
	}
	if err != nil {
		os.Remove(tmp)
		return notWritable(d.root, err)
	}
	return nil
}

// checkSubdir refuses a root/name that exists and is not a real
// directory.
func (d *Dir) checkSubdir(name string) error {
	p := filepath.Join(d.root, name)
	fi, err := os.Lstat(p)
	if err == nil && !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a folder (a link or a file); ctxguard keeps its %s there only in a real folder", ErrNotOurs, p, name)
	}
	return nil
}

// subdir makes sure root/name is a private directory that can be written.
func (d *Dir) subdir(name string) error {
	if err := d.checkSubdir(name); err != nil {
		return err
	}
	p := filepath.Join(d.root, name)
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return notWritable(p, err)
		}
		fi, err = os.Lstat(p)
	}
	if err != nil {
		return notWritable(p, err)
	}
	if !fi.IsDir() { // replaced since checkSubdir
		return fmt.Errorf("%w: %s is not a folder", ErrNotOurs, p)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(p, 0o700); err != nil {
			return notWritable(p, err)
		}
	}
	// Can it be written? (A marked store on a file system remounted
	// read-only, say.)
	f, err := os.CreateTemp(p, tempPrefix+"*")
	if err != nil {
		return notWritable(p, err)
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// notWritable wraps err with ErrNotWritable when it means the directory
// cannot be written (see OpenDir), and as a plain error otherwise.
func notWritable(dir string, err error) error {
	if cannotWrite(err) {
		return fmt.Errorf("%w: %s: %w", ErrNotWritable, dir, err)
	}
	return fmt.Errorf("store: %s: %w", dir, err)
}

// cannotWrite reports whether err is one of the OS errors that mean "this
// place cannot be written" (see OpenDir).
func cannotWrite(err error) bool {
	for _, e := range []error{fs.ErrPermission, syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENOSPC, syscall.EDQUOT, syscall.ENOTDIR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Warnings returns what OpenDir found worth telling the user (a data
// directory other users may access), as sentences.
func (d *Dir) Warnings() []string { return d.warnings }

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

func (d *Dir) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// isBlobName reports whether name is a blob file's name: IDLen lowercase
// letters and ".txt".
func isBlobName(name string) bool {
	id, ok := strings.CutSuffix(name, ".txt")
	return ok && ValidID(id)
}

// isRecordName reports whether name is a record file's name: 32 lowercase
// hex digits.
func isRecordName(name string) bool {
	if len(name) != 32 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// PutBlob implements Store.
func (d *Dir) PutBlob(_ context.Context, id string, data []byte) error {
	p := d.BlobPath(id)
	if p == "" {
		return ErrBadID
	}
	switch err := d.touch(p); {
	case err == nil:
		return nil // present: refreshed
	case !errors.Is(err, ErrNotFound):
		return err
	}
	return d.writeFile(p, data)
}

// TouchBlob implements Store.
func (d *Dir) TouchBlob(_ context.Context, id string) error {
	p := d.BlobPath(id)
	if p == "" {
		return ErrBadID
	}
	return d.touch(p)
}

// touch sets the modification time of the regular file p to now:
// ErrNotFound if there is none. A name that is not a regular file is an
// error; it is never written through.
func (d *Dir) touch(p string) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("store: %s is not a regular file; ctxguard leaves it alone", p)
	}
	now := d.now()
	err = os.Chtimes(p, now, now)
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotFound // swept in between
	}
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// HasBlob implements Store.
func (d *Dir) HasBlob(_ context.Context, id string) bool {
	p := d.BlobPath(id)
	if p == "" {
		return false
	}
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular()
}

// OpenBlob implements Store. The reader is the file: it reads the blob
// even if it is swept meanwhile.
func (d *Dir) OpenBlob(_ context.Context, id string) (io.ReadCloser, error) {
	p := d.BlobPath(id)
	if p == "" {
		return nil, ErrBadID
	}
	return openRegular(p)
}

// openRegular opens p if it is a regular file, not a link: ErrNotFound
// if it is absent or something else.
func openRegular(p string) (*os.File, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.Mode().IsRegular()) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	// The file opened must be the one checked, not a link put in its
	// place since.
	if ofi, err := f.Stat(); err != nil || !os.SameFile(fi, ofi) {
		f.Close()
		return nil, ErrNotFound
	}
	return f, nil
}

func (d *Dir) recordPath(key string) string {
	sum := sha256.Sum256([]byte(key))
	return filepath.Join(d.root, "records", hex.EncodeToString(sum[:16]))
}

// Get implements Store. It refreshes the record's modification time (a
// record that cannot be refreshed is still returned).
func (d *Dir) Get(_ context.Context, key string) ([]byte, error) {
	return d.get(d.recordPath(key))
}

func (d *Dir) get(p string) ([]byte, error) {
	f, err := openRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	now := d.now()
	_ = os.Chtimes(p, now, now) // the file checked by openRegular, or gone
	return b, nil
}

// Put implements Store.
func (d *Dir) Put(_ context.Context, key string, val []byte) error {
	p := d.recordPath(key)
	if fi, err := os.Lstat(p); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("store: %s is not a regular file; ctxguard leaves it alone", p)
	}
	return d.writeFile(p, val)
}

// PutIfAbsent implements Store. The record is written to a temporary
// file that is hard-linked into place, which fails when the name exists:
// atomic for every process on the file system.
func (d *Dir) PutIfAbsent(_ context.Context, key string, val []byte) ([]byte, bool, error) {
	p := d.recordPath(key)
	for range 3 {
		if b, err := d.get(p); err == nil {
			return b, false, nil
		} else if !errors.Is(err, ErrNotFound) {
			return nil, false, err
		}
		if fi, err := os.Lstat(p); err == nil && !fi.Mode().IsRegular() {
			return nil, false, fmt.Errorf("store: %s is not a regular file; ctxguard leaves it alone", p)
		}
		tmp, err := d.writeTemp(p, val)
		if err != nil {
			return nil, false, err
		}
		err = os.Link(tmp, p)
		os.Remove(tmp)
		if err == nil {
			return bytes.Clone(val), true, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, false, fmt.Errorf("store: %w", err)
		}
		// Another process wrote it first: read theirs (unless swept
		// in between, then try again).
	}
	return nil, false, fmt.Errorf("store: record %s keeps appearing and vanishing", p)
}

// Ping implements Store: it checks that the records folder is still
// there.
func (d *Dir) Ping(context.Context) error {
	fi, err := os.Lstat(filepath.Join(d.root, "records"))
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("store: %s/records is not a folder", d.root)
	}
	return nil
}

// Sweep implements Store. It lists blobs/ and records/ only (each must
// still be a real directory), and removes, of their entries, the regular
// files with the names Dir gives them that are older than their TTL as of
// now, and its temporary files older than an hour by the wall clock (the
// file system, not Dir's clock, timed their creation). Errors are joined;
// the count is of what was removed regardless.
func (d *Dir) Sweep(_ context.Context, now time.Time) (int, error) {
	n := 0
	var errs []error
	for _, s := range []struct {
		name string
		ours func(string) bool
		life time.Duration
	}{
		{"blobs", isBlobName, blobLife(d.ttl)},
		{"records", isRecordName, d.ttl},
	} {
		k, err := sweepDir(filepath.Join(d.root, s.name), now, s.ours, s.life, d.ttl > 0)
		n += k
		if err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// sweepDir removes from dir the regular files named ours older than life
// (when expire), and the temporary files older than tempLife. It works
// through an os.Root opened on dir, checked to be the directory (not a
// link) that was looked at, so nothing it does can leave dir.
func sweepDir(dir string, now time.Time, ours func(string) bool, life time.Duration, expire bool) (int, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return 0, fmt.Errorf("store: sweep: %w", err)
	}
	if !fi.IsDir() {
		return 0, fmt.Errorf("store: sweep: %s is not a folder (a link or a file); not sweeping it", dir)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return 0, fmt.Errorf("store: sweep: %w", err)
	}
	defer r.Close()
	if rfi, err := r.Stat("."); err != nil || !os.SameFile(fi, rfi) {
		return 0, fmt.Errorf("store: sweep: %s changed while being opened; not sweeping it", dir)
	}
	f, err := r.Open(".")
	if err != nil {
		return 0, fmt.Errorf("store: sweep: %w", err)
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("store: sweep: %w", err)
	}
	n := 0
	for _, e := range ents {
		name := e.Name()
		at, max := now, life
		switch {
		case strings.HasPrefix(name, tempPrefix):
			at, max = time.Now(), tempLife
		case expire && ours(name):
		default:
			continue
		}
		if !e.Type().IsRegular() {
			continue
		}
		info, err := r.Lstat(name)
		if err != nil || !info.Mode().IsRegular() || at.Sub(info.ModTime()) <= max {
			continue
		}
		if r.Remove(name) == nil {
			n++
		}
	}
	return n, nil
}

// Close implements Store.
func (d *Dir) Close() error { return nil }

// writeFile writes data to p through a temporary file renamed into place,
// with mode 0600 and modification time now.
func (d *Dir) writeFile(p string, data []byte) error {
	tmp, err := d.writeTemp(p, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// writeTemp writes data to a new temporary file beside p, with mode 0600
// and modification time now, and returns its name.
func (d *Dir) writeTemp(p string, data []byte) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(p), tempPrefix+"*")
	if err != nil {
		return "", fmt.Errorf("store: %w", err)
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
		now := d.now()
		werr = os.Chtimes(tmp, now, now)
	}
	if werr != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("store: %w", werr)
	}
	return tmp, nil
}

var (
	_ Store = (*Dir)(nil)
	_ Files = (*Dir)(nil)
	_ Store = (*Memory)(nil)
)
