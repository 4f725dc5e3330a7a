// Package serve is the HTTP side of ctxguard: the reverse proxy a Guard
// serves (Handler: upstreams, routes, timeouts, auth), its own endpoints
// (Local: blobs, stats, sessions, probes, sign-in, with the metrics and
// the dashboard mounted), the in-process equivalents for Go HTTP clients
// and SDKs (Middleware, Transport), both with overflow recovery, the
// opening of the store (OpenStore) and the housekeeping of a long-running
// process (Maintain).
//
// Contracts. A Server wires an engine.Engine, which rewrites, to the
// network; it decides nothing about a body itself. The proxy calls the
// engine through its hooks (proxy.Rewriter, proxy.Outcome.Recover,
// proxy.Options.Record), never the other way round. A Server is safe for
// concurrent use; what it keeps is bounded: the local endpoints' handler,
// built once, and the dashboard's and metrics' own bounded state. A
// Handler takes the configuration in force when it is built: after a
// reload that HandlerChanged reports, build a new one.
package serve

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/dashboard"
	"github.com/ctxguard/ctxguard/engine"
	"github.com/ctxguard/ctxguard/observe"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/proxy"
	"github.com/ctxguard/ctxguard/store"
)

// Server serves one engine over HTTP. Build it with New.
type Server struct {
	engine    *engine.Engine
	obs       *observe.Set
	protocols []protocol.Protocol
	// cfg is the configuration at New: its restart-only settings
	// (metrics, dashboard) hold for the Server's life.
	cfg   config.Config
	store store.Store
	log   *slog.Logger
	now   func() time.Time

	localOnce   sync.Once
	localMux    http.Handler                        // the local endpoints (Local)
	localRoutes []string                            // the patterns it serves
	dash        atomic.Pointer[dashboard.Dashboard] // the dashboard, once Local mounted it
}

// New returns the Server of e, whose records obs observes, speaking
// protocols (most preferred first).
func New(e *engine.Engine, obs *observe.Set, protocols []protocol.Protocol) *Server {
	return &Server{engine: e, obs: obs, protocols: protocols, cfg: e.Config(), store: e.Store(), log: e.Log(), now: e.Now}
}

// Handler returns the reverse proxy: every request goes to the upstream
// of its protocol's family (or of its named route), rewritable requests
// through the engine, and /ctxguard/ paths are served locally (Local).
// It takes the configuration in force: after a reload that
// HandlerChanged reports, build a new one.
func (s *Server) Handler() (*proxy.Proxy, error) {
	cfg := s.engine.Config()
	ups := map[string]*url.URL{}
	for fam, raw := range cfg.Upstreams.ByFamily() {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("upstreams.%s: %w", fam, err)
		}
		ups[fam] = u
	}
	var routes []proxy.Route
	for name, raw := range cfg.Routes {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("routes.%s: %w", name, err)
		}
		routes = append(routes, proxy.Route{Prefix: config.RoutePrefix(name), Upstream: u})
	}
	return proxy.New(proxy.Options{
		Upstream:    ups["anthropic"],
		Upstreams:   ups,
		Routes:      routes,
		Protocols:   s.protocols,
		MaxBody:     cfg.MaxBody,
		MaxBuffered: cfg.Limits.MaxBuffered,
		AuthToken:   cfg.AuthToken,
		LocalAuth:   s.localAuth,
		SignIn:      signInPath,
		Timeouts:    proxyTimeouts(cfg.Timeouts),
		Logger:      s.log,
		Rewriter:    s.engine,
		Extra:       s.Local(),
		Record:      s.engine.Publish,
		DumpBodies:  cfg.Log.DumpBodies,
	})
}

// proxyTimeouts maps the configuration's timeouts (0 disables one) to the
// proxy's (0 takes the default, negative disables). The others
// (request_header, keep_alive, drain) bound the http.Server, which
// the caller configures.
func proxyTimeouts(t config.Timeouts) proxy.Timeouts {
	return proxy.Timeouts{
		BodyRead:       off(t.BodyRead),
		BodyMinRate:    off(t.BodyMinRate),
		Dial:           off(t.Dial),
		UpstreamWrite:  off(t.UpstreamWrite),
		ResponseHeader: off(t.ResponseHeader),
		Idle:           off(t.Idle),
		ClientWrite:    off(t.ClientWrite),
	}
}

// off maps a configuration's 0 (disabled) to the proxy's -1.
func off[T ~int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// HandlerChanged reports whether a configuration change from a to b
// concerns the proxy (upstreams, routes, max_body, limits.max_buffered,
// auth_token, the proxy's timeouts, log.dump_bodies): a Handler built
// under a keeps a's values.
func HandlerChanged(a, b config.Config) bool {
	return !reflect.DeepEqual(handlerSettings(a), handlerSettings(b))
}

// handlerSettings are the settings Handler builds a proxy with.
func handlerSettings(c config.Config) any {
	return struct {
		ups         config.Upstreams
		routes      map[string]string
		maxBody     int64
		maxBuffered int64
		token       string
		timeouts    any
		dump        bool
	}{c.Upstreams, c.Routes, c.MaxBody, c.Limits.MaxBuffered, c.AuthToken, proxyTimeouts(c.Timeouts), c.Log.DumpBodies}
}

// Flush writes the dashboard's totals of today, the session statistics
// that changed since the last flush and the calibration to the store.
func (s *Server) Flush() {
	if d := s.dash.Load(); d != nil {
		ctx, cancel := store.CallContext()
		err := d.Flush(ctx)
		cancel()
		if err != nil {
			s.log.Warn("saving the dashboard's totals", "err", err)
		}
	}
	s.obs.Flush()
}
