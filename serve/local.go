package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/dashboard"
	"github.com/ctxguard/ctxguard/internal/breaker"
	"github.com/ctxguard/ctxguard/metrics"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/proxy"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/summarize"
)

// Local returns the handler of ctxguard's own endpoints, which the proxy
// (Handler) serves instead of forwarding:
//
//	GET /ctxguard/v1/blobs/{id}   removed content, as text
//	GET /ctxguard/v1/blobs/{id}/{sig}  the same, by a signed link (auth_token)
//	GET, POST /ctxguard/signin    the dashboard's sign-in (auth_token)
//	GET /ctxguard/v1/stats        counters, as JSON
//	GET /ctxguard/v1/sessions     per-session statistics, as JSON
//	/ctxguard/                    the dashboard (dashboard.enabled)
//	GET /metrics                  Prometheus metrics (metrics.enabled)
//	GET /healthz                  200 while the process serves, with the
//	                              process id in X-Ctxguard-Pid (how
//	                              `ctxguard run` knows a ctxguard)
//	GET /readyz                   200 when the store answers, else 503
//
// The dashboard and the metrics subscribe to the records (Records) when
// Local is first called; a Guard used only in process pays for neither.
//
// They are served to loopback clients only unless local.access is "any",
// and not at all when it is "off"; whatever the access, only to requests
// whose Host names this machine (or a name in local.hosts), so that a web
// page cannot read them through DNS rebinding. Handlers return errors;
// protocol.Write renders them in the shape of the API whose client asks,
// as its headers say (protocol.Pick: an Anthropic SDK's anthropic-version,
// say), or, when no protocol claims the request (a browser, curl), as
// neutral JSON: {"error":{"message":...,"id":...}}.
//
// Every answer, errors and redirects included, carries
// X-Content-Type-Options: nosniff (set here, once, before any handler
// runs) and the Content-Type of what it is; a browser never guesses.
func (s *Server) Local() http.Handler {
	s.localOnce.Do(func() { s.localMux, s.localRoutes = s.local() })
	return s.localMux
}

// local builds the local endpoints' handler, and returns the patterns
// it serves.
func (s *Server) local() (http.Handler, []string) {
	mux := http.NewServeMux()
	var routes []string
	serve := func(pattern string, h func(http.ResponseWriter, *http.Request) error, access bool) {
		routes = append(routes, pattern)
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			var err error
			if access {
				err = s.localAccess(r)
			}
			if err == nil {
				err = h(w, r)
			}
			if err != nil {
				// In the shape of the API whose client asks (an SDK's
				// headers say), else neutral JSON.
				protocol.Write(r.Context(), w, s.log, protocol.Pick(s.protocols, r.Method, r.URL.Path, r.Header), err)
			}
		})
	}
	handle := func(pattern string, h func(http.ResponseWriter, *http.Request) error) { serve(pattern, h, true) }
	// The probes answer anyone: a load balancer's probe comes from
	// elsewhere and carries no token, and they tell only up or down.
	serve("GET /healthz", func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set(proxy.PidHeader, strconv.Itoa(os.Getpid()))
		return text(w, "ok\n")
	}, false)
	serve("GET /readyz", func(w http.ResponseWriter, r *http.Request) error {
		if err := s.Ready(r.Context()); err != nil {
			return err
		}
		return text(w, "ready\n")
	}, false)
	handle("GET /ctxguard/v1/blobs/{id}", s.serveBlob)
	handle("GET /ctxguard/v1/blobs/{id}/{sig}", s.serveSignedBlob)
	handle("GET "+signInPath, s.serveSignInPage)
	handle("POST "+signInPath, s.signIn)
	handle("GET /ctxguard/v1/stats", s.serveStats)
	s.mountObservers(handle)
	handle("GET /ctxguard/v1/sessions", func(w http.ResponseWriter, r *http.Request) error {
		return writeJSON(w, s.obs.Sessions.List())
	})
	handle("/", func(http.ResponseWriter, *http.Request) error {
		return protocol.Errorf(http.StatusNotFound, protocol.NotFound, nil, "no such ctxguard endpoint")
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		mux.ServeHTTP(w, r)
	}), routes
}

// text answers s as plain text.
func text(w http.ResponseWriter, s string) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, err := io.WriteString(w, s)
	return err
}

// writeJSON answers v as JSON. An error encoding it is reported before
// anything was written.
func writeJSON(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, err = w.Write(append(b, '\n'))
	return err
}

// Ready reports whether the server can serve: its store answers.
func (s *Server) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, store.CallTimeout)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		return protocol.Errorf(http.StatusServiceUnavailable, protocol.Overloaded, err, "ctxguard: the store does not answer")
	}
	return nil
}

