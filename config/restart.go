package config

import (
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/ctxguard/ctxguard/pass"
)

// restartSetting is a setting a running ctxguard cannot change, by key,
// with how to copy it from a running configuration.
type restartSetting struct {
	key  string
	keep func(run Config, next *Config) bool // copies; reports whether it differed
}

// restartOnly are Config's own restart-only settings; the passes' follow
// (passRestartOnly).
var restartOnly = []restartSetting{
	// The listener.
	{"listen", keep(func(c *Config) *string { return &c.Listen })},
	{"timeouts.request_header", keep(func(c *Config) *time.Duration { return &c.Timeouts.RequestHeader })},
	{"timeouts.keep_alive", keep(func(c *Config) *time.Duration { return &c.Timeouts.KeepAlive })},
	// The store.
	{"store", keep(func(c *Config) *string { return &c.Store })},
	{"data_dir", keep(func(c *Config) *string { return &c.DataDir })},
	{"blob_ttl", keep(func(c *Config) *time.Duration { return &c.BlobTTL })},
	{"limits.memory_store", keep(func(c *Config) *int64 { return &c.Limits.MemoryStore })},
	{"limits.store_blob", keep(func(c *Config) *int64 { return &c.Limits.StoreBlob })},
	// The sessions' memory.
	{"limits.sessions", keep(func(c *Config) *int { return &c.Limits.Sessions })},
	{"limits.session_memory", keep(func(c *Config) *int64 { return &c.Limits.SessionMemory })},
	{"limits.session_idle", keep(func(c *Config) *time.Duration { return &c.Limits.SessionIdle })},
	// The observers, mounted once, and the log's shape.
	{"dashboard", keep(func(c *Config) *Dashboard { return &c.Dashboard })},
	{"metrics", keep(func(c *Config) *Metrics { return &c.Metrics })},
	{"log.format", keep(func(c *Config) *string { return &c.Log.Format })},
}

func keep[T comparable](field func(*Config) *T) func(Config, *Config) bool {
	return func(run Config, next *Config) bool {
		r, n := field(&run), field(next)
		if *r == *n {
			return false
		}
		*n = *r
		return true
	}
}

// allRestartOnly returns every restart-only setting: Config's, then the
// passes'.
func allRestartOnly() []restartSetting {
	return append(slices.Clip(restartOnly), passRestartOnly()...)
}

// RestartOnly lists the settings a running ctxguard cannot change, which
// a reload keeps (KeepRestartOnly): the listener (listen,
// timeouts.request_header, timeouts.keep_alive), the store (store,
// data_dir, blob_ttl, limits.memory_store, limits.store_blob), the
// sessions' memory (limits.sessions, limits.session_memory,
// limits.session_idle), the dashboard, the metrics and log.format; then
// the passes' (pass.Module.RestartOnly: thinking_guard.ttl and
// thinking_guard.max_entries, the thinking guard's memory).
func RestartOnly() []string {
	var keys []string
	for _, r := range allRestartOnly() {
		keys = append(keys, r.key)
	}
	return keys
}

// KeepRestartOnly sets next's restart-only settings (RestartOnly) to
// their value in running and returns the keys of those that differed.
func KeepRestartOnly(running Config, next *Config) []string {
	var kept []string
	for _, r := range allRestartOnly() {
		if r.keep(running, next) {
			kept = append(kept, r.key)
		}
	}
	return kept
}

// Changed returns the top-level keys (listen, upstreams, compress, ...)
// whose values differ between a and b, in the order the file lists them.
// It names keys only, never values, so it may be logged.
func Changed(a, b Config) []string {
	a.Timeouts.Shutdown, b.Timeouts.Shutdown = nil, nil // read as Drain
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var keys []string
	for i := range va.NumField() {
		key, _, _ := strings.Cut(va.Type().Field(i).Tag.Get("yaml"), ",")
		if key != "-" && !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			keys = append(keys, key)
		}
	}
	for _, m := range pass.Modules() {
		x, _ := a.Passes.Lookup(m.Key)
		y, _ := b.Passes.Lookup(m.Key)
		if !reflect.DeepEqual(x, y) {
			keys = append(keys, m.Key)
		}
	}
	return keys
}
