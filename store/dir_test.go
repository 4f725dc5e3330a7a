package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ctxguard/ctxguard/store"
)

// longAgo is the modification time of the old files in fixtures: years
// before any TTL.
var longAgo = time.Date(2019, 5, 1, 0, 0, 0, 0, time.UTC)

// tree builds files under root from a spec: "path" -> content; a path
// ending in "/" is a directory; content "-> target" makes a symbolic
// link. Every entry gets mode 0644 (0755 for directories) and the
// modification time longAgo.
func tree(t *testing.T, root string, spec map[string]string) {
	t.Helper()
	for p, content := range spec {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(p, "/"):
			err = os.MkdirAll(full, 0o755)
		case strings.HasPrefix(content, "-> "):
			err = os.Symlink(strings.TrimPrefix(content, "-> "), full)
		default:
			err = os.WriteFile(full, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Times last (writing into a folder changes its time).
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && p != root && e.Type()&fs.ModeSymlink == 0 {
			os.Chtimes(p, longAgo, longAgo)
		}
		return nil
	})
}

// snapshot describes every entry under root (not following links): type,
// mode, modification time, and a hash of a file's content or a link's
// target.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		desc := fmt.Sprintf("%v %s", fi.Mode(), fi.ModTime().UTC().Format(time.RFC3339))
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += fmt.Sprintf(" %x", sha256.Sum256(b))
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		}
		if rel == "." {
			desc = fmt.Sprintf("%v", fi.Mode()) // its time changes when anything is added
		}
		out[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func blobName(s string) string { return store.ID([]byte(s)) + ".txt" }

const recordName = "0123456789abcdef0123456789abcdef"

// TestOpenDirRefuses: a folder that is not ctxguard's is refused with an
// error naming it and saying why, and nothing in it changes: not a file,
// not a mode, not a time. (Before, OpenDir made such a folder 0700 and
// the sweep deleted every old file in it, recursively.)
func TestOpenDirRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec map[string]string
		mode fs.FileMode // of the root
		why  string      // in the error
	}{
		{"home folder", map[string]string{
			"notes.txt": "my notes", "Documents/": "", "Documents/thesis.tex": "years of work",
			".bashrc": "alias x=y", "photos/2019/a.jpg": "jpeg",
		}, 0o755, `holds files that are not ctxguard's (no .ctxguard-store marker; for example`},
		{"one foreign file", map[string]string{"x": ""}, 0o700, `for example "x"`},
		{"foreign file in blobs", map[string]string{"blobs/" + blobName("a"): "a", "blobs/notes.md": "mine"}, 0o700, `"blobs/notes.md"`},
		{"foreign folder in records", map[string]string{"records/" + recordName: "r", "records/sub/": ""}, 0o700, `"records/sub"`},
		{"blob-like folder in blobs", map[string]string{"blobs/" + blobName("a") + "/x": "x"}, 0o700, `"blobs/` + blobName("a") + `"`},
		{"blobs is a link", map[string]string{"real/" + blobName("a"): "a", "blobs": "-> real"}, 0o700, `for example "`},
		{"blob is a link", map[string]string{"blobs/" + blobName("a"): "-> /etc/passwd"}, 0o700, `"blobs/` + blobName("a") + `"`},
		{"upper-case blob name", map[string]string{"blobs/ABCDEFGHIJKLM.txt": "a"}, 0o700, `ABCDEFGHIJKLM.txt`},
		{"other marker", map[string]string{".ctxguard-store": "something else\n"}, 0o755, "is not a ctxguard store marker"},
		{"marker is a link", map[string]string{".ctxguard-store": "-> /etc/hostname"}, 0o755, "is not a regular file"},
		{"newer format", map[string]string{".ctxguard-store": "ctxguard store\nformat 2\n", "blobs/" + blobName("a"): "a"}, 0o700,
			"holds a store of format 2, written by a newer ctxguard (this one reads format 1)"},
		{"marked, blobs is a link", map[string]string{".ctxguard-store": "ctxguard store\nformat 1\n", "elsewhere/x": "x", "blobs": "-> elsewhere"}, 0o700,
			"is not a folder (a link or a file)"},
		{"marked, records is a file", map[string]string{".ctxguard-store": "ctxguard store\nformat 1\n", "records": "x"}, 0o700,
			"is not a folder (a link or a file)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "dir")
			tree(t, root, tc.spec)
			if err := os.Chmod(root, tc.mode); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, root)
			d, err := store.OpenDir(root, time.Hour)
			if err == nil {
				d.Sweep(context.Background(), time.Now())
				t.Fatalf("OpenDir accepted it")
			}
			if !errors.Is(err, store.ErrNotOurs) || errors.Is(err, store.ErrNotWritable) {
				t.Errorf("err %v: want ErrNotOurs, not ErrNotWritable", err)
			}
			if !strings.Contains(err.Error(), root) || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("err %q: want the folder %s and %q", err, root, tc.why)
			}
			if diff := cmp.Diff(before, snapshot(t, root)); diff != "" {
				t.Errorf("OpenDir changed the folder (-before +after):\n%s", diff)
			}
		})
	}
	t.Run("a file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "file")
		os.WriteFile(p, []byte("mine"), 0o644)
		if _, err := store.OpenDir(p, time.Hour); !errors.Is(err, store.ErrNotOurs) || !strings.Contains(err.Error(), "is not a folder") {
			t.Errorf("err %v", err)
		}
		if b, _ := os.ReadFile(p); string(b) != "mine" {
			t.Error("the file changed")
		}
	})
}

