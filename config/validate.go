package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ctxguard/ctxguard/internal/baseurl"
	redisstore "github.com/ctxguard/ctxguard/store/redis"
)

var routeName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// httpURL reports whether u is an http or https URL with a host.
func httpURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != ""
}

// RoutePrefix is the path prefix of the named route.
func RoutePrefix(name string) string { return "/x/" + name }

// minTokenLen is the shortest auth token accepted.
const minTokenLen = 16

// Validate reports every problem in c, joined, or nil.
func (c Config) Validate() error {
	var errs []error
	if host, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen: %q: %v", c.Listen, err))
	} else if !LoopbackHost(host) && c.AuthToken == "" {
		errs = append(errs, fmt.Errorf("listen: %s can be reached from other machines; set auth_token (or CTXGUARD_AUTH_TOKEN) so that only clients sending it in X-Ctxguard-Token are served, or listen on 127.0.0.1", c.Listen))
	}
	switch {
	case c.AuthToken == Redacted:
		errs = append(errs, fmt.Errorf("auth_token: %q is what `ctxguard config` prints in place of the token, not a token", Redacted))
	case c.AuthToken != "" && len(c.AuthToken) < minTokenLen:
		errs = append(errs, fmt.Errorf("auth_token: %d characters; use at least %d", len(c.AuthToken), minTokenLen))
	case strings.ContainsAny(c.AuthToken, "\r\n\x00"):
		errs = append(errs, errors.New("auth_token: holds a line break or NUL; it must fit in an HTTP header"))
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || !httpURL(c.PublicURL) || u.RawQuery != "" || u.Fragment != "" || u.User != nil || strings.HasSuffix(c.PublicURL, "/") {
			errs = append(errs, fmt.Errorf("public_url: %q must be an http(s) URL without credentials, query, fragment or trailing slash", RedactURL(c.PublicURL)))
		}
	}
	upstreams := []struct{ key, url string }{{"upstreams.anthropic", c.Upstreams.Anthropic}, {"upstreams.openai", c.Upstreams.OpenAI}, {"upstreams.gemini", c.Upstreams.Gemini}}
	if c.Upstreams == AllUpstreams(c.Upstreams.Anthropic) {
		// One URL for all (--upstream, CTXGUARD_UPSTREAM): one error.
		upstreams = []struct{ key, url string }{{"upstreams.anthropic, upstreams.openai and upstreams.gemini", c.Upstreams.Anthropic}}
	}
	for _, up := range upstreams {
		if !httpURL(up.url) {
			errs = append(errs, fmt.Errorf("%s: %q is not an http(s) URL", up.key, RedactURL(up.url)))
		} else if err := baseurl.Check(up.key, up.url); err != nil {
			errs = append(errs, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Routes)) {
		u := c.Routes[name]
		if !routeName.MatchString(name) {
			errs = append(errs, fmt.Errorf("routes: %q: a name is letters, digits, '-', '_' and '.'", name))
		}
		if !httpURL(u) {
			errs = append(errs, fmt.Errorf("routes.%s: %q is not an http(s) URL", name, RedactURL(u)))
		} else if err := baseurl.Check("routes."+name, u); err != nil {
			errs = append(errs, err)
		}
	}
	if c.MaxBody <= 0 {
		errs = append(errs, fmt.Errorf("max_body: %d must be positive", c.MaxBody))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data_dir: empty"))
	}
	if c.Store != "" {
		if err := redisstore.CheckURL(c.Store); err != nil {
			hint := ""
			if strings.Contains(err.Error(), "password") {
				hint = " (" + RedisPasswordEnv + ")"
			}
			errs = append(errs, fmt.Errorf("store: %q: %v%s; empty selects the embedded store in data_dir", RedactURL(c.Store), err, hint))
		}
	}
	if c.BlobTTL < 0 {
		errs = append(errs, fmt.Errorf("blob_ttl: %v is negative", c.BlobTTL))
	}
	switch c.Local.Access {
	case "loopback", "any", "off":
	default:
		errs = append(errs, fmt.Errorf("local.access: %q must be loopback, any or off", c.Local.Access))
	}
	for _, h := range c.Local.Hosts {
		if h == "" || strings.ContainsAny(h, " /:@") {
			errs = append(errs, fmt.Errorf("local.hosts: %q is not a host name", h))
		}
	}
	errs = append(errs, c.Timeouts.validate()...)
	errs = append(errs, c.Limits.validate(c.MaxBody)...)
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log.level: %q must be debug, info, warn or error", c.Log.Level))
	}
	if c.Dashboard.Sessions < 1 || c.Dashboard.Requests < 1 {
		errs = append(errs, fmt.Errorf("dashboard.sessions and dashboard.requests must be at least 1"))
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("log.format: %q must be text or json", c.Log.Format))
	}
	if err := c.Models.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Passes.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (t Timeouts) validate() []error {
	var errs []error
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"request_header", t.RequestHeader}, {"body_read", t.BodyRead}, {"keep_alive", t.KeepAlive},
		{"dial", t.Dial}, {"upstream_write", t.UpstreamWrite}, {"response_header", t.ResponseHeader},
		{"idle", t.Idle}, {"client_write", t.ClientWrite}, {"drain", t.Drain},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("timeouts.%s: %v is negative (0 disables it)", d.name, d.v))
		}
	}
	if t.BodyMinRate < 0 {
		errs = append(errs, fmt.Errorf("timeouts.body_min_rate: %d is negative (0 disables it)", t.BodyMinRate))
	}
	return errs
}

func (l Limits) validate(maxBody int64) []error {
	var errs []error
	if l.MaxBuffered < maxBody {
		errs = append(errs, fmt.Errorf("limits.max_buffered: %d is less than max_body (%d): a body of the maximum size could never be served", l.MaxBuffered, maxBody))
	}
	if l.Sessions < 0 {
		errs = append(errs, fmt.Errorf("limits.sessions: %d is negative (0 remembers none)", l.Sessions))
	}
	if l.SessionMemory < 0 {
		errs = append(errs, fmt.Errorf("limits.session_memory: %d is negative", l.SessionMemory))
	}
	if l.SessionIdle < 0 {
		errs = append(errs, fmt.Errorf("limits.session_idle: %v is negative", l.SessionIdle))
	}
	if l.MemoryStore <= 0 {
		errs = append(errs, fmt.Errorf("limits.memory_store: %d must be positive", l.MemoryStore))
	}
	if l.StoreBlob <= 0 {
		errs = append(errs, fmt.Errorf("limits.store_blob: %d must be positive", l.StoreBlob))
	}
	return errs
}
