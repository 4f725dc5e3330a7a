package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ctxguard/ctxguard/store"
	redisstore "github.com/ctxguard/ctxguard/store/redis"
	"github.com/ctxguard/ctxguard/store/redis/redistest"
	"github.com/ctxguard/ctxguard/store/storetest"
)

var prefixes atomic.Int64

// uniquePrefix keeps the suite's stores on one server apart.
func uniquePrefix(name string) string {
	return fmt.Sprintf("test%d:%s:", prefixes.Add(1), name)
}

func open(t *testing.T, o redisstore.Options) *redisstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redisstore.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// raw is a plain client on the server, to look at keys behind the store.
func raw(t *testing.T, srv *redistest.Server, password string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Password: password, DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Run(t, func(t *testing.T, c storetest.Config) store.Store {
		return open(t, redisstore.Options{URL: srv.URL(0), Prefix: uniquePrefix(t.Name()), TTL: c.TTL})
	})
}

// The conformance suite through a store.Breaker, as ctxguard serves a
// shared store: the Redis store's expiry (storetest.Expiring) is found
// through it.
func TestConformanceBreaker(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Run(t, func(t *testing.T, c storetest.Config) store.Store {
		s := open(t, redisstore.Options{URL: srv.URL(0), Prefix: uniquePrefix(t.Name()), TTL: c.TTL})
		return store.NewBreaker(s, store.BreakerOptions{Now: c.Now})
	})
}

// TestBreakerPausedServer: through a store.Breaker, a paused server costs
// one timeout; then every call fails at once with store.ErrUnavailable
// without reaching the server, and the first probe after the server
// resumed restores service.
func TestBreakerPausedServer(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	clk := storetest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	b := store.NewBreaker(open(t, redisstore.Options{URL: srv.URL(0), Timeout: 300 * time.Millisecond, TTL: time.Hour}),
		store.BreakerOptions{Now: clk.Now, Retry: time.Second})
	defer b.Close()
	id := store.ID([]byte("x"))
	if err := b.PutBlob(ctx, id, []byte("x")); err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	defer srv.Resume(t)
	var ne net.Error
	if _, err := b.Get(ctx, "k"); !errors.As(err, &ne) || !ne.Timeout() || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("the first call on a paused server: %v, want the store's timeout", err)
	}
	for i := range 20 {
		if err := b.TouchBlob(ctx, id); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("call %d once the store is known down: %v, want store.ErrUnavailable", i, err)
		}
	}
	if n := b.Skipped(); n != 20 {
		t.Errorf("%d calls failed at once, want all 20", n)
	}
	srv.Resume(t)
	answersAgain(t, b)
	if err := b.TouchBlob(ctx, id); err != nil {
		t.Errorf("TouchBlob once the store is back: %v", err)
	}
}

