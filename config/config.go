// Package config holds ctxguard's one typed configuration: defaults in
// code (Defaults), a strictly decoded YAML file on top (Load: an unknown
// key is an error naming the key and its line), environment and flag
// overrides applied by the caller, and Validate, kept separate from
// loading so a config built in code is checked the same way.
//
// The passes' sections (compress, clear, compact, ...) are of the passes'
// own types: config reads, checks and prints them through package pass's
// registry (Config.Passes) and imports no pass, so a pass plugs in by
// registering itself.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/ctxguard/ctxguard/internal/baseurl"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass"
	redisstore "github.com/ctxguard/ctxguard/store/redis"
)

// RedisPasswordEnv is the environment variable the Redis store's password
// is read from (see Config.Store): never from the config file, which is
// printed and shared.
const RedisPasswordEnv = "CTXGUARD_REDIS_PASSWORD"

// Config is ctxguard's whole configuration.
type Config struct {
	// Listen is the proxy's address. Default 127.0.0.1:8787. An address
	// other machines can reach (0.0.0.0, ":8787", a LAN address) needs
	// AuthToken.
	Listen string `yaml:"listen"`
	// AuthToken, when set, is required on every request, in the
	// X-Ctxguard-Token header (compared in constant time, never
	// forwarded upstream). Required when Listen is not a loopback
	// address. At least 16 characters. Also CTXGUARD_AUTH_TOKEN.
	// Printed redacted.
	AuthToken string `yaml:"auth_token"`
	// PublicURL is the base URL clients reach ctxguard at, as the stubs
	// that replace removed content name it ("https://ctxguard.team.example"
	// behind a load balancer). Default: none, and stubs name the local
	// address, http://<listen>. Set it when several instances serve one
	// store, so that a stub's text does not depend on which instance
	// wrote it. http(s), no query, no fragment, no trailing slash.
	PublicURL string `yaml:"public_url"`
	// Upstreams are the model APIs' base URLs, by protocol family.
	// Credentials in them are redacted wherever ctxguard prints them.
	Upstreams Upstreams `yaml:"upstreams"`
	// Routes are named path prefixes to other upstreams, for OpenAI-
	// compatible (or Anthropic-compatible) providers: with
	// {openrouter: https://openrouter.ai/api}, a client whose base URL is
	// http://127.0.0.1:8787/x/openrouter/v1 reaches
	// https://openrouter.ai/api/v1/..., rewritten like any other request
	// of its protocol. Names are letters, digits, '-', '_' and '.'.
	Routes map[string]string `yaml:"routes"`
	// MaxBody is the largest request body accepted, in bytes (after
	// decompression). Default 32 MiB, the API's own limit; larger bodies
	// get 413.
	MaxBody int64 `yaml:"max_body"`
	// DataDir holds the embedded store (removed tool output, records).
	// Default $XDG_DATA_HOME/ctxguard, else ~/.local/share/ctxguard. "~"
	// and $VAR are expanded. ctxguard creates it (mode 0700) if absent,
	// adopts it if empty, and refuses a folder holding files that are not
	// its own; it only ever writes, deletes or re-permissions its own
	// files (see package store).
	DataDir string `yaml:"data_dir"`
	// Store selects where removed content and records are kept. Empty
	// (the default): the embedded store in DataDir, or memory if that
	// cannot be written. redis://[user@]host[:port][/db], or rediss://
	// for TLS: a Redis server that several instances share (blobs,
	// compaction summaries, digests, learned limits, calibration and
	// session statistics). The URL must not carry a password: it comes
	// from the environment variable CTXGUARD_REDIS_PASSWORD
	// (RedisPasswordEnv). Sentinel and Cluster are not supported.
	Store string `yaml:"store"`
	// BlobTTL is how long removed content is kept after its last use by
	// any request. Default 7 days.
	BlobTTL time.Duration `yaml:"blob_ttl"`
	// Local configures ctxguard's own endpoints under /ctxguard/.
	Local Local `yaml:"local"`
	// DryRun computes every rewrite and logs what it would change, but
	// forwards the original body.
	DryRun bool `yaml:"dry_run"`
	// Log configures logging.
	Log Log `yaml:"log"`
	// Dashboard is the live dashboard at /ctxguard/.
	Dashboard Dashboard `yaml:"dashboard"`
	// Metrics are the Prometheus metrics at /metrics.
	Metrics Metrics `yaml:"metrics"`
	// Timeouts bound every wait, on the client and on the upstream.
	Timeouts Timeouts `yaml:"timeouts"`
	// Limits bound memory.
	Limits Limits `yaml:"limits"`

	// Models patches the embedded model registry.
	Models model.Config `yaml:"models"`
	// Passes are the passes' sections (compress, digest, persist,
	// clear, thinking_guard, compact, ...), by YAML key, each of its
	// pass's type: the file writes them at the top level, after models,
	// and package pass's registry says which there are. Read and change
	// one with pass.Get and pass.Update (pass.Get[clearing.Config](c.Passes)).
	Passes pass.Sections `yaml:"-"`
}

