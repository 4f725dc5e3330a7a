package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/pass/compress"
	"github.com/ctxguard/ctxguard/pass/persist"
	"github.com/ctxguard/ctxguard/pass/thinking"
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
			cl := pass.Get[clearing.Config](c.Passes)
			if c.Listen != "127.0.0.1:9999" || cl.Trigger.Resolve(200_000) != 80_000 || cl.KeepTokens.Resolve(1) != 10_000 || c.BlobTTL != 2*time.Hour {
				return "overrides not applied"
			}
			if c.Upstreams != Defaults().Upstreams || !pass.Get[compress.Config](c.Passes).Enabled {
				return "defaults lost"
			}
			return ""
		}},
		{name: "unknown top-level key", yaml: "listen: x\nlisen: y\n", wantErr: `cfg.yaml: line 2: unknown key "lisen" (did you mean "listen"?)`},
		{name: "unknown nested key", yaml: "clear:\n  enabled: true\n  trigerr: 5\n", wantErr: `cfg.yaml: line 3: unknown key "trigerr" in clear (did you mean "trigger"?)`},
		{name: "unknown key, deeper", yaml: "compact:\n  summarizer:\n    modle: none\n", wantErr: `line 3: unknown key "modle" in compact.summarizer (did you mean "mode"?)`},
		{name: "unknown key in a map's value", yaml: "models:\n  overrides:\n    my-model: {window: 1000, max_ouput: 10}\n", wantErr: `line 3: unknown key "max_ouput" in models.overrides.my-model (did you mean "max_output"?)`},
		{name: "key in the wrong section", yaml: "prepare: 60%\n", wantErr: `line 1: unknown key "prepare" (prepare is a key of compact: indent it under that section)`},
		{name: "unknown key, nothing near", yaml: "clear:\n  colour: blue\n", wantErr: `line 2: unknown key "colour" in clear`},
		{name: "two unknown keys", yaml: "lisen: x\nlog: {levl: info}\n", wantErr: "cfg.yaml: line 1: unknown key \"lisen\" (did you mean \"listen\"?)\ncfg.yaml: line 2: unknown key \"levl\" in log (did you mean \"level\"?)"},
		{name: "threshold typo", yaml: "compact:\n  prepare: 60\n", wantErr: `cfg.yaml: line 2: compact.prepare: 60 would be 60 tokens, too few to be meant; write 60% for 60 percent (the default is 60%), or a token count of at least 1000`},
		{name: "threshold typo, quoted", yaml: "compact:\n  swap: \"75\"\n", wantErr: `line 2: compact.swap: 75 would be 75 tokens`},
		{name: "threshold typo over 100", yaml: "compact:\n  swap: 750\n", wantErr: `compact.swap: 750 would be 750 tokens, too few to be meant; a share of the window is written with % (the default is 75%), or a token count of at least 1000`},
		{name: "threshold as tokens", yaml: "compact:\n  prepare: 1000\n  swap: 100k\n", check: func(c Config) string {
			if cp := pass.Get[compact.Config](c.Passes); cp.Prepare != model.Tokens(1000) || cp.Swap != model.Tokens(100_000) {
				return fmt.Sprintf("prepare %v swap %v", cp.Prepare, cp.Swap)
			}
			return ""
		}},
		{name: "threshold as a share", yaml: "compact:\n  prepare: 50%\n  swap: 0.7\n", check: func(c Config) string {
			if cp := pass.Get[compact.Config](c.Passes); cp.Prepare != model.Fraction(0.5) || cp.Swap != model.Fraction(0.7) {
				return fmt.Sprintf("prepare %v swap %v", cp.Prepare, cp.Swap)
			}
			return ""
		}},
		{name: "small token count where the default is tokens", yaml: "clear:\n  trigger: 500\n", check: func(c Config) string {
			if tr := pass.Get[clearing.Config](c.Passes).Trigger; tr != model.Tokens(500) {
				return fmt.Sprintf("trigger %v", tr)
			}
			return ""
		}},
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
	good := Defaults()
	good.PublicURL = "https://ctxguard.team.example/gw"
	if err := good.Validate(); err != nil {
		t.Errorf("public_url with a path: %v", err)
	}
	for _, u := range []string{"redis://cache.internal:6379/0", "rediss://ctxguard@cache.internal/3", "redis://127.0.0.1"} {
		good.Store = u
		if err := good.Validate(); err != nil {
			t.Errorf("store %q: %v", u, err)
		}
	}
	// Base URLs with a path of their own, none ending in what clients add.
	for _, u := range []string{"https://openrouter.ai/api", "http://gw.example/v1beta", "http://gw.example/v10", "http://gw.example/v1/proxy", "http://gw.example/"} {
		good := Defaults()
		good.Upstreams.Anthropic = u
		good.Routes = map[string]string{"r": u}
		if err := good.Validate(); err != nil {
			t.Errorf("base URL %q: %v", u, err)
		}
	}
	for _, tc := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Listen = "nope" }, "listen"},
		{func(c *Config) { c.Upstreams.OpenAI = "ftp://x" }, "upstreams.openai"},
		{func(c *Config) { c.Routes = map[string]string{"open router": "https://x"} }, "routes"},
		{func(c *Config) { c.Routes = map[string]string{"or": "x"} }, "routes.or"},
		{func(c *Config) { c.MaxBody = 0 }, "max_body"},
		{func(c *Config) { c.DataDir = "" }, "data_dir"},
		{func(c *Config) { c.Local.Access = "world" }, "local.access"},
		{func(c *Config) { c.Log.Level = "loud" }, "log.level"},
		{func(c *Config) { pass.Update(&c.Passes, func(s *clearing.Config) { s.KeepUses = -1 }) }, "clear: keep_uses"},
		{func(c *Config) {
			pass.Update(&c.Passes, func(s *clearing.Config) { s.Reads.KeepTokens = model.Tokens(-1) })
		}, "clear: reads.keep_tokens"},
		{func(c *Config) {
			pass.Update(&c.Passes, func(s *clearing.Config) { s.Reads.MaxShare = model.Fraction(1.5) })
		}, "clear: reads.max_share"},
		{func(c *Config) {
			pass.Update(&c.Passes, func(s *clearing.Config) { s.Reads.Tools = []string{"Read["} })
		}, "clear: bad tool glob"},
		{func(c *Config) {
			pass.Update(&c.Passes, func(s *clearing.Config) { s.Reads.Commands = []string{"cat", " "} })
		}, "clear: reads.commands"},
		{func(c *Config) { pass.Update(&c.Passes, func(s *persist.Config) { s.Preview = -1 }) }, "persist: preview"},
		{func(c *Config) { pass.Update(&c.Passes, func(s *compress.Config) { s.Cap.MaxChars = -1 }) }, "compress:"},
		{func(c *Config) { c.Dashboard.Sessions = 0 }, "dashboard.sessions"},
		{func(c *Config) { c.PublicURL = "ctxguard.example" }, "public_url"},
		{func(c *Config) { c.PublicURL = "https://ctxguard.example/" }, "public_url"},
		{func(c *Config) { c.PublicURL = "https://u:secret@ctxguard.example" }, "public_url"},
		{func(c *Config) { c.PublicURL = "https://ctxguard.example?x=1" }, "public_url"},
		{func(c *Config) { c.Store = "redis://u:secret@cache:6379/0" }, "store: \"redis://u:xxxxx@cache:6379/0\": carries a password; remove it from the URL and give it in the environment instead (CTXGUARD_REDIS_PASSWORD)"},
		{func(c *Config) { c.Store = "redis+sentinel://cache" }, "store:"},
		{func(c *Config) { c.Store = "/var/lib/ctxguard" }, "store:"},
		{func(c *Config) { c.Store = "redis://cache/0?db=2" }, "store:"},
		{func(c *Config) { c.Limits.StoreBlob = 0 }, "limits.store_blob"},
		{func(c *Config) { c.Upstreams.Anthropic = "http://gw.example/v1" },
			`upstreams.anthropic: "http://gw.example/v1" ends in /v1, which clients add themselves (a request for /v1/messages would reach http://gw.example/v1/v1/messages); write http://gw.example`},
		{func(c *Config) {
			c.Upstreams = AllUpstreams("http://u:pw@gw.example/api/v1/")
		},
			`upstreams.anthropic, upstreams.openai and upstreams.gemini: "http://u:xxxxx@gw.example/api/v1/" ends in /v1`},
		{func(c *Config) { c.Upstreams.Gemini = "" }, "upstreams.gemini"},
		{func(c *Config) { c.Upstreams.OpenAI = "https://api.openai.com/v1/responses" }, "upstreams.openai: \"https://api.openai.com/v1/responses\" ends in /v1/responses, which clients add themselves (a request for /v1/messages would reach https://api.openai.com/v1/responses/v1/messages); write https://api.openai.com"},
		{func(c *Config) { c.Routes = map[string]string{"groq": "https://api.groq.com/openai/v1"} }, "routes.groq: \"https://api.groq.com/openai/v1\" ends in /v1, which clients add themselves (a request for /v1/messages would reach https://api.groq.com/openai/v1/v1/messages); write https://api.groq.com/openai"},
		{func(c *Config) {
			pass.Update(&c.Passes, func(s *compact.Config) {
				s.Summarizer = compact.SummarizerConfig{Mode: "endpoint", Endpoint: "https://api.anthropic.com/v1", Protocol: "anthropic", Model: "m", APIKeyEnv: "K", Timeout: time.Minute, Concurrency: 1}
			})
		}, "compact: summarizer.endpoint: \"https://api.anthropic.com/v1\" ends in /v1"},
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
	pass.Update(&c.Passes, func(s *clearing.Config) { s.Trigger = model.Fraction(0.25) })
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
	env := map[string]string{"CTXGUARD_LISTEN": "127.0.0.1:1", "CTXGUARD_UPSTREAM": "http://u", "CTXGUARD_DATA_DIR": "/d", "CTXGUARD_AUTH_TOKEN": "tok-0123456789abcdef"}
	c.ApplyEnv(func(k string) string { return env[k] })
	if c.Listen != "127.0.0.1:1" || c.Upstreams != AllUpstreams("http://u") || c.DataDir != "/d" || c.AuthToken != "tok-0123456789abcdef" {
		t.Errorf("%+v", c)
	}
}