// TestOpenDirAdopts: an absent folder is created private; an empty one,
// or one holding only what earlier versions wrote, is adopted without
// changing its mode (with a warning when others may access it); a marked
// one is opened. Adopted content stays, and the store serves it.
func TestOpenDirAdopts(t *testing.T) {
	legacyBlob := []byte("kept by an earlier version")
	legacyID := store.ID(legacyBlob)
	for _, tc := range []struct {
		name     string
		path     string // under the temp folder
		spec     map[string]string
		mode     fs.FileMode // of the root, when the spec makes it
		wantMode fs.FileMode // of the root afterwards
		warn     bool
		kept     []string // entries that must still be there
	}{
		{"absent", "a/b/data", nil, 0, 0o700, false, nil},
		{"empty, private", "data", map[string]string{"./": ""}, 0o700, 0o700, false, nil},
		{"empty, open to others", "data", map[string]string{"./": ""}, 0o755, 0o755, true, nil},
		{"empty but for a half-written marker", "data", map[string]string{".ctxguard-store.tmp-123": ""}, 0o750, 0o750, true, nil},
		{"legacy layout", "data", map[string]string{
			"blobs/" + legacyID + ".txt": string(legacyBlob), "blobs/.tmp-77": "half", "records/" + recordName: "{}",
		}, 0o700, 0o700, false, []string{"blobs/" + legacyID + ".txt", "records/" + recordName}},
		{"legacy, empty folders", "data", map[string]string{"blobs/": "", "records/": ""}, 0o700, 0o700, false, nil},
		{"marked, with the user's own files beside", "data", map[string]string{
			".ctxguard-store": "ctxguard store\nformat 1\n", "README": "mine", "blobs/": "", "records/" + recordName: "{}",
		}, 0o750, 0o750, true, []string{"README", "records/" + recordName}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, tc.path)
			if tc.spec != nil {
				tree(t, root, tc.spec)
				os.Chmod(root, tc.mode)
			}
			before := snapshot(t, base)
			d, err := store.OpenDir(root, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(root)
			if err != nil || fi.Mode().Perm() != tc.wantMode {
				t.Errorf("root mode %v, err %v; want %v", fi.Mode().Perm(), err, tc.wantMode)
			}
			if got := len(d.Warnings()) > 0; got != tc.warn {
				t.Errorf("warnings %q, want some: %v", d.Warnings(), tc.warn)
			} else if tc.warn && !strings.Contains(d.Warnings()[0], root) {
				t.Errorf("warning %q does not name the folder", d.Warnings()[0])
			}
			if b, err := os.ReadFile(filepath.Join(root, store.Marker)); string(b) != "ctxguard store\nformat 1\n" {
				t.Errorf("marker %q, %v", b, err)
			}
			for _, sub := range []string{"blobs", "records"} {
				if fi, err := os.Lstat(filepath.Join(root, sub)); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
					t.Errorf("%s: %v, err %v; want a 0700 folder", sub, fi.Mode(), err)
				}
			}
			after := snapshot(t, base)
			for _, k := range tc.kept {
				k = filepath.Join(tc.path, k)
				if before[k] != after[k] || after[k] == "" {
					t.Errorf("%s changed: %q -> %q", k, before[k], after[k])
				}
			}
			if tc.name == "legacy layout" {
				if !d.HasBlob(context.Background(), legacyID) {
					t.Error("the legacy blob is not served")
				}
				if _, err := os.Lstat(filepath.Join(root, "blobs/.tmp-77")); err != nil {
					t.Error("OpenDir removed a temporary file; only Sweep may, when it is old")
				}
			}
			// Opening again finds it ours, the same.
			if _, err := store.OpenDir(root, time.Hour); err != nil {
				t.Errorf("second open: %v", err)
			}
		})
	}
}