// Upstreams are the base URLs requests go to, by the family of their
// protocol. The --upstream flag and CTXGUARD_UPSTREAM set them all (one
// gateway that serves every API).
type Upstreams struct {
	// Anthropic serves the Messages API (/v1/messages) and requests that
	// carry Anthropic's headers. Default https://api.anthropic.com.
	Anthropic string `yaml:"anthropic"`
	// OpenAI serves the Responses API (/v1/responses), Chat Completions
	// (/v1/chat/completions) and other requests. Default
	// https://api.openai.com.
	OpenAI string `yaml:"openai"`
	// Gemini serves Google's Gemini API (/v1beta/models/...:generateContent
	// and the rest of /v1beta/) and requests that carry Google's
	// headers. Default https://generativelanguage.googleapis.com.
	Gemini string `yaml:"gemini"`
}

// AllUpstreams returns Upstreams that send every family to url (one
// gateway that serves every API: --upstream, CTXGUARD_UPSTREAM).
func AllUpstreams(url string) Upstreams { return Upstreams{Anthropic: url, OpenAI: url, Gemini: url} }

// ByFamily returns the base URLs by protocol family name
// (protocol.Protocol.Family).
func (u Upstreams) ByFamily() map[string]string {
	return map[string]string{"anthropic": u.Anthropic, "openai": u.OpenAI, "gemini": u.Gemini}
}

