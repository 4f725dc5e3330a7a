package shareddata

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/internal/module"
)

// tree makes a module root (repo, with ctxguard's go.mod) in a scratch
// folder, with the given files (paths relative to the scratch folder),
// and makes repo the working directory. It returns the scratch folder.
func tree(t *testing.T, files ...string) string {
	t.Helper()
	top := t.TempDir()
	files = append(files, "repo/go.mod")
	for _, f := range files {
		p := filepath.Join(top, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		text := "1"
		if f == "repo/go.mod" {
			text = "module " + module.Path + "\n\ngo 1.26\n"
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(filepath.Join(top, "repo"))
	return top
}

// TestRootFromModule: without CTXGUARD_SHARED_DATA the data is
// ../shared/data from the module root. The test builds its own module and
// data, so it neither needs the real data nor overrides the caller's
// CTXGUARD_SHARED_DATA for anything but its scratch tree.
func TestRootFromModule(t *testing.T) {
	top := tree(t, "shared/data/claude-code/a.jsonl", "repo/testdata/sessions/claude-code/b.jsonl")
	t.Setenv(Env, "")
	t.Setenv(RequiredEnv, "")
	want := filepath.Join(top, "shared", "data")
	if root, err := Root(); err != nil || root != want {
		t.Errorf("Root() = %q, %v; want %q", root, err, want)
	}
	if d := Dir(t, "claude-code"); d != filepath.Join(want, "claude-code") {
		t.Errorf("Dir = %q", d)
	}
	if d, full := Sessions(t, "claude-code"); !full || d != filepath.Join(want, "claude-code") {
		t.Errorf("Sessions = %q, %v; want the shared folder", d, full)
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

// TestDecide: what a test that needs the shared data does, for every
// combination of the data's presence and the two variables.
func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name     string
		files    []string
		env, req string
		run      bool   // runs on the shared folder
		skip     string // a part of the skip line
		err      string // a part of the failure
	}{
		{name: "present", files: []string{"shared/data/codex/r.jsonl"}, run: true},
		{name: "present, required", files: []string{"shared/data/codex/r.jsonl"}, req: "1", run: true},
		{name: "absent: skip, saying what and how", skip: "needs the shared real sessions in "},
		{name: "absent, required", req: "1", err: "not found"},
		{name: "absent, required=0 is not required", req: "0", skip: "set " + RequiredEnv + "=1 to fail instead"},
		{name: "off", files: []string{"shared/data/codex/r.jsonl"}, env: "off", skip: Env + "=off"},
		{name: "off and required", env: "off", req: "1", err: "contradict"},
		{name: "named folder missing", env: "/nonexistent/shared", err: "/nonexistent/shared not found"},
		{name: "present without the subfolder", files: []string{"shared/data/claude-code/a.jsonl"}, err: "codex is missing or empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := tree(t, tc.files...)
			env := map[string]string{Env: tc.env, RequiredEnv: tc.req}
			d := decide("codex", func(k string) string { return env[k] })
			switch {
			case tc.run:
				if want := filepath.Join(top, "shared", "data", "codex"); d.dir != want || d.skip != "" || d.err != nil {
					t.Errorf("got %+v, want to run on %s", d, want)
				}
			case tc.skip != "":
				if d.err != nil || !strings.Contains(d.skip, tc.skip) || strings.Contains(d.skip, "\n") {
					t.Errorf("got %+v, want one line of skip containing %q", d, tc.skip)
				}
			default:
				if d.err == nil || !strings.Contains(d.err.Error(), tc.err) {
					t.Errorf("got %+v, want a failure containing %q", d, tc.err)
				}
			}
		})
	}
	t.Run("skip line", func(t *testing.T) {
		top := tree(t)
		d := decide("codex", func(string) string { return "" })
		want := "needs the shared real sessions in " + filepath.Join(top, "shared", "data", "codex") +
			" (not in this clone; what they are and how to get them: go doc ./internal/shareddata); set " + RequiredEnv + "=1 to fail instead of skipping"
		if d.skip != want {
			t.Errorf("skip line\n%s\nwant\n%s", d.skip, want)
		}
	})
}

// TestSessionsSubset: without the shared data, Sessions gives the
// repository's subset; with CTXGUARD_SHARED_DATA=off too.
func TestSessionsSubset(t *testing.T) {
	top := tree(t, "repo/testdata/sessions/codex/r.jsonl")
	t.Setenv(RequiredEnv, "")
	want := filepath.Join(top, "repo", "testdata", "sessions", "codex")
	for _, env := range []string{"", "off"} {
		t.Setenv(Env, env)
		if d, full := Sessions(t, "codex"); full || d != want {
			t.Errorf("%s=%q: Sessions = %q, %v; want the subset %q", Env, env, d, full, want)
		}
	}
	if p := SubsetFile(t, "codex", "r.jsonl"); p != filepath.Join(want, "r.jsonl") {
		t.Errorf("SubsetFile = %q", p)
	}
	if _, err := Subset("claude-code"); err == nil {
		t.Error("a missing subset was found")
	}
}

// TestRepositorySubset: the repository's own subset holds one Claude Code
// and one Codex session, with the README that attributes them.
func TestRepositorySubset(t *testing.T) {
	for _, sub := range []string{"claude-code", "codex"} {
		dir, err := Subset(sub)
		if err != nil {
			t.Fatal(err)
		}
		if files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl")); len(files) != 1 {
			t.Errorf("%s: %d sessions, want 1", dir, len(files))
		}
	}
	mod, err := module.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(mod, SubsetDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CC0", "M-Thisness/M-Claude", "EdouardZemb/test-framework", "Copyright (c) 2026 test-framework contributors"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("%s/README.md does not name %q", SubsetDir, want)
		}
	}
}

// TestCheckout: in this checkout, the shared data is where Root says,
// beside the module (or where CTXGUARD_SHARED_DATA names it); without it
// the test skips, as every test that needs it does.
func TestCheckout(t *testing.T) {
	dir := Dir(t, "claude-code")
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dir, root) {
		t.Errorf("Dir = %q, not under Root() = %q", dir, root)
	}
	if os.Getenv(Env) == "" && !strings.HasSuffix(root, filepath.Join("shared", "data")) {
		t.Errorf("Root() = %q, want ../shared/data from the module", root)
	}
}

// TestCIRequiresData: CI's script makes missing shared data a failure
// before it runs the tests, so CI cannot pass by skipping them.
func TestCIRequiresData(t *testing.T) {
	mod, err := module.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(mod, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	script := string(b)
	set := strings.Index(script, "\nexport "+RequiredEnv+"=1")
	test := strings.Index(script, "\ngo test ")
	if set < 0 || test < 0 || set > test {
		t.Errorf(".ci/run does not export %s=1 before its first go test (at %d, go test at %d)", RequiredEnv, set, test)
	}
}