func TestLoadMissing(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestExpandPath(t *testing.T) {
	env := map[string]string{"XDG": "/x/data", "EMPTY": "", "A_1": "a"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	home := func() (string, error) { return "/home/u", nil }
	for _, tc := range []struct{ in, want, err string }{
		{in: "/abs/path", want: "/abs/path"},
		{in: "rel/path", want: "rel/path"},
		{in: "~", want: "/home/u"},
		{in: "~/.local/share/ctxguard", want: "/home/u/.local/share/ctxguard"},
		{in: "$XDG/ctxguard", want: "/x/data/ctxguard"},
		{in: "${XDG}/ctxguard", want: "/x/data/ctxguard"},
		{in: "/p/$A_1-b", want: "/p/a-b"},
		{in: "/p/$EMPTY/x", want: "/p//x"},
		{in: "/price$$", want: "/price$"},
		{in: "a~b", want: "a~b"},
		{in: "$NOPE/ctxguard", err: "NOPE is not set"},
		{in: "${XDG", err: "unclosed"},
		{in: "/p/$/x", err: "without a variable name"},
		{in: "~other/x", err: "~user is not supported"},
	} {
		got, err := ExpandPath(tc.in, lookup, home)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ExpandPath(%q) = %q, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ExpandPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := ExpandPath("~/x", lookup, func() (string, error) { return "", errors.New("no home") }); err == nil {
		t.Error("~ without a home directory: no error")
	}
}

func TestExpandPathsFromFile(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("CTXGUARD_TEST_ROOT", "/srv")
	for in, want := range map[string]string{
		"data_dir: ~/.local/share/ctxguard\n": filepath.Join(home, ".local/share/ctxguard"),
		"data_dir: $CTXGUARD_TEST_ROOT/cg\n":  "/srv/cg",
	} {
		path := filepath.Join(t.TempDir(), "c.yaml")
		os.WriteFile(path, []byte(in), 0o600)
		c, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ExpandPaths(); err != nil || c.DataDir != want {
			t.Errorf("%q: data_dir %q, %v; want %q", in, c.DataDir, err, want)
		}
	}
}

func TestListenNeedsToken(t *testing.T) {
	for _, tc := range []struct {
		listen, token string
		ok            bool
	}{
		{"127.0.0.1:8787", "", true},
		{"localhost:8787", "", true},
		{"[::1]:8787", "", true},
		{"127.0.0.2:0", "", true},
		{"0.0.0.0:8787", "", false},
		{":8787", "", false},
		{"[::]:8787", "", false},
		{"192.168.1.5:8787", "", false},
		{"myhost:8787", "", false},
		{"0.0.0.0:8787", "0123456789abcdef", true},
		{"0.0.0.0:8787", "short", false},
		{"127.0.0.1:8787", Redacted, false},
		{"127.0.0.1:8787", "0123456789abcdef\n", false},
	} {
		c := Defaults()
		c.Listen, c.AuthToken = tc.listen, tc.token
		err := c.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("listen %q token %q: Validate() = %v, want ok=%v", tc.listen, tc.token, err, tc.ok)
		}
	}
}

func TestSecretsRedacted(t *testing.T) {
	c := Defaults()
	c.AuthToken = "0123456789abcdef-secret"
	c.Upstreams.Anthropic = "https://user:hunter2-password@gateway.example.com/v1"
	c.Routes = map[string]string{"team": "https://bot:hunter2-password@llm.example.com"}
	c.Store = "redis://ctxguard:hunter2-password@cache:6379/0" // invalid, yet never printed
	b, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"hunter2-password", "0123456789abcdef-secret"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("printed configuration holds %q:\n%s", secret, b)
		}
	}
	if !strings.Contains(string(b), "https://user:xxxxx@gateway.example.com/v1") || !strings.Contains(string(b), Redacted) {
		t.Errorf("redactions missing:\n%s", b)
	}
	c.Upstreams.Anthropic = "ftp://u:hunter2-password@x"
	if err := c.Validate(); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Validate error %v shows the password", err)
	}
}

