package ctxguard

import (
	"encoding/json"
	"sort"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/record"
)

// SessionStats is what ctxguard did to one agent session. It is kept in
// memory, written to the store (record "session/<key>") by Flush, and
// served at /ctxguard/v1/sessions. Nothing a rewrite decides depends on it.
type SessionStats struct {
	Key          string    `json:"key"`
	Model        string    `json:"model,omitempty"`
	Requests     int       `json:"requests"`
	Rewritten    int       `json:"rewritten"`
	Events       int       `json:"events"`
	Failed       int       `json:"failed"`
	TokensBefore int64     `json:"tokens_before"`
	TokensAfter  int64     `json:"tokens_after"`
	LastSeen     time.Time `json:"last_seen"`
}

// sessions tracks SessionStats for the most recently seen sessions.
type sessions struct {
	mu    sync.Mutex
	m     map[string]*SessionStats
	dirty map[string]bool
}

// maxSessions bounds memory; the least recently seen go first.
const maxSessions = 10_000

// record is the session statistics' observer of the exchange records.
func (s *sessions) record(x *record.Exchange) {
	if x.Session == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m, s.dirty = map[string]*SessionStats{}, map[string]bool{}
	}
	st := s.m[x.Session]
	if st == nil {
		if len(s.m) >= maxSessions {
			s.evictLocked()
		}
		st = &SessionStats{Key: x.Session}
		s.m[x.Session] = st
	}
	st.Requests++
	if x.ModelID != "" {
		st.Model = x.ModelID
	}
	st.TokensBefore += int64(x.TokensBefore)
	st.TokensAfter += int64(x.TokensAfter)
	switch x.Outcome {
	case record.Rewritten, record.Recovered:
		st.Rewritten++
	case record.FailedOpen, record.RecoveryFailed:
		st.Failed++
	}
	if x.Event {
		st.Events++
	}
	st.LastSeen = x.Start.Add(x.Total).UTC().Truncate(time.Second)
	s.dirty[x.Session] = true
}

func (s *sessions) evictLocked() {
	var oldest string
	var t time.Time
	for k, v := range s.m {
		if oldest == "" || v.LastSeen.Before(t) {
			oldest, t = k, v.LastSeen
		}
	}
	delete(s.m, oldest)
	delete(s.dirty, oldest)
}

// list returns copies of the stats, most recent first.
func (s *sessions) list() []SessionStats {
	s.mu.Lock()
	out := make([]SessionStats, 0, len(s.m))
	for _, v := range s.m {
		out = append(out, *v)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].LastSeen.Equal(out[j].LastSeen) {
			return out[i].LastSeen.After(out[j].LastSeen)
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// Flush writes the stats of sessions that changed since the last flush,
// the calibration and the dashboard's totals of today to the store.
func (g *Guard) Flush() {
	if d := g.dash.Load(); d != nil {
		ctx, cancel := storeContext()
		err := d.Flush(ctx)
		cancel()
		if err != nil {
			g.log.Warn("saving the dashboard's totals", "err", err)
		}
	}
	s := &g.sessions
	s.mu.Lock()
	var todo []SessionStats
	for k := range s.dirty {
		todo = append(todo, *s.m[k])
	}
	clear(s.dirty)
	s.mu.Unlock()
	for _, st := range todo {
		b, _ := json.Marshal(st)
		ctx, cancel := storeContext()
		err := g.store.Put(ctx, "session/"+st.Key, b)
		cancel()
		if err != nil {
			g.log.Warn("saving session stats", "err", err)
			return
		}
	}
	g.saveCalibration()
}