// Local configures the endpoints under /ctxguard/ (blob retrieval,
// statistics).
type Local struct {
	// Access says who may use them: "loopback" (default: clients on
	// 127.0.0.0/8 or ::1 only), "any", or "off".
	Access string `yaml:"access"`
	// Hosts lists Host header names they answer besides the loopback
	// ones (localhost, *.localhost, 127.0.0.0/8, [::1]). A request naming
	// any other host is refused, so a web page cannot reach them through
	// DNS rebinding.
	Hosts []string `yaml:"hosts"`
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

// Dashboard configures the live dashboard at /ctxguard/, served like
// every local endpoint (local.access).
type Dashboard struct {
	// Enabled serves it. Default true.
	Enabled bool `yaml:"enabled"`
	// ShowBodies keeps the last requests' bodies, before and after, for
	// the request page (log.dump_bodies does too). Off by default:
	// bodies hold the user's code and data. Keys are never shown.
	ShowBodies bool `yaml:"show_bodies"`
	// Sessions is how many sessions it remembers (the least recently
	// seen go first). Default 200.
	Sessions int `yaml:"sessions"`
	// Requests is how many requests of a session it remembers for the
	// session's chart and table. Default 2000.
	Requests int `yaml:"requests"`
}

// Metrics configures the Prometheus metrics at /metrics, served like
// every local endpoint (local.access).
type Metrics struct {
	// Enabled serves them. Default true.
	Enabled bool `yaml:"enabled"`
}

// Timeouts bound every wait of the proxy. Zero disables one (not
// recommended); negative values are invalid.
type Timeouts struct {
	// RequestHeader bounds reading a request's headers. Default 30s.
	RequestHeader time.Duration `yaml:"request_header"`
	// BodyRead bounds the client's silence while it sends a request
	// body: no byte for this long and the request gets 408. Default 30s.
	BodyRead time.Duration `yaml:"body_read"`
	// BodyMinRate is the slowest average rate, in bytes per second, at
	// which a client may send a body once BodyRead has passed: the body
	// must be complete within BodyRead + size/BodyMinRate. Default 65536
	// (a 32 MiB body within about 9 minutes).
	BodyMinRate int64 `yaml:"body_min_rate"`
	// KeepAlive bounds how long an idle client connection is kept open
	// between requests. Default 5m.
	KeepAlive time.Duration `yaml:"keep_alive"`
	// Dial bounds connecting to the upstream, TLS handshake included.
	// Default 30s.
	Dial time.Duration `yaml:"dial"`
	// UpstreamWrite bounds the upstream's silence while it takes the
	// request body: if it reads nothing of it for this long, the request
	// fails with 504. Default 30s.
	UpstreamWrite time.Duration `yaml:"upstream_write"`
	// ResponseHeader bounds the wait for the upstream's response headers
	// once the request is sent. Default 10m: a non-streamed answer only
	// starts when the model has finished.
	ResponseHeader time.Duration `yaml:"response_header"`
	// Idle bounds the upstream's silence mid-answer (the API sends SSE
	// pings while the model works); time spent waiting for a slow client
	// to take what was already received does not count. Default 5m.
	Idle time.Duration `yaml:"idle"`
	// ClientWrite bounds how long a client may leave an answer unread:
	// if one write to it blocks this long, the answer is cut and the
	// upstream request cancelled. Default 5m.
	ClientWrite time.Duration `yaml:"client_write"`
	// Drain bounds how long "serve", asked to stop (SIGTERM, SIGINT),
	// waits for the requests in flight, streamed answers included: it
	// stops accepting connections at once, lets those requests end, and
	// when the time is up closes what is still open and exits with
	// status 1. Default 30s; 0 waits as long as they take.
	Drain time.Duration `yaml:"drain"`
	// Shutdown is Drain's former name. A file that still sets it sets
	// Drain (setting both is an error) and Warnings asks to rename it;
	// YAML never prints it.
	//
	// Deprecated: use Drain.
	Shutdown *time.Duration `yaml:"shutdown,omitempty"`
}

// Limits bound the memory ctxguard holds.
type Limits struct {
	// MaxBuffered caps the request bytes held in memory at once, across
	// all requests (bodies as received, decoded and rewritten). A request
	// that would go over it is answered with the API's overloaded error
	// (529, with Retry-After) instead. Default 128 MiB (four bodies of
	// the maximum size).
	MaxBuffered int64 `yaml:"max_buffered"`
	// Sessions caps how many sessions' last requests are remembered for
	// incremental rewrites. Default 32.
	Sessions int `yaml:"sessions"`
	// SessionMemory caps the bytes those memories hold together; the
	// least recently used go first. Default 64 MiB.
	SessionMemory int64 `yaml:"session_memory"`
	// SessionIdle is how long a session's memory is kept after its last
	// request. Default 5m.
	SessionIdle time.Duration `yaml:"session_idle"`
	// MemoryStore caps the bytes of blobs kept in memory when the data
	// directory cannot be written (read-only file system, no permission)
	// and ctxguard serves without persistence. Default 128 MiB.
	MemoryStore int64 `yaml:"memory_store"`
	// StoreBlob is the largest blob a Redis store (see Config.Store)
	// keeps, in bytes, since Redis holds values in memory: storing a
	// larger one is an error (store.ErrTooLarge), and the request that
	// needed it goes upstream unchanged (fail open). Default 16 MiB.
	StoreBlob int64 `yaml:"store_blob"`
}

// Defaults returns the configuration ctxguard runs with when given none.
func Defaults() Config {
	return Config{
		Listen:    "127.0.0.1:8787",
		Upstreams: Upstreams{Anthropic: "https://api.anthropic.com", OpenAI: "https://api.openai.com", Gemini: "https://generativelanguage.googleapis.com"},
		MaxBody:   32 << 20,
		DataDir:   defaultDataDir(),
		BlobTTL:   7 * 24 * time.Hour,
		Local:     Local{Access: "loopback"},
		Log:       Log{Level: "info", Format: "text"},
		Dashboard: Dashboard{Enabled: true, Sessions: 200, Requests: 2000},
		Metrics:   Metrics{Enabled: true},
		Timeouts:  DefaultTimeouts(),
		Limits: Limits{
			MaxBuffered:   128 << 20,
			Sessions:      32,
			SessionMemory: 64 << 20,
			SessionIdle:   5 * time.Minute,
			MemoryStore:   128 << 20,
			StoreBlob:     redisstore.DefaultMaxBlob,
		},
		Models: model.Defaults(),
		Passes: pass.Defaults(),
	}
}

// DefaultTimeouts returns the timeouts ctxguard runs with when given none.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		RequestHeader:  30 * time.Second,
		BodyRead:       30 * time.Second,
		BodyMinRate:    64 << 10,
		KeepAlive:      5 * time.Minute,
		Dial:           30 * time.Second,
		UpstreamWrite:  30 * time.Second,
		ResponseHeader: 10 * time.Minute,
		Idle:           5 * time.Minute,
		ClientWrite:    5 * time.Minute,
		Drain:          30 * time.Second,
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
	prevShutdown := cfg.Timeouts.Shutdown
	cfg.Timeouts.Shutdown = nil
	if err := decode(cfg, b, name); err != nil {
		return err
	}
	if cfg.Timeouts.Shutdown == nil {
		cfg.Timeouts.Shutdown = prevShutdown
		return nil
	}
	// The deprecated timeouts.shutdown: it means timeouts.drain.
	var probe struct {
		Timeouts struct {
			Drain *time.Duration `yaml:"drain"`
		} `yaml:"timeouts"`
	}
	if yaml.Unmarshal(b, &probe) == nil && probe.Timeouts.Drain != nil {
		return fmt.Errorf("%s: timeouts: both drain and shutdown (its former name) are set; keep drain only", name)
	}
	cfg.Timeouts.Drain = *cfg.Timeouts.Shutdown
	return nil
}