// TestBreakerCutsCallsInFlight: a call blocked in a read on a paused
// server (which heeds only its read deadline, here an hour away) returns
// with store.ErrUnavailable as soon as another call finds the store down.
func TestBreakerCutsCallsInFlight(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	b := store.NewBreaker(open(t, redisstore.Options{URL: srv.URL(0), Timeout: time.Hour}), store.BreakerOptions{})
	defer b.Close()
	if err := b.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	defer srv.Resume(t)
	blocked := make(chan error, 1)
	go func() { _, err := b.Get(ctx, "k"); blocked <- err }()
	time.Sleep(200 * time.Millisecond) // so that it waits in its read (not a condition of the test: it only checks more)
	// A caller with a deadline finds the store down.
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := b.Get(dctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call past its deadline on a paused server: %v", err)
	}
	select {
	case err := <-blocked:
		if !errors.Is(err, store.ErrUnavailable) || b.Skipped() != 0 {
			t.Errorf("the blocked call: %v (%d calls skipped), want store.ErrUnavailable, and in flight", err, b.Skipped())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked call still waits for its hour-long read deadline after the store was found down")
	}
}

// Two instances on one server share blobs and decisions; keys outside
// their prefix are never touched.
func TestSharedAndNamespaced(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := raw(t, srv, "")
	foreign := map[string]string{
		"other:blob:" + store.ID([]byte("x")): "not ours",
		"ctxguard":                            "no colon",
		"ctxguard:":                           "the bare prefix",
		"ctxguardx:rec:k":                     "a longer prefix",
		"ctxguard:rec":                        "no separator",
	}
	for k, v := range foreign {
		if err := c.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Expire(ctx, "ctxguard", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}

	a := open(t, redisstore.Options{URL: srv.URL(0), TTL: time.Hour})
	defer a.Close()
	b := open(t, redisstore.Options{URL: srv.URL(0), TTL: time.Hour})
	defer b.Close()

	data := []byte("removed tool output")
	id := store.ID(data)
	if err := a.PutBlob(ctx, id, data); err != nil {
		t.Fatal(err)
	}
	rc, err := b.OpenBlob(ctx, id)
	if err != nil {
		t.Fatalf("the other instance cannot open the blob: %v", err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		t.Errorf("the other instance read %q", got)
	}
	if err := b.TouchBlob(ctx, id); err != nil {
		t.Errorf("the other instance cannot touch the blob: %v", err)
	}
	if cur, stored, err := a.PutIfAbsent(ctx, "summary/s1", []byte("a's summary")); err != nil || !stored || string(cur) != "a's summary" {
		t.Fatalf("a's PutIfAbsent = %q, %v, %v", cur, stored, err)
	}
	if cur, stored, err := b.PutIfAbsent(ctx, "summary/s1", []byte("b's summary")); err != nil || stored || string(cur) != "a's summary" {
		t.Errorf("b's PutIfAbsent = %q, %v, %v; want a's decision", cur, stored, err)
	}
	if err := b.Put(ctx, "calibration", []byte("1.1")); err != nil {
		t.Fatal(err)
	}
	if v, err := a.Get(ctx, "calibration"); err != nil || string(v) != "1.1" {
		t.Errorf("a's Get of b's record = %q, %v", v, err)
	}
	for _, k := range []string{"", "ctxguard:", "a\x00b", "rec:x", "blob:" + id} {
		if err := a.Put(ctx, k, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Get(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Sweep(ctx, time.Now().Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}

	// The keys the stores wrote are the documented ones, and only those.
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"ctxguard:blob:" + id: true, "ctxguard:rec:summary/s1": true, "ctxguard:rec:calibration": true,
		"ctxguard:rec:": true, "ctxguard:rec:ctxguard:": true, "ctxguard:rec:a\x00b": true, "ctxguard:rec:rec:x": true, "ctxguard:rec:blob:" + id: true}
	for k := range foreign {
		want[k] = true
	}
	for _, k := range keys {
		if !want[k] {
			t.Errorf("unexpected key %q", k)
		}
		delete(want, k)
	}
	for k := range want {
		t.Errorf("key %q missing", k)
	}
	// A record named like a blob key is not a blob.
	if a.HasBlob(ctx, store.ID([]byte("v"))) {
		t.Error("a record shows up as a blob")
	}
	for k, v := range foreign {
		if got, err := c.Get(ctx, k).Result(); err != nil || got != v {
			t.Errorf("foreign key %q = %q, %v; want %q untouched", k, got, err, v)
		}
	}
	if d, err := c.TTL(ctx, "ctxguard").Result(); err != nil || d <= 0 || d > time.Hour {
		t.Errorf("foreign key's TTL = %v, %v; want its own hour", d, err)
	}
	for _, k := range []string{"other:blob:" + store.ID([]byte("x")), "ctxguard:"} {
		if d, err := c.TTL(ctx, k).Result(); err != nil || d != -1 {
			t.Errorf("foreign key %q's TTL = %v, %v; want none", k, d, err)
		}
	}
}

func TestMaxBlob(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	s := open(t, redisstore.Options{URL: srv.URL(0), MaxBlob: 1000})
	defer s.Close()
	ok := bytes.Repeat([]byte("a"), 1000)
	if err := s.PutBlob(ctx, store.ID(ok), ok); err != nil {
		t.Errorf("a blob of exactly the limit: %v", err)
	}
	big := bytes.Repeat([]byte("b"), 1001)
	err := s.PutBlob(ctx, store.ID(big), big)
	if !errors.Is(err, store.ErrTooLarge) || !strings.Contains(err.Error(), "1001") {
		t.Errorf("a blob over the limit: err %v, want ErrTooLarge naming its size", err)
	}
	if s.HasBlob(ctx, store.ID(big)) {
		t.Error("the refused blob was stored")
	}

	// The default limit: 16 MiB.
	d := open(t, redisstore.Options{URL: srv.URL(1)})
	defer d.Close()
	huge := make([]byte, redisstore.DefaultMaxBlob+1)
	if err := d.PutBlob(ctx, store.ID(huge), huge); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("a blob over the default limit: err %v, want ErrTooLarge", err)
	}
}

func TestPassword(t *testing.T) {
	const pw = "correct horse battery staple"
	srv := redistest.Start(t, "--requirepass", pw)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	s, err := redisstore.Open(ctx, redisstore.Options{URL: srv.URL(0), Password: pw})
	if err != nil {
		t.Fatalf("with the password: %v", err)
	}
	defer s.Close()
	if err := s.Put(ctx, "k", []byte("v")); err != nil {
		t.Errorf("Put with the password: %v", err)
	}

	for _, wrong := range []string{"", "wrong"} {
		_, err := redisstore.Open(ctx, redisstore.Options{URL: srv.URL(0), Password: wrong})
		if !errors.Is(err, redisstore.ErrAuth) {
			t.Errorf("password %q: err %v, want ErrAuth", wrong, err)
		}
		if err != nil && (!strings.Contains(err.Error(), srv.URL(0)) || strings.Contains(err.Error(), pw)) {
			t.Errorf("password %q: error %q should name the URL, never the password", wrong, err)
		}
	}
}

func TestURLs(t *testing.T) {
	for _, tc := range []struct {
		url, want string // want: part of the error, "" for none
	}{
		{"redis://127.0.0.1:6379/0", ""},
		{"redis://cache.internal", ""},
		{"rediss://user@cache.internal:6380/2", ""},
		{"redis://[::1]:6379/0", ""},
		{"redis://user:secret@cache.internal/0", "password"},
		{"redis://:secret@cache.internal/0", "password"},
		{"redis+sentinel://cache.internal", "Sentinel"},
		{"http://cache.internal", "scheme"},
		{"cache.internal:6379", "scheme"},
		{"redis:///0", "no host"},
		{"redis://cache.internal/0?dial_timeout=1", "query"},
		{"redis://cache.internal/x", "database"},
		{"redis://cache.internal/0/1", "path"},
	} {
		err := redisstore.CheckURL(tc.url)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckURL(%q): %v", tc.url, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("CheckURL(%q) = %v, want an error about %s", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("CheckURL(%q)'s error shows the password: %v", tc.url, err)
		}
		if _, nerr := redisstore.New(redisstore.Options{URL: tc.url}); (nerr == nil) != (err == nil) {
			t.Errorf("New(%q) = %v, CheckURL %v", tc.url, nerr, err)
		} else if nerr != nil && strings.Contains(nerr.Error(), "secret") {
			t.Errorf("New(%q)'s error shows the password: %v", tc.url, nerr)
		}
	}
}

// A server that does not answer makes every call fail within its bounds,
// never hang.
func TestUnreachable(t *testing.T) {
	ctx := context.Background()
	// Nothing listens.
	closed := "redis://" + redistest.ClosedPort(t) + "/0"
	if _, err := redisstore.Open(ctx, redisstore.Options{URL: closed, Timeout: time.Second}); err == nil || !strings.Contains(err.Error(), closed) {
		t.Errorf("Open of a closed port: err %v, want one naming %s", err, closed)
	}

	// A server that accepts connections and then says nothing (paused).
	srv := redistest.Start(t)
	s := open(t, redisstore.Options{URL: srv.URL(0), Timeout: 300 * time.Millisecond, TTL: time.Hour})
	defer s.Close()
	id := store.ID([]byte("x"))
	if err := s.PutBlob(ctx, id, []byte("x")); err != nil {
		t.Fatal(err)
	}
	srv.Pause(t)
	defer srv.Resume(t)
	calls := map[string]func(context.Context) error{
		"Ping": s.Ping,
		"Get":  func(ctx context.Context) error { _, err := s.Get(ctx, "k"); return err },
		"Put":  func(ctx context.Context) error { return s.Put(ctx, "k", []byte("v")) },
		"PutBlob": func(ctx context.Context) error {
			return s.PutBlob(ctx, store.ID([]byte("y")), []byte("y"))
		},
		"TouchBlob": func(ctx context.Context) error { return s.TouchBlob(ctx, id) },
		"OpenBlob":  func(ctx context.Context) error { _, err := s.OpenBlob(ctx, id); return err },
		"PutIfAbsent": func(ctx context.Context) error {
			_, _, err := s.PutIfAbsent(ctx, "k", []byte("v"))
			return err
		},
	}
	for name, call := range calls {
		// By the store's own timeout.
		err := call(ctx)
		var ne net.Error
		if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("%s on a paused server: err %v, want a timeout", name, err)
		}
		// By the caller's context, shorter than the store's timeout.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := call(cctx); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: err %v, want context.Canceled", name, err)
		}
	}
	if s.HasBlob(ctx, id) {
		t.Error("HasBlob true on a paused server")
	}
	srv.Resume(t)
	// Once it answers again, so does the store.
	answersAgain(t, s)
}

// answersAgain pings s (at most 50 times) until it answers, once its
// server resumed.
func answersAgain(t *testing.T, s store.Store) {
	t.Helper()
	var err error
	for range 50 {
		if err = s.Ping(context.Background()); err == nil {
			return
		}
	}
	t.Fatalf("Ping after the server resumed: %v", err)
}

// rediss:// speaks TLS and verifies the server's certificate.
func TestTLS(t *testing.T) {
	srv, ca := redistest.StartTLS(t)
	url := "rediss://" + srv.Addr + "/0"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redisstore.Open(ctx, redisstore.Options{URL: url, RootCAs: ca, TTL: time.Hour})
	if err != nil {
		t.Fatalf("rediss:// trusting the server's CA: %v", err)
	}
	defer s.Close()
	if _, stored, err := s.PutIfAbsent(ctx, "k", []byte("v")); err != nil || !stored {
		t.Errorf("PutIfAbsent over TLS: stored %v, err %v", stored, err)
	}
	// Not trusting it: refused.
	if _, err := redisstore.Open(ctx, redisstore.Options{URL: url, Timeout: 2 * time.Second}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("rediss:// to a server with an unknown CA: err %v, want a certificate error", err)
	}
	// Plain redis:// to the TLS port: no answer it understands.
	if _, err := redisstore.Open(ctx, redisstore.Options{URL: "redis://" + srv.Addr + "/0", Timeout: 2 * time.Second}); err == nil {
		t.Error("redis:// (no TLS) to a TLS port succeeded")
	}
}

// BenchmarkBreakerGet is what a store.Breaker adds to a Get on a Redis
// server over loopback.
func BenchmarkBreakerGet(b *testing.B) {
	srv := redistest.Start(b)
	ctx := context.Background()
	s, err := redisstore.Open(ctx, redisstore.Options{URL: srv.URL(0)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Put(ctx, "k", []byte("v")); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		s    store.Store
	}{{"bare", s}, {"breaker", store.NewBreaker(s, store.BreakerOptions{})}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tc.s.Get(ctx, "k"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
