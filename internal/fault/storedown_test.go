package fault

import (
	"bytes"
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/store/redis/redistest"
)

// storeTimeout is the Redis store's bound on each network operation
// (redisstore.DefaultTimeout): a request that waited for a frozen store
// took at least that long.
const storeTimeout = 5 * time.Second

// timedPost is post that also returns how long the exchange took.
func timedPost(t *testing.T, url string, h http.Header, body []byte) (*http.Response, []byte, time.Duration) {
	t.Helper()
	start := time.Now()
	res, got := post(t, client(), url, h, body)
	return res, got, time.Since(start)
}

// TestStoreDownFailsFast: with the shared Redis store frozen (SIGSTOP),
// the first detection — /readyz, or the first store call that times out —
// costs one store timeout; from then on every request is answered
// without waiting for the store: it fails open (the upstream gets the
// client's body, X-Ctxguard-Error-Id says why) in a small fraction of the
// store's timeout, which a request that waited for the store could not.
// Once the server resumes, a probe finds it, /readyz says so, and
// requests store their blobs again.
func TestStoreDownFailsFast(t *testing.T) {
	rs := redistest.Start(t)
	up := newUpstream(t)
	in := start(t, serveOpts{upstream: up.URL, config: fmt.Sprintf("store: %s\npublic_url: http://ctxguard.test\n", rs.URL(0))})
	sess := http.Header{"X-Claude-Code-Session-Id": {"fault-store-down"}}

	// Up: the big result goes to a blob in Redis.
	res, got, _ := timedPost(t, in.URL, sess, bigResultBody("up"))
	if res.StatusCode != 200 || res.Header.Get("X-Ctxguard-Error-Id") != "" {
		t.Fatalf("with the store up: %d, error id %q: %s", res.StatusCode, res.Header.Get("X-Ctxguard-Error-Id"), got)
	}
	blob := regexp.MustCompile(`/ctxguard/v1/blobs/([a-z]{13})`).FindSubmatch(up.messages()[0])
	if blob == nil {
		t.Fatal("the big result was not stored as a blob: the test checks too little")
	}
	if res, _ := get(t, in.URL+"/ctxguard/v1/blobs/"+string(blob[1]), "", nil); res.StatusCode != 200 {
		t.Fatalf("blob with the store up: %d", res.StatusCode)
	}

	// Frozen. The readiness probe is the first to find out.
	rs.Pause(t)
	if res, _ := get(t, in.URL+"/readyz", "", nil); res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the store frozen: %d", res.StatusCode)
	}
	if !in.waitLog("the store does not answer") {
		t.Errorf("no warning that the store is down:\n%s", in.Tail())
	}
	failsFast := func(phase string, n int) {
		t.Helper()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var slowest time.Duration
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := bigResultBody(fmt.Sprintf("%s %d", phase, i))
				res, got, took := timedPost(t, in.URL, sess, body)
				mu.Lock()
				slowest = max(slowest, took)
				mu.Unlock()
				if res.StatusCode != 200 || res.Header.Get("X-Ctxguard-Error-Id") == "" {
					t.Errorf("%s: request %d: %d, error id %q: %.200s", phase, i, res.StatusCode, res.Header.Get("X-Ctxguard-Error-Id"), got)
				}
				if took >= storeTimeout/2 {
					t.Errorf("%s: request %d took %v: it waited for a store known to be down (its timeout is %v)", phase, i, took, storeTimeout)
				}
			}()
		}
		wg.Wait()
		t.Logf("%s: %d requests at once, the slowest took %v", phase, n, slowest)
		// Answered upstream as the clients sent them (fail open).
		for i := range n {
			want := bigResultBody(fmt.Sprintf("%s %d", phase, i))
			found := false
			for _, m := range up.messages() {
				found = found || bytes.Equal(m, want)
			}
			if !found {
				t.Errorf("%s: request %d did not reach the upstream as the client sent it", phase, i)
			}
		}
	}
	failsFast("after readyz", 8)
	if res, _ := get(t, in.URL+"/ctxguard/v1/blobs/"+string(blob[1]), "", nil); res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("blob with the store known down: %d, want 503", res.StatusCode)
	}

	// Back: a probe finds the server, and blobs are stored again.
	rs.Resume(t)
	waitReady(t, in)
	if !in.waitLog("the store answers again") {
		t.Errorf("no notice that the store is back:\n%s", in.Tail())
	}
	res, _, _ = timedPost(t, in.URL, sess, bigResultBody("back"))
	if res.StatusCode != 200 || res.Header.Get("X-Ctxguard-Error-Id") != "" {
		t.Fatalf("with the store back: %d, error id %q", res.StatusCode, res.Header.Get("X-Ctxguard-Error-Id"))
	}

	// Frozen again; this time a request is the first to find out. It
	// waits for one store timeout at most (a call that times out cuts the
	// others short), and is answered; the requests after it do not wait.
	rs.Pause(t)
	res, got, took := timedPost(t, in.URL, sess, bigResultBody("detects"))
	if res.StatusCode != 200 {
		t.Errorf("the request that found the store down: %d %.200s", res.StatusCode, got)
	}
	t.Logf("the request that found the store down took %v", took)
	if took >= 2*storeTimeout {
		t.Errorf("the request that found the store down took %v: more than one store timeout (%v)", took, storeTimeout)
	}
	failsFast("after a timeout", 8)
	rs.Resume(t)
	waitReady(t, in)
}

// waitReady waits (at most 30 s) for /readyz to answer 200.
func waitReady(t *testing.T, in *instance) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, body := get(t, in.URL+"/readyz", "", nil)
		if res.StatusCode == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after the store resumed: %d %s", res.StatusCode, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
