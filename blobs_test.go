package ctxguard

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/guardtest"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/pass/compress"
	"github.com/ctxguard/ctxguard/pass/persist"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/store/storetest"
	"github.com/ctxguard/ctxguard/tools/sessiongen"
)

// blobConfig clears and persists early (without compression, which
// shortens most results below the persistence threshold), so a generated
// session refers to many blobs of both kinds.
func blobConfig() config.Config {
	cfg := config.Defaults()
	pass.Update(&cfg.Passes, func(s *compress.Config) { s.Enabled = false })
	pass.Update(&cfg.Passes, func(s *clearing.Config) {
		s.Trigger, s.KeepTokens, s.ClearAtLeast = model.Tokens(3000), model.Tokens(1000), model.Tokens(1000)
		s.Payback = 0
	})
	pass.Update(&cfg.Passes, func(s *persist.Config) { s.Threshold, s.Preview = 2000, 300 })
	return cfg
}

func blobSession(t *testing.T, seed uint64) [][]byte {
	t.Helper()
	gen, err := sessiongen.Generate(rand.New(rand.NewPCG(seed, 7)), sessiongen.Options{Turns: 60, MaxResult: 20_000})
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := gen.Requests()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, r := range reqs {
		out = append(out, r.Body)
	}
	return out
}

var (
	blobNamed     = regexp.MustCompile(`(?:blob |/blobs/)([a-z]{13})\b`)
	blobPersisted = regexp.MustCompile(`/blobs/([a-z]{13})\.txt`)
)

