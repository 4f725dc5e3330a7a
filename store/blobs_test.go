package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/store/storetest"
)

// TestUseKeepsBlobsInUse: whatever the TTL and however often a session
// refers to a blob, a sweep at any time within ttl of a use keeps the
// blob (though touches are rate-limited), and a sweep later than
// ttl + RefreshInterval(ttl) after the last use removes it.
func TestUseKeepsBlobsInUse(t *testing.T) {
	for _, ttl := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour} {
		every := store.RefreshInterval(ttl)
		for _, gap := range []time.Duration{every / 7, every / 3, every - 1, every, every + 1, ttl / 2, ttl - 1, ttl} {
			t.Run(fmt.Sprintf("ttl %v, a use every %v", ttl, gap), func(t *testing.T) {
				clk := storetest.NewClock(t0)
				d := storetest.TempDir(t, ttl, clk.Now)
				b := &store.Blobs{Store: d, TTL: ttl, Now: clk.Now}
				k, err := b.Keep(context.Background(), []byte("a tool result"))
				if err != nil {
					t.Fatal(err)
				}
				ids := []string{k.ID}
				for clk.Now().Sub(t0) < 3*ttl {
					u := clk.Advance(gap)
					if missing := b.Use(context.Background(), ids); missing != 0 {
						t.Fatalf("at t0+%v: %d missing", u.Sub(t0), missing)
					}
					for _, at := range []time.Duration{0, ttl / 2, ttl} {
						if n, err := d.Sweep(context.Background(), u.Add(at)); n != 0 || err != nil {
							t.Fatalf("used at t0+%v, swept at +%v: removed %d (err %v)", u.Sub(t0), at, n, err)
						}
					}
				}
				last := clk.Now()
				if n, _ := d.Sweep(context.Background(), last.Add(ttl+every+1)); n != 1 || d.HasBlob(context.Background(), k.ID) {
					t.Errorf("a sweep ttl + RefreshInterval after the last use removed %d", n)
				}
			})
		}
	}
}

// TestDirsShareTouches: two Dirs on one folder (two processes) see each
// other's uses: a blob one process stored and the other keeps using
// survives the first one's sweep, and goes when nobody uses it.
func TestDirsShareTouches(t *testing.T) {
	const ttl = 24 * time.Hour
	every := store.RefreshInterval(ttl)
	root := filepath.Join(t.TempDir(), "data")
	clk := storetest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func() (*store.Dir, *store.Blobs) {
		d, err := store.OpenDir(root, ttl)
		if err != nil {
			t.Fatal(err)
		}
		d.Now = clk.Now
		return d, &store.Blobs{Store: d, TTL: ttl, Now: clk.Now}
	}
	d1, b1 := open()
	d2, b2 := open()
	t0 := clk.Now()
	kept, err := b1.Keep(context.Background(), []byte("used by process 2"))
	if err != nil {
		t.Fatal(err)
	}
	dropped, err := b1.Keep(context.Background(), []byte("used by nobody"))
	if err != nil {
		t.Fatal(err)
	}
	// Process 2 uses the first blob through a whole TTL and more.
	for clk.Now().Sub(t0) < 2*ttl {
		if missing := b2.Use(context.Background(), []string{kept.ID}); missing != 0 {
			t.Fatalf("process 2 found %d blobs missing at t0+%v", missing, clk.Now().Sub(t0))
		}
		clk.Advance(every / 3)
	}
	if _, err := d1.Sweep(context.Background(), clk.Now()); err != nil {
		t.Fatal(err)
	}
	if !d1.HasBlob(context.Background(), kept.ID) {
		t.Error("process 1's sweep removed a blob process 2 kept using")
	}
	if d1.HasBlob(context.Background(), dropped.ID) {
		t.Error("a blob nobody used outlived ttl + RefreshInterval")
	}
	// Process 2 stops; the blob goes ttl + RefreshInterval after its
	// last touch, and process 2 notices.
	clk.Advance(ttl + every)
	if _, err := d2.Sweep(context.Background(), clk.Now()); err != nil {
		t.Fatal(err)
	}
	if d1.HasBlob(context.Background(), kept.ID) {
		t.Error("a blob no longer used was kept")
	}
	if missing := b2.Use(context.Background(), []string{kept.ID}); missing != 1 || b2.Epoch() != 1 {
		t.Errorf("Use of a swept blob: %d missing, epoch %d; want 1, 1", missing, b2.Epoch())
	}
}

func ids(b *store.Blobs, n int) []string {
	out := make([]string, n)
	for i := range out {
		k, err := b.Keep(context.Background(), fmt.Appendf(nil, "result %d", i))
		if err != nil {
			panic(err)
		}
		out[i] = k.ID
	}
	return out
}

// TestUseRateLimited: Use touches a blob at most once per
// RefreshInterval(TTL); storing it counts as a touch.
func TestUseRateLimited(t *testing.T) {
	const ttl = 24 * time.Hour
	every := store.RefreshInterval(ttl)
	if every != time.Hour || store.RefreshInterval(time.Hour) != time.Hour/8 || store.RefreshInterval(0) != time.Hour {
		t.Fatalf("RefreshInterval: %v, %v, %v", every, store.RefreshInterval(time.Hour), store.RefreshInterval(0))
	}
	clk := storetest.NewClock(t0)
	cs := &storetest.Counter{Store: store.NewMemory()}
	b := &store.Blobs{Store: cs, TTL: ttl, Now: clk.Now}
	all := ids(b, 300)
	for _, step := range []struct {
		advance time.Duration
		use     []string
		touches int64 // total so far
	}{
		{0, all, 0}, // just stored
		{every - 1, all, 0},
		{1, all, 300},
		{every / 2, all, 300},
		{every / 2, all[:10], 310},
		{0, all, 600},
		{0, append(all[:1:1], all[0], all[0]), 600},
	} {
		clk.Advance(step.advance)
		if m := b.Use(context.Background(), step.use); m != 0 {
			t.Fatalf("%d missing", m)
		}
		if got := cs.Touches.Load(); got != step.touches {
			t.Errorf("at t0+%v: %d touches, want %d", clk.Now().Sub(t0), got, step.touches)
		}
	}
}

