package engine

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/guardtest"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/pass/compress"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tools/sessiongen"
)

// TestReload: a valid configuration takes effect for the next request
// (the compress pass off: the body goes as it came), an invalid one is
// refused and the old one stays, a request that started before keeps its
// configuration, restart-only settings are kept and reported, and what
// the Guard counts and learned survives.
func TestReload(t *testing.T) {
	cfg := guardtest.AllOff()
	pass.Update(&cfg.Passes, func(s *compress.Config) { s.Enabled = true })
	pass.Update(&cfg.Passes, func(s *compact.Config) {
		s.Enabled = true
		s.Summarizer.Mode = "none" // no model to call
	})
	g := newEngine(t, cfg, withStore(store.NewMemory()))
	var seen atomic.Int64
	g.Records().Subscribe(record.ObserverFunc(func(*record.Exchange) { seen.Add(1) }))
	calib := g.Calibration()
	h := http.Header{"X-Claude-Code-Session-Id": {"s1"}}
	b := guardtest.BigResult()
	rewrite := func() Result { return g.RewriteBody(context.Background(), anthropic.Protocol, h, b) }

	if r := rewrite(); !r.Changed {
		t.Fatal("compress leaves the big result alone")
	}
	held := g.current() // what a request in flight holds
	compactPass := held.compactPass()

	// Invalid: refused, nothing changes.
	bad := g.Config()
	pass.Update(&bad.Passes, func(s *compress.Config) { s.Enabled = false })
	bad.MaxBody = 0
	if _, err := g.Reload(bad); err == nil || !strings.Contains(err.Error(), "max_body") {
		t.Fatalf("invalid config: err = %v, want one naming max_body", err)
	}
	if r := rewrite(); !r.Changed || !pass.Get[compress.Config](g.Config().Passes).Enabled {
		t.Error("a refused reload changed the behaviour")
	}

	// Valid: compress off, and a restart-only setting changed.
	next := g.Config()
	pass.Update(&next.Passes, func(s *compress.Config) { s.Enabled = false })
	next.Listen = "127.0.0.1:1"
	rl, err := g.Reload(next)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([2][]string{{"compress"}, {"listen"}}, [2][]string{rl.Changed, rl.Kept}); d != "" {
		t.Errorf("Reloaded changed and kept (-want +got):\n%s", d)
	}
	if r := rewrite(); r.Changed || !bytes.Equal(r.Body, b) {
		t.Error("after compress was turned off, the body was still rewritten")
	}
	if c := g.Config(); pass.Get[compress.Config](c.Passes).Enabled || c.Listen != cfg.Listen {
		t.Errorf("config in force: compress %v, listen %s", pass.Get[compress.Config](c.Passes).Enabled, c.Listen)
	}
	// The request that started before the reload ends with its own.
	if r := g.rewrite(context.Background(), held, anthropic.Protocol, http.Header{}, b, nil, false); !r.Changed {
		t.Error("a request that started before the reload lost its configuration")
	}
	if g.current().compactPass() != compactPass {
		t.Error("the compaction pass was replaced though compact's settings did not change")
	}
	// What the Engine's observers see and what it learned is the same.
	if seen.Load() != 3 {
		t.Errorf("after reloads: the observer saw %d records; want 3", seen.Load())
	}
	if g.Calibration() != calib {
		t.Error("the calibration was replaced")
	}

	// The same configuration again changes nothing.
	if rl, err := g.Reload(g.Config()); err != nil || rl.Changed != nil || rl.Kept != nil {
		t.Errorf("reloading the configuration in force: %+v, %v", rl, err)
	}
	// The upstream and compact's settings: what changed is reported.
	next = g.Config()
	next.Upstreams.Anthropic = "http://127.0.0.1:9"
	pass.Update(&next.Passes, func(s *compact.Config) { s.Wait = time.Second })
	if rl, err := g.Reload(next); err != nil || rl.From.Upstreams.Anthropic == next.Upstreams.Anthropic || rl.To.Upstreams.Anthropic != next.Upstreams.Anthropic {
		t.Errorf("changing the upstream: %+v, %v; want From and To to tell the change", rl.Changed, err)
	}
	if g.current().compactPass() == compactPass || len(g.retired) != 1 || g.retired[0] != compactPass {
		t.Error("changing compact's settings did not replace the pass (and keep the old one for Close)")
	}
}