// named returns the distinct blob ids re names in sent and not in orig.
func named(re *regexp.Regexp, orig, sent []byte) []string {
	var ids []string
	for _, m := range re.FindAllSubmatch(sent, -1) {
		if !bytes.Contains(orig, m[0]) {
			ids = append(ids, string(m[1]))
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// TestGuardKeepsBlobsInUse: through a long session, a sweep never
// removes a blob the request just sent refers to, though many were first
// stored more than blob_ttl earlier; once nothing refers to them they go
// ttl + RefreshInterval later. (Before, a blob's age ran from its first
// use: the memos skipped the write that refreshed it.)
func TestGuardKeepsBlobsInUse(t *testing.T) {
	const ttl = time.Hour
	reqs := blobSession(t, 3)
	for _, gap := range []time.Duration{2 * time.Minute, 20 * time.Minute} { // under and over RefreshInterval (7.5m)
		t.Run(gap.String(), func(t *testing.T) {
			clk := storetest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			d := storetest.TempDir(t, ttl, clk.Now)
			cfg := blobConfig()
			cfg.BlobTTL = ttl
			g := newGuard(t, cfg, WithStore(d), WithClock(clk.Now))
			firstUse := map[string]time.Time{}
			old, persisted := 0, 0
			for k, body := range reqs {
				now := clk.Advance(gap)
				res := g.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(0), body)
				if res.Err != nil {
					t.Fatal(res.Err)
				}
				ids := named(blobNamed, body, res.Body)
				persisted += len(named(blobPersisted, body, res.Body))
				if _, err := d.Sweep(context.Background(), now); err != nil {
					t.Fatal(err)
				}
				for _, id := range ids {
					if _, ok := firstUse[id]; !ok {
						firstUse[id] = now
					}
					if now.Sub(firstUse[id]) > ttl {
						old++
					}
					if !d.HasBlob(context.Background(), id) {
						t.Fatalf("request %d at +%v refers to blob %s (first used %v before), which the sweep removed",
							k, gap*time.Duration(k+1), id, now.Sub(firstUse[id]))
					}
				}
			}
			if old < 50 || persisted == 0 {
				t.Fatalf("%d references to blobs first used over ttl before, %d persisted: the test checks too little", old, persisted)
			}
			clk.Advance(ttl + store.RefreshInterval(ttl) + time.Second)
			if _, err := d.Sweep(context.Background(), clk.Now()); err != nil {
				t.Fatal(err)
			}
			if ents, _ := os.ReadDir(d.BlobDir()); len(ents) != 0 {
				t.Errorf("%d blobs outlived ttl + RefreshInterval after their last use", len(ents))
			}
		})
	}
}

// TestGuardHealsLostBlobs: blobs the session refers to, deleted from the
// data directory, are back after the session's next two requests (the
// first notices, the second stores again), and those requests send the
// bytes they would have sent anyway.
func TestGuardHealsLostBlobs(t *testing.T) {
	const ttl = time.Hour
	reqs := blobSession(t, 3)
	clk := storetest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	d := storetest.TempDir(t, ttl, clk.Now)
	cfg := blobConfig()
	cfg.BlobTTL = ttl
	var logs bytes.Buffer
	// What each request must be: as a Guard that remembers nothing sends
	// it, over the same folder (the previews name it), before any loss.
	control := newGuard(t, cfg, WithStore(d), WithClock(clk.Now))
	want := make([][]byte, len(reqs))
	for i, body := range reqs {
		want[i] = control.RewriteBody(context.Background(), anthropic.Protocol, nil, body).Body
	}
	// The loss: after request k, one whose persisted previews are still
	// sent two requests later (a persisted result is stored again only if
	// the Guard drops what it remembers of the session).
	k := -1
	for i := len(reqs) / 3; i+2 < len(reqs) && k < 0; i++ {
		for _, id := range named(blobPersisted, reqs[i], want[i]) {
			if slices.Contains(named(blobPersisted, reqs[i+2], want[i+2]), id) {
				k = i
			}
		}
	}
	if k < 0 {
		t.Fatal("no request with a persisted preview that stays: the test checks too little")
	}
	g := newGuard(t, cfg, WithStore(d), WithClock(clk.Now), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	var lost, lostPersisted []string
	for i, body := range reqs[:k+3] {
		clk.Advance(time.Minute)
		res := g.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(0), body)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if !bytes.Equal(want[i], res.Body) {
			t.Fatalf("request %d: other bytes than a fresh Guard's", i)
		}
		switch i {
		case k:
			lost = named(blobNamed, body, res.Body)
			lostPersisted = named(blobPersisted, body, res.Body)
			for _, id := range lost {
				if err := os.Remove(d.BlobPath(id)); err != nil {
					t.Fatal(err)
				}
			}
			clk.Advance(store.RefreshInterval(ttl)) // the next use is due
		case k + 2:
			back := 0
			for _, id := range named(blobNamed, body, res.Body) {
				f, err := os.Open(d.BlobPath(id))
				if err != nil {
					t.Errorf("request %d refers to blob %s, still missing: %v", i, id, err)
					continue
				}
				b, _ := io.ReadAll(f)
				f.Close()
				if store.ID(b) != id {
					t.Errorf("blob %s holds other content", id)
				}
				if slices.Contains(lost, id) {
					back++
				}
			}
			stillPersisted := 0
			for _, id := range named(blobPersisted, body, res.Body) {
				if slices.Contains(lostPersisted, id) {
					stillPersisted++
				}
			}
			if back < 5 || stillPersisted == 0 {
				t.Errorf("%d lost blobs back, %d of them persisted results: the test checks too little", back, stillPersisted)
			}
		}
	}
	if !strings.Contains(logs.String(), "were missing from the store") {
		t.Errorf("the loss was not logged:\n%s", logs.String())
	}
}

// TestGuardUsesOnlySentBodies: only a body that is sent counts as a use
// of the blobs it refers to: a dry run touches nothing.
func TestGuardUsesOnlySentBodies(t *testing.T) {
	reqs := blobSession(t, 3)
	for _, dry := range []bool{false, true} {
		clk := storetest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		st := &storetest.Counter{Store: store.NewMemory()}
		cfg := blobConfig()
		cfg.DryRun = dry
		g := newGuard(t, cfg, WithStore(st), WithClock(clk.Now))
		for _, body := range reqs {
			clk.Advance(time.Hour)
			g.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(0), body)
		}
		if got := st.Touches.Load(); (got > 0) == dry {
			t.Errorf("dry run %v: %d touches", dry, got)
		}
	}
}

// TestGuardNotWritable: a data directory that cannot be written is no
// reason not to serve: the Guard keeps removed content in memory, capped
// by limits.memory_store, and says so. A folder that is not ctxguard's
// is still refused, untouched.
func TestGuardNotWritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.DataDir = filepath.Join(file, "ctxguard") // ENOTDIR
	cfg.Limits.MemoryStore = 1 << 20
	pass.Update(&cfg.Passes, func(s *compress.Config) { s.Enabled = false })
	pass.Update(&cfg.Passes, func(s *persist.Config) { s.Threshold, s.Preview = 5000, 500 })
	var logs bytes.Buffer
	g, err := New(cfg, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer g.Close()
	if g.Persistent() {
		t.Error("Persistent() true without a writable data dir")
	}
	l := logs.String()
	for _, want := range []string{"level=WARN", cfg.DataDir, "cannot be written", "not a directory", "kept in memory only, at most 1 MiB, and lost on exit"} {
		if !strings.Contains(l, want) {
			t.Errorf("the warning lacks %q:\n%s", want, l)
		}
	}
	res := g.RewriteBody(context.Background(), anthropic.Protocol, nil, guardtest.BigResult())
	if res.Err != nil || !res.Changed {
		t.Fatalf("rewrite: changed %v, err %v", res.Changed, res.Err)
	}
	m, ok := g.Store().(*store.Memory)
	if !ok || m.Len() == 0 {
		t.Fatalf("store %T holds nothing", g.Store())
	}
	over := make([]byte, 1<<20+1)
	if err := m.PutBlob(context.Background(), store.ID(over), over); !errors.Is(err, store.ErrTooLarge) {
		t.Errorf("the memory store is not capped at limits.memory_store: %v", err)
	}

	// A folder that is not ctxguard's stays a hard error.
	home := t.TempDir()
	os.WriteFile(filepath.Join(home, "notes.txt"), []byte("mine"), 0o644)
	cfg.DataDir = home
	if _, err := New(cfg); !errors.Is(err, store.ErrNotOurs) {
		t.Errorf("New on a foreign folder: %v", err)
	}
	if ents, _ := os.ReadDir(home); len(ents) != 1 {
		t.Errorf("the foreign folder has %d entries", len(ents))
	}

	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	ok2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ok2.Close()
	if !ok2.Persistent() {
		t.Error("Persistent() false with a writable data dir")
	}
}

// TestPublicURL: with public_url set, stubs name the blob endpoint there,
// so two instances listening on different addresses send the same bytes.
func TestPublicURL(t *testing.T) {
	session := blobSession(t, 5)
	var sent [2][][]byte
	for i, listen := range []string{"127.0.0.1:18787", "127.0.0.1:28787"} {
		cfg := blobConfig()
		cfg.Listen, cfg.PublicURL = listen, "https://ctxguard.team.example"
		g := newGuard(t, cfg, WithStore(store.NewMemory()))
		for _, b := range session {
			sent[i] = append(sent[i], g.RewriteBody(context.Background(), anthropic.Protocol, nil, b).Body)
		}
	}
	named := 0
	for k := range session {
		if !bytes.Equal(sent[0][k], sent[1][k]) {
			t.Fatalf("request %d: the instances sent other bytes", k)
		}
		if bytes.Contains(sent[0][k], []byte("https://ctxguard.team.example/ctxguard/v1/blobs/")) {
			named++
		}
		if bytes.Contains(sent[0][k], []byte("8787")) {
			t.Fatalf("request %d names a listen address", k)
		}
	}
	if named == 0 {
		t.Fatal("no stub named the public URL: the test checks nothing")
	}
}
