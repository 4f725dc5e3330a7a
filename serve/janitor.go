package serve

import (
	"context"
	"runtime/debug"
	"time"

	"github.com/ctxguard/ctxguard/store"
)

// Maintain runs the server's housekeeping until ctx ends: every tick (a
// minute, or half of limits.session_idle when that is shorter, at least a
// second) it drops session memories idle for limits.session_idle and,
// once no request came for a whole tick, hands freed memory back to the
// operating system; every hour it flushes statistics and the calibration
// to the store and sweeps expired blobs and records. "serve" runs it; so
// should a program that uses ctxguard in process for hours.
func (s *Server) Maintain(ctx context.Context) {
	t := time.NewTicker(tickEvery(s.cfg.Limits.SessionIdle))
	defer t.Stop()
	var j janitor
	for {
		j.tick(s, s.now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// janitor is Maintain's state between ticks.
type janitor struct {
	lastStore time.Time // the last store sweep
	requests  int64     // the request count at the last tick
	released  bool      // memory was handed back since the last request
	free      func()    // hands memory back; nil means debug.FreeOSMemory, twice
}

// tickEvery is Maintain's tick for a session_idle of idle.
func tickEvery(idle time.Duration) time.Duration {
	return min(time.Minute, max(idle/2, time.Second))
}

// storeSweepEvery is how often Maintain sweeps the store.
const storeSweepEvery = time.Hour

// tick does one round of housekeeping at time now.
func (j *janitor) tick(s *Server, now time.Time) {
	freed := s.engine.SweepSessions()
	if j.lastStore.IsZero() || now.Sub(j.lastStore) >= storeSweepEvery {
		j.lastStore = now
		s.Flush()
		ctx, cancel := store.CallContext()
		n, err := s.store.Sweep(ctx, now)
		cancel()
		if err != nil {
			s.log.Warn("store sweep", "err", err)
		} else if n > 0 {
			s.log.Info("store sweep", "removed", n)
		}
	}
	reqs := s.obs.Stats.Requests.Load()
	if reqs != j.requests {
		j.requests, j.released = reqs, false
		return
	}
	if !j.released || freed > 0 {
		// Idle for a whole tick: what pools and freed memories hold
		// goes back now rather than whenever the next collection runs.
		if j.free != nil {
			j.free()
		} else {
			// Twice, because sync.Pool keeps a victim generation.
			debug.FreeOSMemory()
			debug.FreeOSMemory()
		}
		j.released = true
		s.log.Debug("idle: memory handed back", "memo_bytes_freed", freed)
	}
}
