// Package config holds ctxguard's one typed configuration: defaults in
// code (Defaults), a strictly decoded YAML file on top (Load: an unknown
// key is an error naming the key and its line), environment and flag
// overrides applied by the caller, and Validate, kept separate from
// loading so a config built in code is checked the same way.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass/clear"
	"github.com/ctxguard/ctxguard/pass/compress"
	"github.com/ctxguard/ctxguard/pass/persist"
)

// Config is ctxguard's whole configuration.
type Config struct {
	// Listen is the proxy's address. Default 127.0.0.1:8787.
	Listen string `yaml:"listen"`
	// Upstream is the model API's base URL. Default
	// https://api.anthropic.com.
	Upstream string `yaml:"upstream"`
	// MaxBody is the largest request body accepted, in bytes. Default 32
	// MiB, the API's own limit.
	MaxBody int64 `yaml:"max_body"`
	// DataDir holds the embedded store (removed tool output, records).
	// Default $XDG_DATA_HOME/ctxguard, else ~/.local/share/ctxguard.
	// Created with mode 0700.
	DataDir string `yaml:"data_dir"`
	// BlobTTL is how long removed content is kept after its last use.
	// Default 7 days.
	BlobTTL time.Duration `yaml:"blob_ttl"`
	// BlobAccess says who may fetch removed content over HTTP at
	// /ctxguard/v1/blobs/{id}: "loopback" (default: only clients on
	// 127.0.0.0/8 or ::1), "any", or "off".
	BlobAccess string `yaml:"blob_access"`
	// DryRun computes every rewrite and logs what it would change, but
	// forwards the original body.
	DryRun bool `yaml:"dry_run"`
	// Log configures logging.
	Log Log `yaml:"log"`
	// Timeouts bound waits on the upstream.
	Timeouts Timeouts `yaml:"timeouts"`

	// Models patches the embedded model registry.
	Models model.Config `yaml:"models"`
	// Compress is the per-result compression pass.
	Compress compress.Config `yaml:"compress"`
	// Persist stores oversized tool results and leaves a preview.
	Persist persist.Config `yaml:"persist"`
	// Clear is the history clearing pass.
	Clear clear.Config `yaml:"clear"`
}

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is text or json. Default text.
	Format string `yaml:"format"`
	// DumpBodies logs request bodies at debug level. Off by default:
	// bodies hold the user's code and data. Keys are never logged.
	DumpBodies bool `yaml:"dump_bodies"`
}

// Timeouts bound the proxy's waits on the upstream; zero means the
// proxy's default, negative means none.
type Timeouts struct {
	Dial           time.Duration `yaml:"dial"`
	ResponseHeader time.Duration `yaml:"response_header"`
	Idle           time.Duration `yaml:"idle"`
}

// Defaults returns the configuration ctxguard runs with when given none.
func Defaults() Config {
	return Config{
		Listen:     "127.0.0.1:8787",
		Upstream:   "https://api.anthropic.com",
		MaxBody:    32 << 20,
		DataDir:    defaultDataDir(),
		BlobTTL:    7 * 24 * time.Hour,
		BlobAccess: "loopback",
		Log:        Log{Level: "info", Format: "text"},
		Models:     model.Defaults(),
		Compress:   compress.Defaults(),
		Persist:    persist.Defaults(),
		Clear:      clear.Defaults(),
	}
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "ctxguard")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "ctxguard")
	}
	return filepath.Join(os.TempDir(), "ctxguard")
}

// Load returns Defaults overlaid with the YAML file at path. An empty path
// returns Defaults. Load does not Validate.
func Load(path string) (Config, error) {
	cfg := Defaults()
	if path == "" {
		return cfg, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	if err := Decode(&cfg, b, path); err != nil {
		return cfg, err
	}
	return cfg, nil
}

var unknownField = regexp.MustCompile(`line (\d+): field (\S+) not found in type (\S+)`)

// Decode overlays the YAML document b on cfg. Keys the configuration does
// not have are errors naming the key and its line; name prefixes them.
func Decode(cfg *Config, b []byte, name string) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	err := dec.Decode(cfg)
	if errors.Is(err, io.EOF) {
		return nil // empty document: defaults stand
	}
	if err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msgs := make([]string, len(te.Errors))
			for i, e := range te.Errors {
				if m := unknownField.FindStringSubmatch(e); m != nil {
					section := strings.TrimPrefix(strings.TrimPrefix(m[3], "config."), "*")
					e = fmt.Sprintf("line %s: unknown key %q (in %s)", m[1], m[2], section)
				}
				msgs[i] = name + ": " + e
			}
			return errors.New(strings.Join(msgs, "\n"))
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	var extra any
	if dec.Decode(&extra) == nil {
		return fmt.Errorf("%s: more than one YAML document", name)
	}
	return nil
}

// ApplyEnv applies CTXGUARD_LISTEN and CTXGUARD_UPSTREAM (and
// CTXGUARD_DATA_DIR) from getenv.
func (c *Config) ApplyEnv(getenv func(string) string) {
	if v := getenv("CTXGUARD_LISTEN"); v != "" {
		c.Listen = v
	}
	if v := getenv("CTXGUARD_UPSTREAM"); v != "" {
		c.Upstream = v
	}
	if v := getenv("CTXGUARD_DATA_DIR"); v != "" {
		c.DataDir = v
	}
}

// YAML renders c as the YAML that Load would read back to the same
// configuration.
func (c Config) YAML() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	enc.Close()
	return buf.Bytes(), nil
}

// Validate reports every problem in c, joined, or nil.
func (c Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen: %q: %v", c.Listen, err))
	}
	if u, err := url.Parse(c.Upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("upstream: %q is not an http(s) URL", c.Upstream))
	}
	if c.MaxBody <= 0 {
		errs = append(errs, fmt.Errorf("max_body: %d must be positive", c.MaxBody))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data_dir: empty"))
	}
	if c.BlobTTL < 0 {
		errs = append(errs, fmt.Errorf("blob_ttl: %v is negative", c.BlobTTL))
	}
	switch c.BlobAccess {
	case "loopback", "any", "off":
	default:
		errs = append(errs, fmt.Errorf("blob_access: %q must be loopback, any or off", c.BlobAccess))
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log.level: %q must be debug, info, warn or error", c.Log.Level))
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("log.format: %q must be text or json", c.Log.Format))
	}
	if err := c.Models.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Compress.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("compress: %w", err))
	}
	if err := c.Persist.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("persist: %w", err))
	}
	if err := c.Clear.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("clear: %w", err))
	}
	return errors.Join(errs...)
}