func TestTimeoutsPrinted(t *testing.T) {
	b, err := Defaults().YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"idle: 5m0s", "response_header: 10m0s", "dial: 30s", "body_read: 30s", "upstream_write: 30s", "client_write: 5m0s"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("printed configuration lacks %q:\n%s", want, b)
		}
	}
}

func TestLocalAddr(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:8787": "127.0.0.1:8787",
		"0.0.0.0:8787":   "127.0.0.1:8787",
		"[::]:8787":      "127.0.0.1:8787",
		":8787":          "127.0.0.1:8787",
		"[::1]:8787":     "[::1]:8787",
		"localhost:1":    "localhost:1",
		"10.0.0.2:80":    "10.0.0.2:80",
	} {
		if got := LocalAddr(in); got != want {
			t.Errorf("LocalAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDrainAlias: timeouts.shutdown, drain's former name, still loads as
// drain with a warning; both at once are refused; printing shows drain.
func TestDrainAlias(t *testing.T) {
	c := Defaults()
	if err := Decode(&c, []byte("timeouts:\n  shutdown: 7s\n"), "cfg.yaml"); err != nil {
		t.Fatal(err)
	}
	if c.Timeouts.Drain != 7*time.Second {
		t.Errorf("drain = %v, want 7s from timeouts.shutdown", c.Timeouts.Drain)
	}
	if w := c.Warnings(); len(w) != 1 || !strings.Contains(w[0], "timeouts.drain") {
		t.Errorf("warnings = %q, want one naming timeouts.drain", w)
	}
	b, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "shutdown") || !strings.Contains(string(b), "drain: 7s") {
		t.Errorf("printed:\n%s", b)
	}
	// What is printed loads back to the same drain, without a warning.
	back := Defaults()
	if err := Decode(&back, b, "printed"); err != nil || back.Timeouts.Drain != 7*time.Second || back.Warnings() != nil {
		t.Errorf("printed config reloads as drain %v, warnings %q, err %v", back.Timeouts.Drain, back.Warnings(), err)
	}
	// shutdown: 0 (wait without limit) is a value too.
	c = Defaults()
	if err := Decode(&c, []byte("timeouts: {shutdown: 0s}\n"), "cfg.yaml"); err != nil || c.Timeouts.Drain != 0 {
		t.Errorf("shutdown: 0s gives drain %v, err %v", c.Timeouts.Drain, err)
	}
	c = Defaults()
	err = Decode(&c, []byte("timeouts:\n  drain: 5s\n  shutdown: 7s\n"), "cfg.yaml")
	if err == nil || !strings.Contains(err.Error(), "keep drain only") {
		t.Errorf("both keys: err = %v", err)
	}
	if c := Defaults(); c.Warnings() != nil {
		t.Errorf("defaults warn: %q", c.Warnings())
	}
}

func TestKeepRestartOnly(t *testing.T) {
	run := Defaults()
	next := Defaults()
	next.Listen = "127.0.0.1:9999"
	next.DataDir = "/elsewhere"
	next.Dashboard.Sessions = 7
	next.Upstreams.Anthropic = "http://gateway.example"
	pass.Update(&next.Passes, func(s *compress.Config) { s.Enabled = false })
	kept := KeepRestartOnly(run, &next)
	if d := cmp.Diff([]string{"listen", "data_dir", "dashboard"}, kept); d != "" {
		t.Errorf("kept (-want +got):\n%s", d)
	}
	if next.Listen != run.Listen || next.DataDir != run.DataDir || next.Dashboard != run.Dashboard {
		t.Errorf("restart-only settings not kept: %s %s %+v", next.Listen, next.DataDir, next.Dashboard)
	}
	if next.Upstreams.Anthropic != "http://gateway.example" || pass.Get[compress.Config](next.Passes).Enabled {
		t.Error("a reloadable setting was reset")
	}
	if d := cmp.Diff([]string{"upstreams", "compress"}, Changed(run, next)); d != "" {
		t.Errorf("Changed (-want +got):\n%s", d)
	}
	if c := Changed(run, Defaults()); c != nil {
		t.Errorf("Changed(defaults, defaults) = %q", c)
	}
	for _, k := range KeepRestartOnly(run, &next) {
		t.Errorf("kept %s a second time", k)
	}
	if ro := RestartOnly(); len(ro) != len(restartOnly)+len(passRestartOnly()) || ro[0] != "listen" || !slices.Contains(ro, "thinking_guard.ttl") {
		t.Errorf("RestartOnly() = %q", ro)
	}
}

// TestPassRestartOnly: every restart-only key a pass registers names a
// setting of its section, and a reload keeps it.
func TestPassRestartOnly(t *testing.T) {
	checked := 0
	for _, m := range pass.Modules() {
		for _, k := range m.RestartOnly {
			v, _ := Defaults().Passes.Lookup(m.Key)
			if !settingAt(reflect.ValueOf(v), strings.Split(k, ".")).IsValid() {
				t.Errorf("%s: restart-only key %q is not a setting of %v", m.Name, k, m.Type)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no pass has a restart-only setting")
	}
	run, next := Defaults(), Defaults()
	pass.Update(&next.Passes, func(s *thinking.Config) { s.TTL, s.Enabled = time.Minute, false })
	if d := cmp.Diff([]string{"thinking_guard.ttl"}, KeepRestartOnly(run, &next)); d != "" {
		t.Errorf("kept (-want +got):\n%s", d)
	}
	if got := pass.Get[thinking.Config](next.Passes); got.TTL != pass.Get[thinking.Config](run.Passes).TTL || got.Enabled {
		t.Errorf("thinking_guard after the kept settings: %+v", got)
	}
	if ttl := pass.Get[thinking.Config](Defaults().Passes).TTL; ttl == time.Minute {
		t.Fatal("the test's TTL is the default")
	}
}

// FuzzDecode: any document decodes or is refused with an error, never a
// panic, the hints on unknown keys and typo thresholds included; what
// decodes can be validated and printed.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"", "listen: x\nlisen: y\n", "clear:\n  trigerr: 5\n", "compact:\n  prepare: 60\n  swap: \"75\"\n",
		"models:\n  overrides:\n    m: {window: 1000, max_ouput: 10}\n", "prepare: 60%\n", "- a\n- b: {c: d}\n",
		"a: &x {b: 1}\nc: *x\n", "compact: [1, {prepare: 5}]\n", "upstreams: {anthropic: http://h/v1}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := Defaults()
		if err := Decode(&c, b, "fuzz.yaml"); err != nil {
			return
		}
		_ = c.Validate()
		if _, err := c.YAML(); err != nil {
			t.Fatalf("decoded but does not print: %v", err)
		}
	})
}
