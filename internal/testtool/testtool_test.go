package testtool

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRequired(t *testing.T) {
	for _, tc := range []struct {
		ci, env string
		want    bool
	}{
		{"", "", false}, {"0", "", false}, {"false", "", false},
		{"true", "", true}, {"1", "", true}, {"", "1", true},
	} {
		t.Setenv("CI", tc.ci)
		t.Setenv("CTXGUARD_TESTTOOL", tc.env)
		if got := Required("CTXGUARD_TESTTOOL"); got != tc.want {
			t.Errorf("CI=%q CTXGUARD_TESTTOOL=%q: Required %v, want %v", tc.ci, tc.env, got, tc.want)
		}
	}
}

// TestFind: the first name on PATH is found; a missing program skips.
func TestFind(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "second")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	t.Setenv("CI", "")
	t.Setenv("CTXGUARD_TESTTOOL", "")
	if got := Find(t, "CTXGUARD_TESTTOOL", "none", "first", "second"); got != prog {
		t.Errorf("Find = %q, want %q", got, prog)
	}
	skipped := false
	t.Run("missing", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Find(t, "CTXGUARD_TESTTOOL", "none", "absent")
	})
	if !skipped {
		t.Error("a missing program did not skip the test")
	}
}
