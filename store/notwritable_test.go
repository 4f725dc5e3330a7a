package store_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/store"
)

// TestOpenDirNotWritable: a data directory that cannot be created or
// written is reported as ErrNotWritable, wrapping the OS error, so the
// caller can serve without persistence; nothing is changed.
func TestOpenDirNotWritable(t *testing.T) {
	t.Run("parent is a file (ENOTDIR)", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, root := range []string{filepath.Join(file, "data"), filepath.Join(file, "a", "b")} {
			_, err := store.OpenDir(root, time.Hour)
			if !errors.Is(err, store.ErrNotWritable) || !errors.Is(err, syscall.ENOTDIR) || errors.Is(err, store.ErrNotOurs) {
				t.Errorf("OpenDir(%s): err %v; want ErrNotWritable wrapping ENOTDIR", root, err)
			}
			if !strings.Contains(err.Error(), root) {
				t.Errorf("err %q does not name the folder", err)
			}
		}
		if b, _ := os.ReadFile(file); string(b) != "mine" {
			t.Error("the file changed")
		}
	})

	// Permission denied. Root ignores permission bits, so when the tests
	// run as root the checks run in a copy of the test binary as nobody.
	base := t.TempDir()
	os.Chmod(base, 0o755)
	os.Chmod(filepath.Dir(base), 0o755)
	mk := func(p string, mode os.FileMode) string {
		p = filepath.Join(base, p)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	readOnly := mk("ro", 0o555)
	emptyRO := mk("empty-ro", 0o555)
	marked, err := store.OpenDir(filepath.Join(base, "marked"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(marked.Root(), 0o755)
	os.Chmod(filepath.Join(marked.Root(), store.Marker), 0o644)
	os.Chmod(marked.BlobDir(), 0o755) // OpenDir would tighten it, and cannot: not the owner
	notOwned, err := store.OpenDir(filepath.Join(base, "marked-private"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(notOwned.Root(), 0o755) // blobs/ stays 0700, the owner's
	os.Chmod(filepath.Join(notOwned.Root(), store.Marker), 0o644)
	cases := map[string]string{
		"absent under a read-only folder":  filepath.Join(readOnly, "data"),
		"empty, read-only":                 emptyRO,
		"marked, blobs/ of another user":   marked.Root(),
		"marked, blobs/ not writable here": notOwned.Root(),
	}
	var paths []string
	for _, p := range cases {
		paths = append(paths, p)
	}
	results := openAsOtherUser(t, base, paths)
	t.Logf("as another user: %q", results)
	for name, p := range cases {
		if got := results[p]; !strings.HasPrefix(got, "not writable: ") || !strings.Contains(got, "permission denied") && !strings.Contains(got, "operation not permitted") {
			t.Errorf("%s: OpenDir as another user: %q; want ErrNotWritable (permission)", name, got)
		}
	}
	if ents, _ := os.ReadDir(emptyRO); len(ents) != 0 {
		t.Errorf("the read-only folder got %d entries", len(ents))
	}
}

// helperEnv names the paths a re-executed test binary opens.
const helperEnv = "CTXGUARD_STORE_OPEN_AS_USER"

// openAsOtherUser opens each path with OpenDir as a user other than the
// owner of the fixtures, and returns, by path, "ok", "not writable: "
// + the error, or "error: " + the error. tmp is a folder any user may
// traverse.
func openAsOtherUser(t *testing.T, tmp string, paths []string) map[string]string {
	t.Helper()
	if os.Geteuid() != 0 {
		out := map[string]string{}
		for _, p := range paths {
			out[p] = openResult(p)
		}
		return out
	}
	// A copy of the test binary that nobody may run.
	bin := filepath.Join(tmp, "store.test")
	if err := copyFile(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(bin)
	cmd := exec.Command(bin, "-test.run=^TestHelperOpenAsUser$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+strings.Join(paths, "\n"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	b, err := cmd.CombinedOutput()
	if err != nil && strings.Contains(err.Error(), "operation not permitted") {
		t.Skipf("cannot run as another user here: %v", err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if p, res, ok := strings.Cut(line, "\t"); ok {
			out[p] = res
		}
	}
	if len(out) != len(paths) {
		t.Fatalf("helper: %v\n%s", err, b)
	}
	return out
}

func openResult(p string) string {
	_, err := store.OpenDir(p, time.Hour)
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, store.ErrNotWritable):
		return "not writable: " + err.Error()
	}
	return "error: " + err.Error()
}

// TestHelperOpenAsUser is run by openAsOtherUser in a child process.
func TestHelperOpenAsUser(t *testing.T) {
	paths := os.Getenv(helperEnv)
	if paths == "" {
		t.Skip("run by TestOpenDirNotWritable")
	}
	for _, p := range strings.Split(paths, "\n") {
		os.Stdout.WriteString(p + "\t" + strings.ReplaceAll(openResult(p), "\n", " ") + "\n")
	}
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
