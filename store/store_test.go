package store

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func TestDir(t *testing.T) {
	root := filepath.Join(t.TempDir(), "data")
	d, err := OpenDir(root, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("removed tool output\n")
	id := ID(data)
	if err := d.PutBlob(id, data); err != nil {
		t.Fatal(err)
	}
	if !d.HasBlob(id) {
		t.Fatal("HasBlob false after PutBlob")
	}
	rc, err := d.OpenBlob(id)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != string(data) {
		t.Fatalf("blob = %q", got)
	}
	for _, p := range []string{root, filepath.Join(root, "blobs"), d.BlobDir()} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v, err %v; want 0700", p, fi.Mode().Perm(), err)
		}
	}
	if fi, err := os.Stat(d.BlobPath(id)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("blob mode %v, err %v; want 0600", fi.Mode().Perm(), err)
	}
	// Idempotent, and no temporary files left behind.
	if err := d.PutBlob(id, data); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Dir(d.BlobPath(id)))
	if len(ents) != 1 {
		t.Errorf("blob dir holds %d entries, want 1", len(ents))
	}
	for _, bad := range []string{"", "../../etc/passwd", id[:IDLen-1], id + "a", "G" + id[1:], "0" + id[1:], "../" + id[3:]} {
		if _, err := d.OpenBlob(bad); !errors.Is(err, ErrBadID) {
			t.Errorf("OpenBlob(%q) err = %v, want ErrBadID", bad, err)
		}
		if d.PutBlob(bad, data) == nil {
			t.Errorf("PutBlob(%q) accepted", bad)
		}
	}
	if _, err := d.OpenBlob(ID([]byte("other"))); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing blob err = %v", err)
	}

	if err := d.Put("calibration/m", []byte(`{"f":1.1}`)); err != nil {
		t.Fatal(err)
	}
	if v, err := d.Get("calibration/m"); err != nil || string(v) != `{"f":1.1}` {
		t.Errorf("Get = %q, %v", v, err)
	}
	if _, err := d.Get("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get missing err = %v", err)
	}

	// Sweep removes what is older than the TTL and keeps the rest.
	fresh := []byte("fresh")
	if err := d.PutBlob(ID(fresh), fresh); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(d.BlobPath(id), old, old)
	n, err := d.Sweep(time.Now())
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	if d.HasBlob(id) || !d.HasBlob(ID(fresh)) {
		t.Error("Sweep removed the wrong blob")
	}
	// Putting a blob again refreshes its age.
	os.Chtimes(d.BlobPath(ID(fresh)), old, old)
	d.PutBlob(ID(fresh), fresh)
	if n, _ := d.Sweep(time.Now()); n != 0 {
		t.Error("refreshed blob was swept")
	}
}

func TestDirConcurrent(t *testing.T) {
	d, err := OpenDir(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<16)
	for i := range data {
		data[i] = byte(i)
	}
	id := ID(data)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.PutBlob(id, data); err != nil {
				t.Error(err)
			}
			if rc, err := d.OpenBlob(id); err == nil {
				b, _ := io.ReadAll(rc)
				rc.Close()
				if len(b) != len(data) {
					t.Errorf("reader saw %d bytes", len(b))
				}
			}
		}()
	}
	wg.Wait()
}

func TestMemory(t *testing.T) {
	m := NewMemory()
	data := []byte("x")
	if err := m.PutBlob(ID(data), data); err != nil {
		t.Fatal(err)
	}
	data[0] = 'y' // the store must not retain the caller's slice
	rc, _ := m.OpenBlob(ID([]byte("x")))
	b, _ := io.ReadAll(rc)
	if string(b) != "x" || m.Len() != 1 {
		t.Errorf("blob %q len %d", b, m.Len())
	}
}

func TestBlobsKeep(t *testing.T) {
	m := NewMemory()
	b := &Blobs{Store: m, BaseURL: "http://127.0.0.1:8787"}
	r1, err := b.Keep([]byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := b.Keep([]byte("payload"))
	if r1 != r2 || r1.ID != ID([]byte("payload")) || m.Len() != 1 || r1.Chars != 7 {
		t.Fatalf("refs %v %v, blobs %d", r1, r2, m.Len())
	}
	if r1.URL != "http://127.0.0.1:8787/ctxguard/v1/blobs/"+r1.ID || r1.Where() != r1.URL {
		t.Errorf("URL %q Where %q", r1.URL, r1.Where())
	}
	// A second process (fresh Blobs) computes the same reference.
	b2 := &Blobs{Store: NewMemory(), BaseURL: "http://127.0.0.1:8787"}
	if r3, _ := b2.Keep([]byte("payload")); r3 != r1 {
		t.Errorf("fresh Blobs gave %v, want %v", r3, r1)
	}
	d, _ := OpenDir(t.TempDir(), 0)
	r4, _ := (&Blobs{Store: d}).Keep([]byte("payload"))
	if r4.Path == "" || r4.Where() != r4.Path || !d.HasBlob(r4.ID) {
		t.Errorf("dir ref %+v", r4)
	}
	// KeepFrom decodes only what it has not seen.
	calls := 0
	dec := func(raw []byte) ([]byte, error) { calls++; return append([]byte("é"), raw...), nil }
	k1, _ := b.KeepFrom([]byte("xy"), dec)
	k2, _ := b.KeepFrom([]byte("xy"), dec)
	if calls != 1 || k1 != k2 || k1.ID != ID([]byte("éxy")) || k1.Chars != 3 {
		t.Errorf("KeepFrom: %d decodes, %+v %+v", calls, k1, k2)
	}
}