// Warnings returns what a configuration file should change although it
// loads: deprecated keys, with their new names.
func (c Config) Warnings() []string {
	var w []string
	if c.Timeouts.Shutdown != nil {
		w = append(w, "timeouts.shutdown is deprecated: rename it timeouts.drain (same meaning)")
	}
	return w
}

func decode(cfg *Config, b []byte, name string) error {
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
					line, _ := strconv.Atoi(m[1])
					e = unknownKey(b, line, m[2])
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
	return typoThresholds(b, name)
}

// ApplyEnv applies CTXGUARD_LISTEN, CTXGUARD_UPSTREAM, CTXGUARD_DATA_DIR
// and CTXGUARD_AUTH_TOKEN from getenv.
func (c *Config) ApplyEnv(getenv func(string) string) {
	if v := getenv("CTXGUARD_AUTH_TOKEN"); v != "" {
		c.AuthToken = v
	}
	if v := getenv("CTXGUARD_LISTEN"); v != "" {
		c.Listen = v
	}
	if v := getenv("CTXGUARD_UPSTREAM"); v != "" {
		c.Upstreams = AllUpstreams(v)
	}
	if v := getenv("CTXGUARD_DATA_DIR"); v != "" {
		c.DataDir = v
	}
}

// Redacted is what YAML prints in place of a secret. Validate refuses it
// as a value, so a printed configuration reused as a file cannot run
// with it by mistake.
const Redacted = "<redacted>"

