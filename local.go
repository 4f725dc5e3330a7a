package ctxguard

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/store"
)

// local serves ctxguard's own endpoints under /ctxguard/:
//
//	GET /ctxguard/v1/blobs/{id}   removed content, as text
//	GET /ctxguard/v1/stats        counters, as JSON
//	GET /ctxguard/v1/sessions     per-session statistics, as JSON
//
// They are served to loopback clients only unless local.access is "any",
// and not at all when it is "off". Handlers return errors;
// anthropic.WriteError renders them.
func (g *Guard) local() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, h func(http.ResponseWriter, *http.Request) error) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			err := g.localAccess(r)
			if err == nil {
				err = h(w, r)
			}
			if err != nil {
				anthropic.WriteError(r.Context(), w, g.log, err)
			}
		})
	}
	handle("GET /ctxguard/v1/blobs/{id}", g.serveBlob)
	handle("GET /ctxguard/v1/stats", g.serveStats)
	handle("GET /ctxguard/v1/sessions", func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(g.sessions.list())
	})
	handle("/", func(http.ResponseWriter, *http.Request) error {
		return anthropic.Errorf(http.StatusNotFound, anthropic.NotFoundError, nil, "no such ctxguard endpoint")
	})
	return mux
}

// localAccess applies local.access to every /ctxguard/ endpoint.
func (g *Guard) localAccess(r *http.Request) error {
	switch g.cfg.Local.Access {
	case "off":
		return anthropic.Errorf(http.StatusForbidden, anthropic.PermissionError, nil, "ctxguard: local endpoints are off (local.access: off)")
	case "loopback":
		if !loopback(r.RemoteAddr) {
			return anthropic.Errorf(http.StatusForbidden, anthropic.PermissionError, nil, "ctxguard: served to loopback clients only")
		}
	}
	return nil
}

func (g *Guard) serveBlob(w http.ResponseWriter, r *http.Request) error {
	id := strings.TrimSuffix(r.PathValue("id"), ".txt")
	if !store.ValidID(id) {
		return anthropic.Errorf(http.StatusBadRequest, anthropic.InvalidRequestError, nil, "ctxguard: invalid blob id")
	}
	rc, err := g.store.OpenBlob(id)
	if errors.Is(err, store.ErrNotFound) {
		return anthropic.Errorf(http.StatusNotFound, anthropic.NotFoundError, nil, "ctxguard: no such blob (it may have expired)")
	}
	if err != nil {
		return anthropic.Errorf(http.StatusInternalServerError, anthropic.APIError, err, "ctxguard: blob read failed")
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, err = io.Copy(w, rc)
	if err != nil {
		g.log.Debug("blob write", "err", err)
	}
	return nil
}

func (g *Guard) serveStats(w http.ResponseWriter, r *http.Request) error {
	s := &g.stats
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(map[string]int64{
		"requests": s.Requests.Load(), "rewritten": s.Rewritten.Load(), "failed": s.Failed.Load(),
		"skipped": s.Bypassed.Load(), "events": s.Events.Load(), "usage_observed": s.Observed.Load(),
	})
}

func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
