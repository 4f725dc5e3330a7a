package config

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// DefaultFile is where ctxguard looks for its configuration file when no
// --config is given: $XDG_CONFIG_HOME/ctxguard/config.yaml, else
// ~/.config/ctxguard/config.yaml. It fails only when there is neither.
func DefaultFile() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "ctxguard", "config.yaml"), nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("config: no default file: %w", err)
	}
	return filepath.Join(h, ".config", "ctxguard", "config.yaml"), nil
}

//go:embed starter.yaml
var starter []byte

// Starter returns a configuration file that changes nothing: every
// setting at its default, commented out, with what it does. It is what
// `ctxguard config --init` writes.
func Starter() []byte { return append([]byte(nil), starter...) }

// WriteStarter writes Starter to path, mode 0600, and the folders that
// lead to it that do not exist yet, mode 0700. It never replaces a file:
// when path exists it returns an error that wraps os.ErrExist. It creates
// nothing else, and when it fails it removes what it created.
func WriteStarter(path string) (err error) {
	var made []string // folders created, innermost first
	defer func() {
		if err != nil {
			for _, d := range made {
				os.Remove(d)
			}
		}
	}()
	var missing []string
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !errors.Is(err, os.ErrNotExist) || d == filepath.Dir(d) {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o700); err != nil {
			return fmt.Errorf("config: %w", err)
		}
		made = append([]string{missing[i]}, made...)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	_, err = f.Write(starter)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("config: %s: %w", path, err)
	}
	return nil
}
