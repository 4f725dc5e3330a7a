package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEventsDelivered: a subscriber of /ctxguard/api/events receives a
// note for each exchange.
func TestEventsDelivered(t *testing.T) {
	d := New(Options{})
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/ctxguard/api/events", nil)
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	rd := bufio.NewReader(res.Body)
	// The stream's preamble comes once the subscription exists.
	if line, err := rd.ReadString('\n'); err != nil || line != "retry: 3000\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	feed(d, ex("h:<a>", 10, 5), ex("", 1, 1))
	var got []event
	for len(got) < 2 {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var e event
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatal(err)
			}
			got = append(got, e)
		}
	}
	// The second is listed in no session.
	if diff := cmp.Diff([]event{{1, "h:<a>"}, {2, ""}}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestSlowSubscriber: a subscriber that reads nothing misses notes but
// never holds up Observe.
func TestSlowSubscriber(t *testing.T) {
	d := New(Options{})
	slow := d.subs.subscribe()
	const n = 10 * subBuffer
	for range n {
		d.Observe(ex("h:a", 1, 1)) // would block forever if Observe waited
	}
	if len(slow) != subBuffer || d.subs.dropped != n-subBuffer {
		t.Errorf("%d notes buffered, %d dropped; want %d, %d", len(slow), d.subs.dropped, subBuffer, n-subBuffer)
	}
	if got := d.Overview().All.Requests; got != n {
		t.Errorf("%d requests counted, want %d", got, n)
	}
}

// TestSubscriberBound: past maxSubscribers a stream is refused (the page
// polls instead); a subscriber that leaves frees its place.
func TestSubscriberBound(t *testing.T) {
	d := New(Options{})
	var subs []chan event
	for range maxSubscribers {
		subs = append(subs, d.subs.subscribe())
	}
	w := httptest.NewRecorder()
	d.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/ctxguard/api/events", nil))
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("stream %d over the bound: %d", maxSubscribers+1, w.Code)
	}
	d.subs.unsubscribe(subs[0])
	if d.subs.subscribe() == nil {
		t.Error("no place after a subscriber left")
	}
}

// TestEventsEndWithClient: the stream's handler returns when the client
// goes away.
func TestEventsEndWithClient(t *testing.T) {
	d := New(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/ctxguard/api/events", nil).WithContext(ctx))
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the stream outlived its client")
	}
	if n := len(d.subs.set); n != 0 {
		t.Errorf("%d subscribers left", n)
	}
}
