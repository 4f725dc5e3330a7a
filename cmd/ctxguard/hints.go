package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/launch"
)

// baseURL is the URL clients reach serve at: public_url when set, else
// the local address of the listener.
func baseURL(cfg config.Config) string {
	if cfg.PublicURL != "" {
		return cfg.PublicURL
	}
	return "http://" + config.LocalAddr(cfg.Listen)
}

// clientHints is what serve prints when it starts: for each client, the
// line that points it at ctxguard for that process only, as `ctxguard run`
// does it (launch.Point: a variable to set or a flag to pass; no file of
// the client's is edited), the line that starts it through ctxguard run,
// the routes, and the dashboard's URL.
func clientHints(cfg config.Config) string {
	base := baseURL(cfg)
	line := func(k launch.Kind, command string) string {
		s := launch.Point(k, nil, nil, base, "")
		words := append(slices.Clone(s.Vars), command)
		for _, a := range s.Args {
			words = append(words, shellQuote(a))
		}
		return strings.Join(words, " ")
	}
	sdk := launch.Point(launch.Other, nil, nil, base, "")
	run := "ctxguard run claude (or codex, opencode, gemini, -- any command)"
	if cfg.PublicURL == "" && cfg.Listen != config.Defaults().Listen {
		run = "ctxguard run --listen " + cfg.Listen + " claude (or codex, opencode, gemini, -- any command)"
	}
	rows := [][2]string{
		{"Claude Code", line(launch.Claude, "claude")},
		{"Codex CLI", line(launch.Codex, "codex")},
		{"opencode", line(launch.Opencode, "opencode")},
		{"Gemini CLI", line(launch.Gemini, "gemini")},
		{"the SDKs", "export " + strings.Join(sdk.Vars, " ")},
		{"or, any of them", run},
	}
	if cfg.PublicURL != "" {
		rows = rows[:len(rows)-1] // run starts or finds a ctxguard on this machine
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Routes)) {
		rows = append(rows, [2]string{"route " + name, "base URL " + base + config.RoutePrefix(name) + "/v1 (to " + config.RedactURL(cfg.Routes[name]) + ")"})
	}
	width := 0
	for _, r := range rows {
		width = max(width, len(r[0]))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ctxguard serves on %s. Point a client at it:\n", base)
	for _, r := range rows {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, r[0], r[1])
	}
	if cfg.AuthToken != "" {
		b.WriteString("Every request must carry the auth token in X-Ctxguard-Token (Claude Code: ANTHROPIC_CUSTOM_HEADERS='X-Ctxguard-Token: <token>'; ctxguard run sets it).\n")
	}
	switch {
	case !cfg.Dashboard.Enabled:
		b.WriteString("Dashboard: off (dashboard.enabled: false)\n")
	case cfg.Local.Access == "off":
		b.WriteString("Dashboard: off (local.access: off)\n")
	default:
		fmt.Fprintf(&b, "Dashboard: %s/ctxguard/\n", base)
	}
	return b.String()
}

// shellQuote returns s as one shell word: as it is when it holds only
// characters no shell treats specially, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// probeTimeout bounds the start-up check of each upstream: resolving its
// host and opening a TCP connection.
const probeTimeout = 3 * time.Second

// prober checks at start-up that the upstreams can be reached.
type prober struct {
	// dial opens a connection (net.Dialer.DialContext).
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// proxy says which proxy, if any, a request to the upstream goes
	// through (http.ProxyFromEnvironment, as the proxy's transport).
	proxy func(*http.Request) (*url.URL, error)
	// timeout bounds each check.
	timeout time.Duration
}

// probeUpstreams checks, for every distinct upstream host of cfg (the
// APIs' and the routes'), that its name resolves and that a TCP
// connection opens within p.timeout, all at once; for an upstream reached
// through an HTTP proxy, the proxy's. It logs a warning for each that
// fails and never stops serve: the network may come later. It returns
// when every check has ended, at most p.timeout after it was called, or
// at once when ctx ends.
func (p prober) probeUpstreams(ctx context.Context, cfg config.Config, log *slog.Logger) {
	keys := map[string][]string{} // host:port -> the settings naming it
	add := func(key, raw string) {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return
		}
		if pu, err := p.proxy(&http.Request{URL: u}); err == nil && pu != nil && pu.Host != "" {
			key += " (through the proxy " + pu.Redacted() + ")"
			u = pu
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443", "socks5": "1080"}[u.Scheme]
		}
		addr := net.JoinHostPort(u.Hostname(), port)
		keys[addr] = append(keys[addr], key)
	}
	add("upstreams.anthropic", cfg.Upstreams.Anthropic)
	add("upstreams.openai", cfg.Upstreams.OpenAI)
	add("upstreams.gemini", cfg.Upstreams.Gemini)
	for _, name := range slices.Sorted(maps.Keys(cfg.Routes)) {
		add("routes."+name, cfg.Routes[name])
	}
	var wg sync.WaitGroup
	for _, addr := range slices.Sorted(maps.Keys(keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dctx, cancel := context.WithTimeout(ctx, p.timeout)
			defer cancel()
			c, err := p.dial(dctx, "tcp", addr)
			if err == nil {
				c.Close()
				log.Debug("upstream reachable", "addr", addr, "for", strings.Join(keys[addr], ", "))
				return
			}
			if ctx.Err() != nil {
				return // serve is stopping
			}
			log.Warn("upstream unreachable at start-up: requests to it fail until it can be reached; serving anyway (the network may come later)",
				"addr", addr, "for", strings.Join(keys[addr], ", "), "err", err)
		}()
	}
	wg.Wait()
}