// YAML renders c as the YAML that Load would read back to the same
// configuration, except for secrets: the auth token and any password in
// the upstream URL are printed as Redacted.
func (c Config) YAML() ([]byte, error) {
	c.Timeouts.Shutdown = nil // read as Drain, printed as Drain
	if c.AuthToken != "" {
		c.AuthToken = Redacted
	}
	c.Upstreams = Upstreams{Anthropic: RedactURL(c.Upstreams.Anthropic), OpenAI: RedactURL(c.Upstreams.OpenAI), Gemini: RedactURL(c.Upstreams.Gemini)}
	if c.Store != "" {
		c.Store = RedactURL(c.Store)
	}
	routes := make(map[string]string, len(c.Routes))
	for k, v := range c.Routes {
		routes[k] = RedactURL(v)
	}
	c.Routes = routes
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	enc.Close()
	return buf.Bytes(), nil
}

// RedactURL returns u with any password replaced by "xxxxx" (and a user
// name alone kept); a string that does not parse as a URL is returned as
// "<unparsable URL>", since it may hold a secret.
func RedactURL(u string) string { return baseurl.Redact(u) }

// LoopbackHost reports whether host (a host name or IP address, without
// port or brackets) names this machine only: "localhost", a name under
// ".localhost", or a loopback address.
func LoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// LocalAddr returns the address a client on this machine reaches a
// listener at listen on: an unspecified host (0.0.0.0, ::, none) becomes
// 127.0.0.1.
func LocalAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// ExpandPaths expands "~" (the user's home) at the start of path fields
// (data_dir) and $VAR or ${VAR} anywhere in them. A variable that is not
// set is an error naming it, rather than an empty string that would move
// the path somewhere else.
func (c *Config) ExpandPaths() error {
	p, err := ExpandPath(c.DataDir, os.LookupEnv, os.UserHomeDir)
	if err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	c.DataDir = p
	return nil
}

// ExpandPath expands a leading "~" or "~/" with home() and $VAR or ${VAR}
// with lookup. "~user" forms are not supported and are an error; "$$"
// is a literal "$".
func ExpandPath(p string, lookup func(string) (string, bool), home func() (string, error)) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		h, err := home()
		if err != nil || h == "" {
			return "", fmt.Errorf("%q: no home directory to expand ~ with", p)
		}
		p = h + p[1:]
	} else if strings.HasPrefix(p, "~") {
		return "", fmt.Errorf("%q: ~user is not supported; write the path out", p)
	}
	if !strings.Contains(p, "$") {
		return p, nil
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '$' {
			b.WriteByte(p[i])
			continue
		}
		if i+1 < len(p) && p[i+1] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		var name string
		if i+1 < len(p) && p[i+1] == '{' {
			end := strings.IndexByte(p[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("%q: unclosed ${", p)
			}
			name = p[i+2 : i+2+end]
			i += 2 + end
		} else {
			j := i + 1
			for j < len(p) && (p[j] == '_' || p[j] >= 'a' && p[j] <= 'z' || p[j] >= 'A' && p[j] <= 'Z' || p[j] >= '0' && p[j] <= '9') {
				j++
			}
			name = p[i+1 : j]
			i = j - 1
		}
		if name == "" {
			return "", fmt.Errorf("%q: $ without a variable name (write $$ for a literal $)", p)
		}
		v, ok := lookup(name)
		if !ok {
			return "", fmt.Errorf("%q: environment variable %s is not set", p, name)
		}
		b.WriteString(v)
	}
	return b.String(), nil
}
