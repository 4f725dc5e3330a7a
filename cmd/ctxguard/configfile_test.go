package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/config"
)

var update = flag.Bool("update", false, "rewrite config/starter.yaml from the configuration block of docs/configuration.md")

// TestStarterFromDocs: the starter file `config --init` writes is its
// header, then the configuration block of docs/configuration.md (the defaults, which
// TestDocsConfig checks) with every line commented out, so the two
// never drift apart. -update rewrites the file's part after the header.
func TestStarterFromDocs(t *testing.T) {
	const sep = "# The defaults:\n"
	header, _, ok := strings.Cut(string(config.Starter()), sep)
	if !ok {
		t.Fatalf("config/starter.yaml has no %q line after its header", strings.TrimSpace(sep))
	}
	block := string(docsConfigBlock(t))
	// The block's first line says it is checked; the starter's header
	// says what it is.
	_, block, _ = strings.Cut(block, "\n")
	var body strings.Builder
	for _, line := range strings.SplitAfter(block, "\n") {
		if line != "" {
			body.WriteString("# " + line)
		}
	}
	want := header + sep + body.String()
	if *update {
		if err := os.WriteFile("../../config/starter.yaml", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if d := cmp.Diff(want, string(config.Starter())); d != "" {
		t.Errorf("config/starter.yaml is not the configuration block of docs/configuration.md commented out (go test ./cmd/ctxguard -run TestStarterFromDocs -update rewrites it) (-want +got):\n%s", d)
	}
}

// TestDefaultConfigFile: without --config, config and serve read
// $XDG_CONFIG_HOME/ctxguard/config.yaml, else ~/.config/ctxguard/config.yaml,
// when it exists; --config FILE reads FILE instead, --config= none.
func TestDefaultConfigFile(t *testing.T) {
	home, xdg := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_DATA_HOME", "")
	write := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	listen := func(args ...string) string {
		t.Helper()
		code, out, stderr := runCmd(append([]string{"config"}, args...)...)
		if code != 0 {
			t.Fatalf("config %v: exit %d: %s", args, code, stderr)
		}
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, "listen: "); ok {
				return v
			}
		}
		t.Fatalf("config %v printed no listen:\n%s", args, out)
		return ""
	}
	other := filepath.Join(t.TempDir(), "other.yaml")
	write(other, "listen: 127.0.0.1:7003\n")

	t.Setenv("XDG_CONFIG_HOME", xdg)
	if got := listen(); got != "127.0.0.1:8787" {
		t.Errorf("no file anywhere: listen %s, want the default", got)
	}
	write(filepath.Join(home, ".config", "ctxguard", "config.yaml"), "listen: 127.0.0.1:7001\n")
	if got := listen(); got != "127.0.0.1:8787" {
		t.Errorf("with XDG_CONFIG_HOME set, ~/.config was read: listen %s", got)
	}
	write(filepath.Join(xdg, "ctxguard", "config.yaml"), "listen: 127.0.0.1:7002\n")
	for _, tc := range []struct {
		xdg  string
		args []string
		want string
	}{
		{xdg, nil, "127.0.0.1:7002"},
		{"", nil, "127.0.0.1:7001"},
		{xdg, []string{"--config", other}, "127.0.0.1:7003"},
		{xdg, []string{"--config="}, "127.0.0.1:8787"},
	} {
		t.Setenv("XDG_CONFIG_HOME", tc.xdg)
		if got := listen(tc.args...); got != tc.want {
			t.Errorf("XDG_CONFIG_HOME=%q config %v: listen %s, want %s", tc.xdg, tc.args, got, tc.want)
		}
	}
	// A default file that is wrong is an error naming it, not ignored.
	t.Setenv("XDG_CONFIG_HOME", xdg)
	write(filepath.Join(xdg, "ctxguard", "config.yaml"), "lisen: 127.0.0.1:7002\n")
	code, _, stderr := runCmd("config")
	if want := filepath.Join(xdg, "ctxguard", "config.yaml") + `: line 1: unknown key "lisen" (did you mean "listen"?)`; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("a wrong default file: exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
}

// TestConfigInit: config --init writes the starter file (mode 0600) to
// the default place, making the folders that lead to it (0700) and
// nothing else; never replaces a file; writes to a file it is given;
// and what it writes loads as the defaults.
func TestConfigInit(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("XDG_DATA_HOME", "")
	def := filepath.Join(home, ".config", "ctxguard", "config.yaml")

	code, out, stderr := runCmd("config", "--init")
	if code != 0 || !strings.Contains(out, "wrote "+def) || !strings.Contains(out, "ctxguard serve reads it when started without --config") {
		t.Fatalf("config --init: exit %d\nstdout: %s\nstderr: %s", code, out, stderr)
	}
	got, err := os.ReadFile(def)
	if err != nil || !bytes.Equal(got, config.Starter()) {
		t.Fatalf("%s: %v; holds the starter: %v", def, err, bytes.Equal(got, config.Starter()))
	}
	for path, want := range map[string]os.FileMode{def: 0o600, filepath.Dir(def): 0o700 | os.ModeDir, filepath.Join(home, ".config"): 0o700 | os.ModeDir} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode(), err, want)
		}
	}
	var made []string
	filepath.WalkDir(home, func(p string, _ os.DirEntry, _ error) error {
		made = append(made, strings.TrimPrefix(p, home))
		return nil
	})
	if d := cmp.Diff([]string{"", "/.config", "/.config/ctxguard", "/.config/ctxguard/config.yaml"}, made); d != "" {
		t.Errorf("config --init made other things (-want +got):\n%s", d)
	}

	// It loads, as the file serve reads, to the defaults.
	code, fromStarter, stderr := runCmd("config")
	if code != 0 {
		t.Fatalf("config with the starter file: exit %d: %s", code, stderr)
	}
	code, defaults, _ := runCmd("config", "--config=")
	if d := cmp.Diff(defaults, fromStarter); code != 0 || d != "" {
		t.Errorf("the starter file changes the configuration (-defaults +starter):\n%s", d)
	}

	// Never replaced, whatever it holds.
	if err := os.WriteFile(def, []byte("listen: 127.0.0.1:7001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCmd("config", "--init")
	if code != 1 || !strings.Contains(stderr, def+" exists; it is left as it is") {
		t.Errorf("config --init over a file: exit %d, stderr %q", code, stderr)
	}
	if b, _ := os.ReadFile(def); string(b) != "listen: 127.0.0.1:7001\n" {
		t.Errorf("the existing file was changed: %q", b)
	}

	// To a file it is given, as an argument or with --config.
	dir := t.TempDir()
	for _, args := range [][]string{{"--init", filepath.Join(dir, "a.yaml")}, {"--init", "--config", filepath.Join(dir, "b.yaml")}} {
		code, out, stderr := runCmd(append([]string{"config"}, args...)...)
		file := args[len(args)-1]
		if code != 0 || !strings.Contains(out, "start ctxguard serve --config "+file+" to use it") {
			t.Errorf("config %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, stderr)
		}
		if b, err := os.ReadFile(file); err != nil || !bytes.Equal(b, config.Starter()) {
			t.Errorf("config %v did not write the starter: %v", args, err)
		}
	}
	code, _, stderr = runCmd("config", "--init", "a.yaml", "b.yaml")
	if code != 2 || !strings.Contains(stderr, "--init takes one file, not 2") {
		t.Errorf("two files: exit %d, stderr %q", code, stderr)
	}
}

// TestWriteStarterFailing: when the file cannot be written, WriteStarter
// leaves nothing behind, not even the folders it made.
func TestWriteStarterFailing(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		filepath.Join(blocker, "ctxguard", "config.yaml"),               // a folder cannot be made under a file
		filepath.Join(dir, "new", "ctxguard", strings.Repeat("x", 300)), // the folders can, the file cannot (its name is too long)
	} {
		if err := config.WriteStarter(path); err == nil {
			t.Errorf("%s was written", path)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 || ents[0].Name() != "file" {
			t.Errorf("after a failed write to %s the folder holds %v", path, ents)
		}
	}
}
