// Package replay measures what ctxguard does to real sessions: it sends a
// session's request stream through a rewriter, in order, and compares what
// the upstream would receive with what the client sent, in tokens, in
// cache-aware cost, in edit events and in validity.
package replay

import "fmt"

// Rewriter is what a replay sends each request through: the same code the
// proxy runs. It returns the body the upstream would receive.
type Rewriter func(body []byte) ([]byte, error)

// RequestStat is the measurement of one request.
type RequestStat struct {
	OrigBytes, SentBytes   int
	OrigTokens, SentTokens int
	// Cost in base-input-token units: shared prefix with the previous
	// request at 0.1x, the rest at 1.25x.
	OrigCost, SentCost float64
	// The same where the cache hits only at cache_control breakpoints
	// with a 20-block lookback.
	OrigBPCost, SentBPCost float64
	// Event: the sent history is not a prefix extension of the previous
	// sent request.
	Event bool
	// Invalid holds the validator's complaint, if any.
	Invalid error
}

// SessionStat is the measurement of one session.
type SessionStat struct {
	Name     string
	Requests []RequestStat
	// OrigEvents counts breaks in the original stream itself: requests
	// whose history is not an extension of the previous one (a client
	// compaction, a rewind). Rewritten-stream events are judged against
	// it.
	OrigEvents int
}

// Totals sums a session's requests.
type Totals struct {
	Requests               int
	OrigTokens, SentTokens int
	PeakOrig, PeakSent     int
	OrigCost, SentCost     float64
	OrigBPCost, SentBPCost float64
	Events, Invalid        int
	OrigEvents             int // breaks in the original stream (should be 0)
}

// Totals sums the session's requests.
func (s *SessionStat) Totals() Totals {
	var t Totals
	for _, r := range s.Requests {
		t.add(r)
	}
	t.OrigEvents = s.OrigEvents
	return t
}

func (t *Totals) add(r RequestStat) {
	t.Requests++
	t.OrigTokens += r.OrigTokens
	t.SentTokens += r.SentTokens
	t.PeakOrig = max(t.PeakOrig, r.OrigTokens)
	t.PeakSent = max(t.PeakSent, r.SentTokens)
	t.OrigCost += r.OrigCost
	t.SentCost += r.SentCost
	t.OrigBPCost += r.OrigBPCost
	t.SentBPCost += r.SentBPCost
	if r.Event {
		t.Events++
	}
	if r.Invalid != nil {
		t.Invalid++
	}
}

// Merge adds another total into t.
func (t *Totals) Merge(o Totals) {
	t.Requests += o.Requests
	t.OrigTokens += o.OrigTokens
	t.SentTokens += o.SentTokens
	t.PeakOrig = max(t.PeakOrig, o.PeakOrig)
	t.PeakSent = max(t.PeakSent, o.PeakSent)
	t.OrigCost += o.OrigCost
	t.SentCost += o.SentCost
	t.OrigBPCost += o.OrigBPCost
	t.SentBPCost += o.SentBPCost
	t.Events += o.Events
	t.Invalid += o.Invalid
	t.OrigEvents += o.OrigEvents
}

// Ratio returns a/b, or 1 when both are zero.
func Ratio(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return 1
		}
		return 0
	}
	return a / b
}

// Options tune a session run.
type Options struct {
	// Check, if set, judges every rewritten request against its original
	// (validate.Rewrite with the options the pipeline needs).
	Check func(orig, sent []byte) error
}

// Request is one request of a session's stream.
type Request struct {
	Body []byte
	// Reset marks a request whose history restarted (the client
	// compacted): it is not compared with the one before.
	Reset bool
}

// Session sends stream (a session's requests, oldest first) through rw and
// measures every request.
func Session(name string, stream []Request, rw Rewriter, opt Options) (*SessionStat, error) {
	st := &SessionStat{Name: name}
	var prevOrig, prevSent *prompt
	var bpOrig, bpSent breakpointCache
	for i, req := range stream {
		body := req.Body
		if req.Reset {
			prevOrig, prevSent = nil, nil
		}
		sent, err := rw(body)
		if err != nil {
			return st, fmt.Errorf("%s request %d: %w", name, i, err)
		}
		po, err := linearize(body)
		if err != nil {
			return st, fmt.Errorf("%s request %d: original: %w", name, i, err)
		}
		ps, err := linearize(sent)
		if err != nil {
			return st, fmt.Errorf("%s request %d: rewritten: %w", name, i, err)
		}
		r := RequestStat{
			OrigBytes: len(body), SentBytes: len(sent),
			OrigTokens: po.tokens, SentTokens: ps.tokens,
			OrigCost: cost(prevOrig, po), SentCost: cost(prevSent, ps),
			OrigBPCost: bpOrig.cost(po), SentBPCost: bpSent.cost(ps),
		}
		if prevSent != nil {
			_, ext := sharedTokens(prevSent, ps)
			r.Event = !ext
			if _, ext := sharedTokens(prevOrig, po); !ext {
				st.OrigEvents++
			}
		}
		if opt.Check != nil {
			r.Invalid = opt.Check(body, sent)
		}
		st.Requests = append(st.Requests, r)
		prevOrig, prevSent = po, ps
	}
	return st, nil
}
