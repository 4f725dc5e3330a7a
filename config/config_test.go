package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ctxguard/ctxguard/model"
)

func TestDefaultsValid(t *testing.T) {
	if err := Defaults().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		yaml    string
		check   func(Config) string
		wantErr string
	}{
		{name: "empty keeps defaults", yaml: "", check: func(c Config) string { return cmp.Diff(Defaults(), c, cmpopts.IgnoreUnexported(model.Amount{})) }},
		{name: "overrides", yaml: "listen: 127.0.0.1:9999\nclear:\n  trigger: 40%\n  keep_tokens: 10k\nblob_ttl: 2h\n", check: func(c Config) string {
			if c.Listen != "127.0.0.1:9999" || c.Clear.Trigger.Resolve(200_000) != 80_000 || c.Clear.KeepTokens.Resolve(1) != 10_000 || c.BlobTTL != 2*time.Hour {
				return "overrides not applied"
			}
			if c.Upstream != Defaults().Upstream || !c.Compress.Enabled {
				return "defaults lost"
			}
			return ""
		}},
		{name: "unknown top-level key", yaml: "listen: x\nlisen: y\n", wantErr: `cfg.yaml: line 2: unknown key "lisen" (in Config)`},
		{name: "unknown nested key", yaml: "clear:\n  enabled: true\n  trigerr: 5\n", wantErr: `line 3: unknown key "trigerr" (in clear.Config)`},
		{name: "bad type", yaml: "max_body: lots\n", wantErr: "cfg.yaml"},
		{name: "two documents", yaml: "listen: a:1\n---\nlisten: b:2\n", wantErr: "more than one YAML document"},
		{name: "bad amount", yaml: "clear:\n  trigger: 150%\n", wantErr: "cfg.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			err := Decode(&c, []byte(tc.yaml), "cfg.yaml")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := tc.check(c); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Listen = "nope" }, "listen"},
		{func(c *Config) { c.Upstream = "ftp://x" }, "upstream"},
		{func(c *Config) { c.MaxBody = 0 }, "max_body"},
		{func(c *Config) { c.DataDir = "" }, "data_dir"},
		{func(c *Config) { c.BlobAccess = "world" }, "blob_access"},
		{func(c *Config) { c.Log.Level = "loud" }, "log.level"},
		{func(c *Config) { c.Clear.KeepUses = -1 }, "clear: keep_uses"},
		{func(c *Config) { c.Persist.Preview = -1 }, "persist: preview"},
		{func(c *Config) { c.Compress.Cap.MaxChars = -1 }, "compress:"},
	} {
		c := Defaults()
		tc.mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want an error about %q", err, tc.want)
		}
	}
}

// TestYAMLRoundTrip: what `ctxguard config` prints loads back to the same
// configuration.
func TestYAMLRoundTrip(t *testing.T) {
	c := Defaults()
	c.Clear.Trigger = model.Fraction(0.25)
	c.Log.DumpBodies = true
	b, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, b, 0o600)
	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load of printed config: %v\n%s", err, b)
	}
	if d := cmp.Diff(c, got, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b model.Amount) bool { return a.String() == b.String() })); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
}

func TestEnv(t *testing.T) {
	c := Defaults()
	env := map[string]string{"CTXGUARD_LISTEN": "127.0.0.1:1", "CTXGUARD_UPSTREAM": "http://u", "CTXGUARD_DATA_DIR": "/d"}
	c.ApplyEnv(func(k string) string { return env[k] })
	if c.Listen != "127.0.0.1:1" || c.Upstream != "http://u" || c.DataDir != "/d" {
		t.Errorf("%+v", c)
	}
}

func TestLoadMissing(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Error("missing file: no error")
	}
}
