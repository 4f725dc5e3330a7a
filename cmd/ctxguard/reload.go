package main

import (
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/ctxguard/ctxguard"
	"github.com/ctxguard/ctxguard/proxy"
)

// liveProxy serves with the proxy a reload last built; requests in flight
// finish on the one they started on. Each proxy has its own
// limits.max_buffered budget, so while requests of a replaced one are
// still in flight, up to twice that may be buffered.
type liveProxy struct{ p atomic.Pointer[proxy.Proxy] }

func (l *liveProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) { l.p.Load().ServeHTTP(w, r) }

// reloader re-reads serve's configuration on SIGHUP: the same command
// line, so the file, then the environment and the flags, as at start.
type reloader struct {
	args   []string
	listen string // the listen address as configured (port 0 stays 0)
	g      *ctxguard.Guard
	proxy  *liveProxy
	level  *slog.LevelVar
	log    *slog.Logger
}

// reload loads the configuration again and hands it to the Guard. It
// logs one line: reloaded (what changed, and the settings that need a
// restart, kept at their running values) or rejected (why; the running
// configuration stays).
func (r *reloader) reload() {
	var sf serveFlags
	next, err := loadConfig("serve", serveHelp, r.args, io.Discard, &sf, nil)
	var rl ctxguard.Reloaded
	if err == nil {
		if next.Listen == r.listen {
			next.Listen = r.g.Config().Listen // the address bound, e.g. for port 0
		}
		rl, err = r.g.Reload(next)
	}
	if err == nil && rl.Handler {
		var p *proxy.Proxy
		if p, err = r.g.Handler(); err == nil {
			r.proxy.p.Swap(p).Close()
		}
	}
	if err != nil {
		r.log.Error("config reload rejected; the running configuration stays", "err", err)
		return
	}
	_ = r.level.UnmarshalText([]byte(next.Log.Level))
	memoryLimit(r.g.Config().Limits)
	file := sf.file
	if file == "" {
		file = noConfigFile
	}
	attrs := []any{"changed", rl.Changed, "config", file}
	if w := next.Warnings(); len(w) > 0 {
		attrs = append(attrs, "deprecated", w)
	}
	if len(rl.Kept) > 0 {
		r.log.Warn("config reloaded; these settings need a restart and keep their running values", append(attrs, "restart_needed", rl.Kept)...)
		return
	}
	r.log.Info("config reloaded", attrs...)
}
