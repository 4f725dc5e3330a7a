// Package module finds ctxguard's module on disk, for tests and harnesses
// that build its commands or read files beside it.
package module

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// Path is ctxguard's module path.
const Path = "github.com/ctxguard/ctxguard"

// Root returns the folder holding the go.mod of module
// github.com/ctxguard/ctxguard, searching dir and its parents.
func Root(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module "+Path+"\n")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("module: no go.mod of %s in %s or above", Path, dir)
		}
	}
}
