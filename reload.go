package ctxguard

import (
	"reflect"

	"github.com/ctxguard/ctxguard/config"
)

// Reloaded says what a Reload did.
type Reloaded struct {
	// Changed are the top-level keys whose values changed
	// (config.Changed), now in force. Empty: cfg was the configuration
	// already in force.
	Changed []string
	// Kept are the restart-only settings (config.RestartOnly) that cfg
	// changes and the Guard kept at their running values: they take
	// effect at the next start.
	Kept []string
	// Handler reports that the change concerns the proxy (upstreams,
	// routes, max_body, limits.max_buffered, auth_token, the proxy's
	// timeouts, log.dump_bodies): a Handler built before keeps the old
	// values; build a new one.
	Handler bool
}

// Reload makes cfg the Guard's configuration for the requests that start
// after it returns; those in flight end with the one they started with.
// cfg is checked like New's (paths expanded, Validate), then its
// restart-only settings (config.RestartOnly) are set to the running
// values (Reloaded.Kept names those that differed) and the result is
// validated again. An invalid cfg is an error and changes nothing.
//
// What the Guard learned and counts is kept: the store, the calibration,
// the learned limits, the statistics, the records' observers (dashboard,
// metrics), the thinking guard's signatures. The sessions' memories of
// their previous requests, and what the passes memoized in them, are
// dropped when the configuration changed: the next request of each
// session is rewritten from scratch, to the bytes a restart with cfg
// would give. The compaction pass, and the summaries it is writing, is
// kept when compact's settings, the summarizer, the blob base URL and
// auth_token are unchanged; a replaced one finishes its summaries in the
// background until Close.
func (g *Guard) Reload(cfg config.Config) (Reloaded, error) {
	r, err := g.engine.Reload(cfg)
	if err != nil {
		return Reloaded{}, err
	}
	return Reloaded{Changed: r.Changed, Kept: r.Kept, Handler: len(r.Changed) > 0 && handlerChanged(r.From, r.To)}, nil
}

// handlerChanged reports whether a change from configuration a to b
// concerns the proxy (Reloaded.Handler).
func handlerChanged(a, b config.Config) bool {
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
