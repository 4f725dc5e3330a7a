// Package observe holds the standard subscribers of the record bus
// (record.Bus), which tell what ctxguard did without taking part in it:
// the counters (Stats), the per-session statistics (Sessions), the
// calibration of the token estimator against the usage the API reports
// (Calibration) and the exchange log line (Log). Set bundles them as a
// Guard subscribes them.
//
// Contracts. Each is a record.Observer: it sees every published exchange,
// on the goroutine that published it, and only reads it (an exchange is
// not modified once published); none keeps the record or anything it
// points to. Nothing a rewrite decides depends on what they hold, so
// losing it (a restart) changes no byte sent upstream. What they keep is
// bounded: counters, at most maxSessions session statistics, the
// calibration's per-model figures. Every type here is safe for concurrent
// use.
package observe

import (
	"log/slog"

	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

// Set is the standard subscribers of one Guard.
type Set struct {
	Stats       Stats
	Sessions    Sessions
	Calibration *Calibration
	log         *slog.Logger
}

// NewSet returns the subscribers of a Guard whose store is st, feeding
// calib (see LoadCalibration) and logging to log. Subscribe them.
func NewSet(st store.Store, calib *tokens.Calibration, log *slog.Logger) *Set {
	s := &Set{log: log}
	s.Calibration = &Calibration{Tokens: calib, store: st, log: log, observed: &s.Stats.Observed}
	s.Sessions.store, s.Sessions.log = st, log
	return s
}

// Subscribe subscribes the set to b, in the order a Guard relies on: the
// counters, the session statistics, the calibration, the log line.
func (s *Set) Subscribe(b *record.Bus) {
	b.Subscribe(&s.Stats)
	b.Subscribe(&s.Sessions)
	b.Subscribe(s.Calibration)
	b.Subscribe(Log(s.log))
}

// Flush writes the session statistics that changed since the last flush
// and then, unless the store failed them, the calibration to the store.
func (s *Set) Flush() {
	if s.Sessions.Flush() == nil {
		s.Calibration.Save()
	}
}
