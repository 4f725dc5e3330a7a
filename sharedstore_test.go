package ctxguard

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/store/redis/redistest"
)

// TestSharedStore: two instances on one Redis server (store: redis://…)
// with public_url set send the same bytes, and each finds the content
// the other removed.
func TestSharedStore(t *testing.T) {
	t.Setenv(config.RedisPasswordEnv, "")
	srv := redistest.Start(t)
	session := blobSession(t, 11)
	var gs [2]*Guard
	var logs [2]bytes.Buffer
	for i, listen := range []string{"127.0.0.1:18787", "127.0.0.1:28787"} {
		cfg := blobConfig()
		cfg.Listen, cfg.PublicURL, cfg.Store = listen, "https://ctxguard.team.example", srv.URL(0)
		gs[i] = newGuard(t, cfg, WithLogger(slog.New(slog.NewTextHandler(&logs[i], nil))))
		if !gs[i].Persistent() {
			t.Error("Persistent() false for a Redis store")
		}
		if _, files := gs[i].Store().(store.Files); files {
			t.Errorf("the Redis store (%T) names files", gs[i].Store())
		}
	}
	ref := regexp.MustCompile(`/ctxguard/v1/blobs/([a-z]{13})`)
	refs := 0
	for k, b := range session {
		var sent [2][]byte
		for i, g := range gs {
			sent[i] = g.RewriteBody(context.Background(), anthropic.Protocol, nil, b).Body
		}
		if !bytes.Equal(sent[0], sent[1]) {
			t.Fatalf("request %d: the instances sent other bytes", k)
		}
		for _, m := range ref.FindAllSubmatch(sent[0], -1) {
			refs++
			for i, g := range gs {
				if !g.Store().HasBlob(context.Background(), string(m[1])) {
					t.Fatalf("request %d: instance %d lacks blob %s", k, i, m[1])
				}
			}
		}
	}
	if refs == 0 {
		t.Fatal("no stub named a blob: the test checks nothing")
	}
	for i := range gs {
		if strings.Contains(logs[i].String(), "public_url is empty") {
			t.Errorf("instance %d warns about public_url, which is set:\n%s", i, &logs[i])
		}
	}
}

// TestSharedStoreStart: a shared store without public_url is a warning;
// one that cannot be reached, or refuses the password, stops the start
// with an error naming the URL and never the password.
func TestSharedStoreStart(t *testing.T) {
	const pw = "s3cret-redis-password"
	srv := redistest.Start(t, "--requirepass", pw)

	cfg := config.Defaults()
	cfg.Store = srv.URL(0)
	t.Setenv(config.RedisPasswordEnv, pw)
	var logs bytes.Buffer
	g := newGuard(t, cfg, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err := g.Store().Ping(context.Background()); err != nil {
		t.Errorf("Ping with the password from %s: %v", config.RedisPasswordEnv, err)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "public_url is empty") {
		t.Errorf("no warning about the empty public_url:\n%s", l)
	}

	// /readyz follows the server: up, paused (an outage), up again.
	h, err := g.Handler()
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 200 {
		t.Errorf("/readyz with the server up: %d %s", rec.Code, rec.Body)
	}
	srv.Pause(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err = g.server.Ready(ctx)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "store does not answer") {
		t.Errorf("ready with the server paused: %v, want the store's outage", err)
	}
	srv.Resume(t)
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = g.server.Ready(ctx)
		cancel()
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Errorf("ready once the server is back: %v", err)
	}

	for _, tc := range []struct {
		env  string
		want []string
	}{
		{"", []string{srv.URL(0), config.RedisPasswordEnv, "is not set"}},
		{"wrong", []string{srv.URL(0), config.RedisPasswordEnv, "refused"}},
	} {
		t.Setenv(config.RedisPasswordEnv, tc.env)
		cfg.DataDir = t.TempDir()
		_, err := New(cfg)
		if err == nil {
			t.Fatalf("password %q: New succeeded", tc.env)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("password %q: error %q lacks %q", tc.env, err, w)
			}
		}
	}

	t.Setenv(config.RedisPasswordEnv, pw)
	cfg.Store = "redis://ctxguard@" + redistest.ClosedPort(t) + "/0"
	cfg.DataDir = t.TempDir()
	_, err = New(cfg)
	if err == nil || !strings.Contains(err.Error(), cfg.Store) || strings.Contains(err.Error(), pw) {
		t.Errorf("New with nothing listening: err %v, want one naming %s and not the password", err, cfg.Store)
	}
}
