// Package shareddata finds the real agent sessions that tests and
// benchmarks replay: the folder shared/data beside the repository
// (../shared/data from the module root), or the folder the environment
// variable CTXGUARD_SHARED_DATA names.
//
// The shared data is a corpus of sessions that real agents wrote for real
// tasks, copied from public repositories: claude-code/ (Claude Code
// transcripts, M-Thisness/M-Claude, folder Archives/, CC0 1.0),
// claude-code-more/ (marot/spotter, test/fixtures/transcripts/, MIT),
// codex/ (Codex CLI rollouts, EdouardZemb/test-framework and
// SproutSeeds/coda, .codex/sessions/, MIT) and swe-agent/ (SWE-agent
// trajectories, SWE-agent/SWE-agent, MIT). To run the tests that need
// it, put those files in a folder with those subfolders beside the
// repository (../shared/data), or name the folder in CTXGUARD_SHARED_DATA.
//
// A clone without the corpus still runs every test that can run on less:
// one Claude Code and one Codex session of it are kept in the repository
// (testdata/sessions, see Sessions). A test that needs the whole corpus
// skips there, with one line saying what it needs (Dir).
// CTXGUARD_SHARED_DATA_REQUIRED=1 (RequiredEnv; CI sets it) makes missing
// data a failure instead, so that CI cannot pass by skipping what it was
// meant to check; CTXGUARD_SHARED_DATA=off skips every test that needs
// the corpus even where it is present.
package shareddata

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxguard/ctxguard/internal/module"
)

// Env is the environment variable that overrides where the data is, or
// turns the tests that need it off ("off").
const Env = "CTXGUARD_SHARED_DATA"

// RequiredEnv is the environment variable that, set to anything but ""
// or "0", makes a test whose shared data is missing fail instead of
// skip.
const RequiredEnv = "CTXGUARD_SHARED_DATA_REQUIRED"

// SubsetDir is where the repository keeps its subset of the shared data,
// relative to the module root.
const SubsetDir = "testdata/sessions"

// errMissing marks a shared data folder that is not there.
var errMissing = errors.New("not found")

// Root returns the shared data folder: $CTXGUARD_SHARED_DATA, else
// ../shared/data from the root of the module the working directory is in.
// It fails when the folder does not exist, saying where it looked.
func Root() (string, error) { return root(os.Getenv) }

func root(getenv func(string) string) (string, error) {
	dir := getenv(Env)
	if dir == "" {
		mod, err := module.Root(".")
		if err != nil {
			return "", err
		}
		dir = filepath.Join(mod, "..", "shared", "data")
	}
	dir = filepath.Clean(dir)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return dir, fmt.Errorf("shared data folder %s %w (set %s to its path, or to \"off\" to skip the tests that need it)", dir, errMissing, Env)
	}
	return dir, nil
}

// required reports whether missing data fails a test (RequiredEnv).
func required(getenv func(string) string) bool {
	v := getenv(RequiredEnv)
	return v != "" && v != "0" && v != "false"
}

// decision is what a test that needs the subfolder sub does: run on dir,
// skip with the reason, or fail with err.
type decision struct {
	dir  string
	skip string
	err  error
}

// decide finds the subfolder sub of the shared data and says what a test
// that needs it does: it runs when the folder is there and not empty;
// it skips when CTXGUARD_SHARED_DATA is "off", or when it is unset and
// ../shared/data is absent; it fails when the data is required
// (RequiredEnv), when CTXGUARD_SHARED_DATA names a folder that is not
// there, or when the shared data is there without sub.
func decide(sub string, getenv func(string) string) decision {
	env, req := getenv(Env), required(getenv)
	if env == "off" {
		if req {
			return decision{err: fmt.Errorf("shared data: %s=off and %s=%s contradict each other", Env, RequiredEnv, getenv(RequiredEnv))}
		}
		return decision{skip: fmt.Sprintf("%s=off: skipping a test that needs the shared data (%s)", Env, sub)}
	}
	root, err := root(getenv)
	if err != nil {
		if errors.Is(err, errMissing) && env == "" && !req {
			return decision{skip: fmt.Sprintf("needs the shared real sessions in %s (not in this clone; what they are and how to get them: go doc ./internal/shareddata); set %s=1 to fail instead of skipping",
				filepath.Join(root, sub), RequiredEnv)}
		}
		return decision{err: err}
	}
	dir := filepath.Join(root, sub)
	if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
		return decision{err: fmt.Errorf("shared data: %s is missing or empty (%v)", dir, err)}
	}
	return decision{dir: dir}
}

// Dir returns the subfolder sub of the shared data (e.g. "claude-code").
// Where the data is missing it skips tb with one line saying what the
// test needs and how to get it, or fails tb as decide says.
func Dir(tb testing.TB, sub string) string {
	tb.Helper()
	d := decide(sub, os.Getenv)
	switch {
	case d.err != nil:
		tb.Fatal(d.err)
	case d.skip != "":
		tb.Skip(d.skip)
	}
	return d.dir
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

// Sessions returns the folder of the sessions sub ("claude-code",
// "codex") for a test that can run on a few of them: the shared data's
// subfolder where the shared data is present (full is true), else the
// repository's subset, testdata/sessions/sub (full is false), so the
// test runs on every clone. Where the shared data is required
// (RequiredEnv) and missing, it fails tb instead; with
// CTXGUARD_SHARED_DATA=off it returns the subset.
func Sessions(tb testing.TB, sub string) (dir string, full bool) {
	tb.Helper()
	d := decide(sub, os.Getenv)
	switch {
	case d.err != nil:
		tb.Fatal(d.err)
	case d.skip == "":
		return d.dir, true
	}
	dir, err := Subset(sub)
	if err != nil {
		tb.Fatal(err)
	}
	return dir, false
}

// Subset returns the folder of the repository's subset of the sessions
// sub (testdata/sessions/sub), failing when it is missing or empty.
func Subset(sub string) (string, error) {
	mod, err := module.Root(".")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(mod, filepath.FromSlash(SubsetDir), sub)
	if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
		return "", fmt.Errorf("shared data: the repository's subset %s is missing or empty (%v)", dir, err)
	}
	return dir, nil
}

// SubsetFile returns the file name of the repository's subset of the
// sessions sub, failing tb when it is missing: for a test that replays
// one particular session on every clone.
func SubsetFile(tb testing.TB, sub, name string) string {
	tb.Helper()
	dir, err := Subset(sub)
	if err != nil {
		tb.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("shared data: %v", err)
	}
	return p
}
