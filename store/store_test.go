package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"
)

func TestBlobsKeep(t *testing.T) {
	m := NewMemory()
	b := &Blobs{Store: m, BaseURL: "http://127.0.0.1:8787"}
	r1, err := b.Keep(context.Background(), []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := b.Keep(context.Background(), []byte("payload"))
	if r1 != r2 || r1.ID != ID([]byte("payload")) || m.Len() != 1 || r1.Chars != 7 {
		t.Fatalf("refs %v %v, blobs %d", r1, r2, m.Len())
	}
	if r1.URL != "http://127.0.0.1:8787/ctxguard/v1/blobs/"+r1.ID || r1.Where() != r1.URL {
		t.Errorf("URL %q Where %q", r1.URL, r1.Where())
	}
	// A second process (fresh Blobs) computes the same reference.
	b2 := &Blobs{Store: NewMemory(), BaseURL: "http://127.0.0.1:8787"}
	if r3, _ := b2.Keep(context.Background(), []byte("payload")); r3 != r1 {
		t.Errorf("fresh Blobs gave %v, want %v", r3, r1)
	}
	d, _ := OpenDir(t.TempDir(), 0)
	r4, _ := (&Blobs{Store: d}).Keep(context.Background(), []byte("payload"))
	if r4.Path == "" || r4.Where() != r4.Path || !d.HasBlob(context.Background(), r4.ID) {
		t.Errorf("dir ref %+v", r4)
	}
	// KeepFrom decodes only what it has not seen.
	calls := 0
	dec := func(raw []byte) ([]byte, error) { calls++; return append([]byte("é"), raw...), nil }
	k1, _ := b.KeepFrom(context.Background(), []byte("xy"), dec)
	k2, _ := b.KeepFrom(context.Background(), []byte("xy"), dec)
	if calls != 1 || k1 != k2 || k1.ID != ID([]byte("éxy")) || k1.Chars != 3 {
		t.Errorf("KeepFrom: %d decodes, %+v %+v", calls, k1, k2)
	}
}

// TestCannotWrite: the OS errors OpenDir reports as ErrNotWritable, and
// some it does not. EROFS, ENOSPC and EDQUOT cannot be produced in a test
// without mounting a file system; EACCES, EPERM and ENOTDIR are also
// produced for real by TestOpenDirNotWritable.
func TestCannotWrite(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{syscall.EACCES, true},
		{syscall.EPERM, true},
		{syscall.EROFS, true},
		{syscall.ENOSPC, true},
		{syscall.EDQUOT, true},
		{syscall.ENOTDIR, true},
		{fs.ErrPermission, true},
		{syscall.EIO, false},
		{syscall.ELOOP, false},
		{syscall.EINVAL, false},
		{fs.ErrNotExist, false},
		{errors.New("other"), false},
	} {
		t.Run(fmt.Sprint(tc.err), func(t *testing.T) {
			err := fmt.Errorf("wrapped: %w", &os.PathError{Op: "mkdir", Path: "/data", Err: tc.err})
			if got := cannotWrite(err); got != tc.want {
				t.Errorf("cannotWrite = %v, want %v", got, tc.want)
			}
			w := notWritable("/data", err)
			if errors.Is(w, ErrNotWritable) != tc.want || !errors.Is(w, tc.err) {
				t.Errorf("notWritable(%v) = %v: matches ErrNotWritable %v (want %v), wraps the OS error %v",
					tc.err, w, errors.Is(w, ErrNotWritable), tc.want, errors.Is(w, tc.err))
			}
		})
	}
}