// TestSweepOnlyOurs: the sweep of a marked store removes our old blobs,
// records and temporary files, and nothing else: not foreign files in
// our folders, not files in subfolders, not what links point at, not the
// user's files beside our folders.
func TestSweepOnlyOurs(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "data")
	outside := filepath.Join(base, "outside")
	tree(t, outside, map[string]string{"precious.txt": "mine", "sub/" + blobName("x"): "mine too"})
	if _, err := store.OpenDir(root, time.Hour); err != nil {
		t.Fatal(err)
	}
	tree(t, root, map[string]string{
		"README":                                 "the user's, beside our folders",
		"blobs/" + blobName("old"):               "ours, old",
		"blobs/" + blobName("new"):               "ours, fresh",
		"blobs/.tmp-crashed":                     "ours, a crashed write",
		"blobs/.tmp-in-flight":                   "ours, being written",
		"blobs/notes.txt":                        "foreign",
		"blobs/ABCDEFGHIJKLM.txt":                "foreign",
		"blobs/" + blobName("dir"):               "-> ../../outside/precious.txt",
		"blobs/" + blobName("d2"):                "-> ../../outside/sub",
		"blobs/sub/" + blobName("deep"):          "foreign, in a subfolder",
		"blobs/" + blobName("folder") + "/":      "",
		"records/" + recordName:                  "ours, old",
		"records/README":                         "foreign",
		"records/" + strings.ToUpper(recordName): "foreign",
	})
	now := time.Now()
	for _, p := range []string{"blobs/" + blobName("new"), "blobs/.tmp-in-flight"} {
		os.Chtimes(filepath.Join(root, p), now, now)
	}
	before := snapshot(t, base)
	d, err := store.OpenDir(root, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	n, err := d.Sweep(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, base)
	var gone []string
	for k := range before {
		if _, ok := after[k]; !ok {
			gone = append(gone, k)
		}
	}
	want := []string{"data/blobs/" + blobName("old"), "data/blobs/.tmp-crashed", "data/records/" + recordName}
	if diff := cmp.Diff(want, gone, cmpSorted); diff != "" || n != len(want) {
		t.Errorf("Sweep removed %d (-want +got):\n%s", n, diff)
	}
	for k, v := range before {
		if a, ok := after[k]; ok && a != v && !strings.HasPrefix(k, "data/blobs") && k != "data/records" {
			t.Errorf("%s changed: %s -> %s", k, v, a)
		}
	}
	if after["outside/precious.txt"] != before["outside/precious.txt"] {
		t.Error("the sweep touched what a link points at")
	}

	// blobs/ replaced by a link after the store was opened: the sweep
	// does not follow it.
	os.Rename(filepath.Join(root, "blobs"), filepath.Join(base, "moved"))
	os.Symlink(outside+"/sub", filepath.Join(root, "blobs"))
	before = snapshot(t, outside)
	if _, err := d.Sweep(context.Background(), now.Add(100*24*time.Hour)); err == nil || !strings.Contains(err.Error(), "not sweeping it") {
		t.Errorf("Sweep through a link: err %v", err)
	}
	if diff := cmp.Diff(before, snapshot(t, outside)); diff != "" {
		t.Errorf("Sweep through a link changed its target:\n%s", diff)
	}
}

var cmpSorted = cmpopts.SortSlices(func(a, b string) bool { return a < b })

// TestDirFiles: blobs and records are private files, written whole (no
// temporary file stays), and a blob or record name that a link holds is
// neither read nor written through.
func TestDirFiles(t *testing.T) {
	d, err := store.OpenDir(filepath.Join(t.TempDir(), "data"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("removed tool output\n")
	id := store.ID(data)
	for range 2 {
		if err := d.PutBlob(context.Background(), id, data); err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Stat(d.BlobPath(id)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("blob mode %v, err %v; want 0600", fi.Mode().Perm(), err)
	}
	if ents, _ := os.ReadDir(d.BlobDir()); len(ents) != 1 {
		t.Errorf("blob folder holds %d entries, want 1", len(ents))
	}
	if d.BlobPath(id) != filepath.Join(d.Root(), "blobs", id+".txt") {
		t.Errorf("BlobPath %s", d.BlobPath(id))
	}

	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("not ctxguard's"), 0o644)
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	os.Chtimes(secret, old, old)
	linked := store.ID([]byte("linked"))
	os.Symlink(secret, d.BlobPath(linked))
	if d.HasBlob(context.Background(), linked) {
		t.Error("HasBlob through a link")
	}
	if _, err := d.OpenBlob(context.Background(), linked); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("OpenBlob through a link: err %v, want ErrNotFound", err)
	}
	if err := d.TouchBlob(context.Background(), linked); err == nil {
		t.Error("TouchBlob through a link succeeded")
	}
	if err := d.PutBlob(context.Background(), linked, []byte("linked")); err == nil {
		t.Error("PutBlob over a link succeeded")
	}
	if fi, _ := os.Stat(secret); !fi.ModTime().Equal(old) {
		t.Errorf("the link's target was touched: %v", fi.ModTime())
	}
	if b, _ := os.ReadFile(secret); string(b) != "not ctxguard's" {
		t.Errorf("the link's target was written: %q", b)
	}
}
