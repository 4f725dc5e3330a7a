package shareddata

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRootFromModule(t *testing.T) {
	t.Setenv(Env, "")
	root, err := Root()
	if err != nil {
		t.Fatal(err) // the shared data is part of this project's checkout
	}
	if !strings.HasSuffix(root, filepath.Join("shared", "data")) {
		t.Errorf("Root() = %q", root)
	}
	if d := Dir(t, "claude-code"); !strings.HasPrefix(d, root) {
		t.Errorf("Dir = %q", d)
	}
}

func TestRootFromEnv(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "x"), 0o700)
	os.WriteFile(filepath.Join(dir, "x", "f"), []byte("1"), 0o600)
	t.Setenv(Env, dir)
	if got := File(t, "x", "f"); got != filepath.Join(dir, "x", "f") {
		t.Errorf("File = %q", got)
	}
	t.Setenv(Env, filepath.Join(dir, "missing"))
	if _, err := Root(); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing folder: %v", err)
	}
}