// TestUseHeals: a blob deleted behind the store's back is noticed at its
// next due touch; Blobs then forgets what it stored, so keeping the same
// content stores it again.
func TestUseHeals(t *testing.T) {
	const ttl = time.Hour
	clk := storetest.NewClock(t0)
	d := storetest.TempDir(t, ttl, clk.Now)
	b := &store.Blobs{Store: d, TTL: ttl, Now: clk.Now}
	content := []byte("a tool result")
	k, _ := b.Keep(context.Background(), content)
	other, _ := b.Keep(context.Background(), []byte("another"))
	if err := os.Remove(d.BlobPath(k.ID)); err != nil {
		t.Fatal(err)
	}
	if m := b.Use(context.Background(), []string{k.ID, other.ID}); m != 0 || b.Epoch() != 0 {
		t.Errorf("a touch not yet due: %d missing, epoch %d", m, b.Epoch())
	}
	if again, _ := b.Keep(context.Background(), content); again != k || d.HasBlob(context.Background(), k.ID) {
		t.Fatal("the memo should still answer before the loss is noticed")
	}
	clk.Advance(store.RefreshInterval(ttl))
	if m := b.Use(context.Background(), []string{k.ID, other.ID}); m != 1 || b.Epoch() != 1 {
		t.Errorf("%d missing, epoch %d; want 1, 1", m, b.Epoch())
	}
	if again, err := b.Keep(context.Background(), content); err != nil || again != k || !d.HasBlob(context.Background(), k.ID) {
		t.Errorf("Keep after the loss: %+v, %v; stored %v", again, err, d.HasBlob(context.Background(), k.ID))
	}
	if m := b.Use(context.Background(), []string{k.ID}); m != 0 || b.Epoch() != 1 {
		t.Errorf("after healing: %d missing, epoch %d", m, b.Epoch())
	}
}

// TestUseConcurrent runs Use and Keep at once (for the race detector),
// over blobs that go missing.
func TestUseConcurrent(t *testing.T) {
	clk := storetest.NewClock(t0)
	m := store.NewMemoryWith(store.MemoryOptions{MaxBytes: 2000, Now: clk.Now})
	b := &store.Blobs{Store: m, TTL: time.Minute, Now: clk.Now}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				k, err := b.Keep(context.Background(), fmt.Appendf(nil, "%d %0100d", w, i%50)) // over the cap together
				if err != nil {
					t.Error(err)
					return
				}
				b.Use(context.Background(), []string{k.ID})
				clk.Advance(time.Second)
			}
		}()
	}
	wg.Wait()
	if m.Bytes() > 2000 {
		t.Errorf("memory store holds %d bytes, cap 2000", m.Bytes())
	}
}

// BenchmarkUse is the per-request cost of keeping a session's blobs alive
// in the steady state: 300 blobs, all refreshed recently.
func BenchmarkUse(b *testing.B) {
	clk := storetest.NewClock(t0)
	bl := &store.Blobs{Store: store.NewMemory(), TTL: 7 * 24 * time.Hour, Now: clk.Now}
	all := ids(bl, 300)
	bl.Use(context.Background(), all)
	b.ReportAllocs()
	for b.Loop() {
		if bl.Use(context.Background(), all) != 0 {
			b.Fatal("missing")
		}
	}
}

// TestSignedLinks: with Sign and a base URL, a blob's URL ends with its
// signature and the model reads its name as id/sig, which Howto
// explains; without Sign, or without a base URL, names and links are the
// plain ids, as before signing existed.
func TestSignedLinks(t *testing.T) {
	dir, err := store.OpenDir(t.TempDir(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	sign := func(id string) string { return "sig" + id[:3] }
	const base = "http://127.0.0.1:8787"
	d := store.BlobDir(dir)
	for _, tc := range []struct {
		name              string
		b                 *store.Blobs
		wantName, wantURL string
		wantHowto         string
	}{
		{"unsigned", &store.Blobs{Store: dir, BaseURL: base},
			"abcdefghijklm", base + "/ctxguard/v1/blobs/abcdefghijklm",
			"read the file " + d + "/<blob>.txt, or GET " + base + "/ctxguard/v1/blobs/<blob>"},
		{"signed", &store.Blobs{Store: dir, BaseURL: base, Sign: sign},
			"abcdefghijklm/sigabc", base + "/ctxguard/v1/blobs/abcdefghijklm/sigabc",
			"read the file " + d + "/<blob>.txt, or GET " + base + "/ctxguard/v1/blobs/<blob>/<sig> (no header needed), where a blob is named <blob>/<sig>"},
		{"signing without a URL", &store.Blobs{Store: dir, Sign: sign},
			"abcdefghijklm", "", "read the file " + d + "/<blob>.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := tc.b.Ref("abcdefghijklm")
			if got := tc.b.Name("abcdefghijklm"); got != tc.wantName {
				t.Errorf("Name = %q, want %q", got, tc.wantName)
			}
			if ref.URL != tc.wantURL || ref.Path != d+"/abcdefghijklm.txt" {
				t.Errorf("Ref = %+v, want URL %q", ref, tc.wantURL)
			}
			if got := tc.b.Howto(); got != tc.wantHowto {
				t.Errorf("Howto = %q\nwant    %q", got, tc.wantHowto)
			}
		})
	}
}
