package loadtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoundRobin(t *testing.T) {
	var rr roundRobin
	var got []int
	for range 7 {
		got = append(got, rr.next(3))
	}
	if diff := cmp.Diff([]int{0, 1, 2, 0, 1, 2, 0}, got); diff != "" {
		t.Errorf("next(3) (-want +got):\n%s", diff)
	}
	var one roundRobin
	for range 3 {
		if i := one.next(1); i != 0 {
			t.Errorf("next(1) = %d", i)
		}
	}

	// Concurrent callers share the turns evenly.
	var conc roundRobin
	var counts [2]atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				counts[conc.next(2)].Add(1)
			}
		})
	}
	wg.Wait()
	if a, b := counts[0].Load(), counts[1].Load(); a != 400 || b != 400 {
		t.Errorf("800 calls from 16 goroutines went %d and %d, want 400 each", a, b)
	}
}

// TestSlotRoundRobin sends slots to a target of two instances (servers
// in front of the fake upstream that note which session each request is
// from): one client's requests alternate between them, and with several
// clients each instance gets half of the requests.
func TestSlotRoundRobin(t *testing.T) {
	ans, err := newAnswers()
	if err != nil {
		t.Fatal(err)
	}
	up, err := startUpstream(ans, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer up.close()
	type hit struct {
		Instance int
		Session  string
	}
	var mu sync.Mutex
	var hits []hit
	var urls []string
	for i := range 2 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits = append(hits, hit{i, r.Header.Get("X-Claude-Code-Session-Id")})
			mu.Unlock()
			up.ServeHTTP(w, r)
		}))
		defer srv.Close()
		urls = append(urls, srv.URL)
	}
	h := &harness{ans: ans, up: up}
	tg := &target{name: Ctxguard, urls: urls, client: &http.Client{}}
	ctx := context.Background()
	want := int64(len(ans[Anthropic].json))
	bodies := [][]byte{[]byte(`{}`), []byte(`{}`), []byte(`{}`), []byte(`{}`)}

	one := caseSpec{proto: Anthropic, size: 2, conc: 1, mode: JSON}
	a := &acc{sent: make([]int, 2)}
	for range 5 {
		h.slot(ctx, tg, one, bodies, want, a)
	}
	s0 := sessionID(0)
	if diff := cmp.Diff([]hit{{0, s0}, {1, s0}, {0, s0}, {1, s0}, {0, s0}}, hits); diff != "" {
		t.Errorf("one client's requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{3, 2}, a.sent); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
	if len(a.lat) != 5 || a.errors != 0 || a.busy <= 0 {
		t.Errorf("%d answers, %d failed (%s), busy %v", len(a.lat), a.errors, a.firstErr, a.busy)
	}

	hits = nil
	four := caseSpec{proto: Anthropic, size: 2, conc: 4, mode: JSON}
	a = &acc{sent: make([]int, 2)}
	for range 3 {
		h.slot(ctx, tg, four, bodies, want, a)
	}
	// 3 slots × 4 clients × 3 requests, starting on the second instance.
	if diff := cmp.Diff([]int{18, 18}, a.sent); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
	var got [2]int
	sessions := map[string]bool{}
	for _, x := range hits {
		got[x.Instance]++
		sessions[x.Session] = true
	}
	if got != [2]int{18, 18} || len(sessions) != 4 {
		t.Errorf("instances received %v from %d sessions, want 18 each from 4", got, len(sessions))
	}
	if len(a.lat) != 36 || a.errors != 0 {
		t.Errorf("%d answers, %d failed (%s)", len(a.lat), a.errors, a.firstErr)
	}
}
