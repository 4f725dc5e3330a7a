package observe

import (
	"encoding/json"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
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

// Sessions tracks SessionStats for the most recently seen sessions (at
// most maxSessions). Make it with NewSet.
type Sessions struct {
	store store.Store
	log   *slog.Logger

	mu    sync.Mutex
	m     map[string]*SessionStats
	dirty map[string]bool // changed since the last Flush
}

// maxSessions bounds memory; the least recently seen go first.
const maxSessions = 10_000

// Observe implements record.Observer.
func (s *Sessions) Observe(x *record.Exchange) {
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

func (s *Sessions) evictLocked() {
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

// List returns copies of the stats, most recent first.
func (s *Sessions) List() []SessionStats {
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

// Flush writes the stats of sessions that changed since the last flush
// to the store. At the first store error it logs a warning, stops and
// returns it: the rest are written when they change again.
func (s *Sessions) Flush() error {
	s.mu.Lock()
	var todo []SessionStats
	for k := range s.dirty {
		todo = append(todo, *s.m[k])
	}
	clear(s.dirty)
	s.mu.Unlock()
	for _, st := range todo {
		b, _ := json.Marshal(st)
		ctx, cancel := store.CallContext()
		err := s.store.Put(ctx, "session/"+st.Key, b)
		cancel()
		if err != nil {
			s.log.Warn("saving session stats", "err", err)
			return err
		}
	}
	return nil
}