// localAccess applies local.access and local.hosts to every /ctxguard/
// endpoint.
func (s *Server) localAccess(r *http.Request) error {
	access := s.engine.Config().Local.Access
	if access == "off" {
		return protocol.Errorf(http.StatusForbidden, protocol.Permission, nil, "ctxguard: local endpoints are off (local.access: off)")
	}
	if !s.localHost(r.Host) {
		return protocol.Errorf(http.StatusForbidden, protocol.Permission, fmt.Errorf("host %q", r.Host),
			"ctxguard: local endpoints answer only requests to this machine's own names; add the host name to local.hosts to allow it")
	}
	if access == "loopback" && !loopback(r.RemoteAddr) {
		return protocol.Errorf(http.StatusForbidden, protocol.Permission, nil, "ctxguard: served to loopback clients only")
	}
	return nil
}

// localHost reports whether a Host header (name or address, with or
// without port, IPv6 in brackets) is a loopback name or in local.hosts.
func (s *Server) localHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if host == "" {
		return false
	}
	if config.LoopbackHost(host) {
		return true
	}
	host = strings.TrimSuffix(host, ".")
	for _, h := range s.engine.Config().Local.Hosts {
		if strings.EqualFold(host, strings.TrimSuffix(h, ".")) {
			return true
		}
	}
	return false
}

func (s *Server) serveBlob(w http.ResponseWriter, r *http.Request) error {
	id := strings.TrimSuffix(r.PathValue("id"), ".txt")
	if !store.ValidID(id) {
		return protocol.Errorf(http.StatusBadRequest, protocol.InvalidRequest, nil, "ctxguard: invalid blob id")
	}
	return s.writeBlob(w, r, id)
}

// writeBlob answers with blob id, as text.
func (s *Server) writeBlob(w http.ResponseWriter, r *http.Request, id string) error {
	rc, err := s.store.OpenBlob(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return protocol.Errorf(http.StatusNotFound, protocol.NotFound, nil, "ctxguard: no such blob (it may have expired)")
	}
	if errors.Is(err, store.ErrUnavailable) {
		return protocol.Errorf(http.StatusServiceUnavailable, protocol.Overloaded, err, "ctxguard: the store does not answer; try again later")
	}
	if err != nil {
		return protocol.Errorf(http.StatusInternalServerError, protocol.Internal, err, "ctxguard: blob read failed")
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, err = io.Copy(w, rc)
	if err != nil {
		s.log.Debug("blob write", "err", err)
	}
	return nil
}

func (s *Server) serveStats(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, s.obs.Stats.Counters())
}

func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// summarizerBreakers returns the state of the summarizer's circuit
// breakers, one per upstream and model it called; none for a summarizer
// without them (WithSummarizer's, or none).
func (s *Server) summarizerBreakers() []summarize.BreakerStatus {
	if c, ok := s.engine.Summarizer().(interface {
		Breakers() []summarize.BreakerStatus
	}); ok {
		return c.Breakers()
	}
	return nil
}

// mountObservers subscribes the metrics and the dashboard to the records
// and serves them, as configured.
func (s *Server) mountObservers(handle func(string, func(http.ResponseWriter, *http.Request) error)) {
	serve := func(h http.Handler) func(http.ResponseWriter, *http.Request) error {
		return func(w http.ResponseWriter, r *http.Request) error { h.ServeHTTP(w, r); return nil }
	}
	if s.cfg.Metrics.Enabled {
		m := metrics.New()
		m.SetBreakers("summarizer", func() []breaker.Status {
			var out []breaker.Status
			for _, b := range s.summarizerBreakers() {
				out = append(out, b.Status)
			}
			return out
		})
		s.engine.Records().Subscribe(m)
		handle("GET /metrics", serve(m.Handler()))
	}
	if s.cfg.Dashboard.Enabled {
		d := dashboard.New(dashboard.Options{
			Now:        s.now,
			ShowBodies: s.cfg.Dashboard.ShowBodies || s.cfg.Log.DumpBodies,
			Sessions:   s.cfg.Dashboard.Sessions,
			Requests:   s.cfg.Dashboard.Requests,
			Config:     func() []byte { b, _ := s.engine.Config().YAML(); return b },
			Model:      func(id string) model.Info { return s.engine.Model(id) },
			Summary: func(key string) (string, error) {
				ctx, cancel := store.CallContext()
				defer cancel()
				r, err := compact.ReadRecord(ctx, s.store, key)
				return r.Text, err
			},
			BlobURL: func(id string) string { return "/ctxguard/v1/blobs/" + id },
			Breakers: func() []dashboard.BreakerView {
				var out []dashboard.BreakerView
				for _, b := range s.summarizerBreakers() {
					v := dashboard.BreakerView{Dependency: "summarizer", Upstream: b.Upstream, Model: b.Model, State: b.State.String(),
						Since: b.Since, Fails: b.Fails, Trips: b.Trips, Refused: b.Refused}
					if b.Err != nil {
						v.Error = b.Err.Error()
					}
					if !b.Until.IsZero() {
						v.Until = &b.Until
					}
					out = append(out, v)
				}
				return out
			},
			Store: s.store,
			Log:   s.log,
		})
		s.dash.Store(d)
		s.engine.Records().Subscribe(d)
		d.Register(handle)
	}
}