// TestReloadKeptMustValidate: a file that would be valid on its own but
// not with the running listen address (open to the network) is refused.
func TestReloadKeptMustValidate(t *testing.T) {
	cfg := guardtest.AllOff()
	cfg.Listen = "0.0.0.0:8787"
	cfg.AuthToken = "0123456789abcdef0123"
	g := newEngine(t, cfg, withStore(store.NewMemory()))
	next := guardtest.AllOff()
	next.Listen = "127.0.0.1:8787" // a restart-only setting: kept at 0.0.0.0
	_, err := g.Reload(next)
	if err == nil || !strings.Contains(err.Error(), "auth_token") {
		t.Fatalf("err = %v, want the token the running listen address needs", err)
	}
	if g.Config().AuthToken != cfg.AuthToken {
		t.Error("the refused reload dropped the token")
	}
}

// TestReloadSameBytesAsRestart: after a reload, every request of a
// session the Guard remembers goes out as a Guard started with the new
// configuration sends it (a restart reaches the same bytes): nothing
// memoized under the
// old configuration leaks into the new one.
func TestReloadSameBytesAsRestart(t *testing.T) {
	before := config.Defaults()
	pass.Update(&before.Passes, func(s *clearing.Config) {
		s.Trigger, s.KeepTokens, s.ClearAtLeast = model.Tokens(3000), model.Tokens(1000), model.Tokens(1000)
		s.Payback = 0
	})
	after := before
	pass.Update(&after.Passes, func(s *compress.Config) { s.Enabled = false })
	pass.Update(&after.Passes, func(s *clearing.Config) { s.Trigger = model.Tokens(4000) })
	gen, err := sessiongen.Generate(rand.New(rand.NewPCG(3, 7)), sessiongen.Options{Turns: 40, MaxResult: 20_000})
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := gen.Requests()
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"X-Claude-Code-Session-Id": {"s"}}
	g := newEngine(t, before, withStore(store.NewMemory()))
	differ := 0
	for i, r := range reqs {
		if i == len(reqs)/2 {
			if _, err := g.Reload(after); err != nil {
				t.Fatal(err)
			}
		}
		got := g.RewriteBody(context.Background(), anthropic.Protocol, h, r.Body)
		if i < len(reqs)/2 {
			continue
		}
		fresh := newEngine(t, after, withStore(store.NewMemory())).RewriteBody(context.Background(), anthropic.Protocol, h, r.Body)
		if !bytes.Equal(got.Body, fresh.Body) || got.TokensBefore != fresh.TokensBefore {
			t.Fatalf("request %d after the reload: other bytes than a Guard started with the new configuration", i)
		}
		old := newEngine(t, before, withStore(store.NewMemory())).RewriteBody(context.Background(), anthropic.Protocol, h, r.Body)
		if !bytes.Equal(old.Body, fresh.Body) {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("the two configurations rewrite the session alike: the test checks nothing")
	}
}

// TestReloadConcurrent: requests running while the configuration flips
// each go out under one configuration or the other, never a mix (run
// with -race).
func TestReloadConcurrent(t *testing.T) {
	on := guardtest.AllOff()
	pass.Update(&on.Passes, func(s *compress.Config) { s.Enabled = true })
	off := guardtest.AllOff()
	g := newEngine(t, on, withStore(store.NewMemory()))
	b := guardtest.BigResult()
	compressed := g.RewriteBody(context.Background(), anthropic.Protocol, nil, b).Body
	if bytes.Equal(compressed, b) {
		t.Fatal("compress leaves the big result alone")
	}
	done := make(chan struct{})
	errs := make(chan string, 4)
	for w := range 4 {
		go func() {
			h := http.Header{"X-Claude-Code-Session-Id": {fmt.Sprint("s", w)}}
			for {
				select {
				case <-done:
					errs <- ""
					return
				default:
				}
				r := g.RewriteBody(context.Background(), anthropic.Protocol, h, b)
				if !bytes.Equal(r.Body, b) && !bytes.Equal(r.Body, compressed) {
					errs <- "a request went out as neither configuration sends it"
					return
				}
			}
		}()
	}
	for i := range 200 {
		cfg := on
		if i%2 == 0 {
			cfg = off
		}
		if _, err := g.Reload(cfg); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	for range 4 {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}
