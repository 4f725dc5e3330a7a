// Package shareddata finds the real agent sessions that tests and
// benchmarks replay: the folder shared/data beside the repository
// (../shared/data from the module root), or the folder the environment
// variable CTXGUARD_SHARED_DATA names.
//
// A test that needs the data fails when it is missing: CI must not pass
// by skipping what it was meant to check. CTXGUARD_SHARED_DATA=off skips
// those tests instead, for a checkout without the data.
package shareddata

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxguard/ctxguard/internal/module"
)

// Env is the environment variable that overrides where the data is, or
// turns the tests that need it off.
const Env = "CTXGUARD_SHARED_DATA"

// Root returns the shared data folder: $CTXGUARD_SHARED_DATA, else
// ../shared/data from the root of the module the working directory is in.
// It fails when the folder does not exist, saying where it looked.
func Root() (string, error) {
	dir := os.Getenv(Env)
	if dir == "" {
		mod, err := module.Root(".")
		if err != nil {
			return "", err
		}
		dir = filepath.Join(mod, "..", "shared", "data")
	}
	dir = filepath.Clean(dir)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("shared data folder %s not found (set %s to its path, or to \"off\" to skip the tests that need it)", dir, Env)
	}
	return dir, nil
}

// Dir returns the subfolder sub of the shared data (e.g. "claude-code"),
// failing tb when it is missing or empty, or skipping tb when
// CTXGUARD_SHARED_DATA is "off".
func Dir(tb testing.TB, sub string) string {
	tb.Helper()
	if os.Getenv(Env) == "off" {
		tb.Skipf("%s=off: skipping a test that needs the shared data", Env)
	}
	root, err := Root()
	if err != nil {
		tb.Fatal(err)
	}
	dir := filepath.Join(root, sub)
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) == 0 {
		tb.Fatalf("shared data: %s is missing or empty (%v)", dir, err)
	}
	return dir
}

// File returns the file name in the subfolder sub of the shared data,
// failing (or skipping) tb as Dir does, and failing when the file is
// missing.
func File(tb testing.TB, sub, name string) string {
	tb.Helper()
	p := filepath.Join(Dir(tb, sub), name)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("shared data: %v", err)
	}
	return p
}
