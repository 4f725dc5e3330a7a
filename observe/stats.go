package observe

import (
	"sync/atomic"

	"github.com/ctxguard/ctxguard/record"
)

// Stats counts what a Guard did since it started, by the outcome of each
// exchange's record (record.Outcome). It observes the records and is
// counted nowhere else. Safe for concurrent use.
type Stats struct {
	Requests  atomic.Int64 // exchanges recorded: rewritable requests
	Rewritten atomic.Int64 // outcome rewritten: the body sent differed
	Unchanged atomic.Int64 // outcome unchanged (dry runs included)
	Bypassed  atomic.Int64 // outcome bypassed: not rewritten by design (bypass header, bad JSON, other shapes, buffers full)
	Failed    atomic.Int64 // outcome failed_open: a pass failed, the original went
	Recovered atomic.Int64 // outcome recovered: retried compacted after the upstream found it too long, successfully
	// RecoveryFailed counts outcome recovery_failed: the upstream found
	// it too long, and the compacted retry failed too (or there was none).
	RecoveryFailed atomic.Int64
	Refused        atomic.Int64 // outcome refused: ctxguard answered with its own error
	Events         atomic.Int64 // edit events
	Compactions    atomic.Int64 // requests that carried a compaction for the first time
	// Observed counts the usages the calibration took; the calibration
	// observer counts it.
	Observed atomic.Int64
}

// Observe implements record.Observer.
func (s *Stats) Observe(x *record.Exchange) {
	s.Requests.Add(1)
	switch x.Outcome {
	case record.Rewritten:
		s.Rewritten.Add(1)
	case record.Unchanged:
		s.Unchanged.Add(1)
	case record.Bypassed:
		s.Bypassed.Add(1)
	case record.FailedOpen:
		s.Failed.Add(1)
	case record.Recovered:
		s.Recovered.Add(1)
	case record.RecoveryFailed:
		s.RecoveryFailed.Add(1)
	case record.Refused:
		s.Refused.Add(1)
	}
	if x.Event {
		s.Events.Add(1)
	}
	if x.Compaction != "" {
		s.Compactions.Add(1)
	}
}

// Counters returns the counters by the names /ctxguard/v1/stats serves
// them under.
func (s *Stats) Counters() map[string]int64 {
	return map[string]int64{
		"requests": s.Requests.Load(), "rewritten": s.Rewritten.Load(), "unchanged": s.Unchanged.Load(),
		"bypassed": s.Bypassed.Load(), "failed_open": s.Failed.Load(), "recovered": s.Recovered.Load(),
		"recovery_failed": s.RecoveryFailed.Load(), "refused": s.Refused.Load(), "events": s.Events.Load(), "compactions": s.Compactions.Load(),
		"usage_observed": s.Observed.Load(),
	}
}
