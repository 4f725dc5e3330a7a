package dashboard

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// The live stream. Observe hands every subscriber a short note (the
// request's number and session) without waiting: a subscriber whose
// buffer is full misses it, which costs nothing since a page refetches
// the whole state on any note, and polls as well. Every stream is
// bounded: a heartbeat comment keeps idle connections alive and shows a
// dead one, a write that takes longer than writeTimeout ends the stream,
// and a stream ends after streamFor (EventSource reconnects by itself).
const (
	maxSubscribers = 16
	subBuffer      = 16
	heartbeat      = 15 * time.Second
	writeTimeout   = 10 * time.Second
	streamFor      = 10 * time.Minute
)

// event is the note sent for each exchange.
type event struct {
	Seq     uint64 `json:"seq"`
	Session string `json:"session,omitempty"` // "" when listed in none
}

// subscribers is the set of live streams.
type subscribers struct {
	mu      sync.Mutex
	set     map[chan event]struct{}
	dropped uint64 // notes not delivered to a full subscriber
}

func (s *subscribers) init() { s.set = map[chan event]struct{}{} }

// subscribe adds a subscriber, or returns nil when there are
// maxSubscribers already.
func (s *subscribers) subscribe() chan event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.set) >= maxSubscribers {
		return nil
	}
	c := make(chan event, subBuffer)
	s.set[c] = struct{}{}
	return c
}

func (s *subscribers) unsubscribe(c chan event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.set, c)
}

// publish offers e to every subscriber, never blocking.
func (s *subscribers) publish(e event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.set {
		select {
		case c <- e:
		default:
			s.dropped++
		}
	}
}

// serveEvents streams notes as Server-Sent Events ("event: exchange",
// data {"seq":N,"session":"key"}).
func (d *Dashboard) serveEvents(w http.ResponseWriter, r *http.Request) error {
	c := d.subs.subscribe()
	if c == nil {
		return errBusy
	}
	defer d.subs.unsubscribe(c)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	write := func(s string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := w.Write([]byte(s)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write("retry: 3000\n: ctxguard\n\n") {
		return nil
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	end := time.NewTimer(streamFor)
	defer end.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case <-end.C:
			return nil
		case <-tick.C:
			if !write(": ping\n\n") {
				return nil
			}
		case e := <-c:
			b, _ := json.Marshal(e)
			if !write("event: exchange\ndata: " + string(b) + "\n\n") {
				return nil
			}
		}
	}
}
