// Package storetest is the conformance suite of the store.Store contract:
// every store (Dir, Memory, a shared server store) must pass Run.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, c storetest.Config) store.Store {
//			return store.NewMemoryWith(store.MemoryOptions{TTL: c.TTL, Now: c.Now})
//		})
//	}
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/internal/testclock"
	"github.com/ctxguard/ctxguard/store"
)

// Expiring is implemented by stores whose server expires entries by its
// own clock (Redis), which no fake clock moves: for them the suite checks
// the life each call sets instead of sweeping (see Run). kind is "blob"
// or "record".
type Expiring interface {
	// TTL reports how long the entry has left: negative when it never
	// expires, store.ErrNotFound when absent.
	TTL(ctx context.Context, kind, name string) (time.Duration, error)
	// Age shortens the entry's remaining life by d, as if d had passed;
	// an entry whose life runs out is gone, one without expiry is left
	// alone.
	Age(ctx context.Context, kind, name string, d time.Duration) error
}

// Config is what a test asks of the store it opens: its TTL, and the
// clock it must time uses (PutBlob, TouchBlob, Put) by. Sweep is given
// the time explicitly.
type Config struct {
	TTL time.Duration
	Now func() time.Time
}

// Open opens a new, empty store for one test; the store is closed by the
// suite.
type Open func(t *testing.T, c Config) store.Store

// Clock is a fake clock for tests: it only moves when told. Safe for
// concurrent use.
type Clock = testclock.Clock

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return testclock.New(t) }

// TempDir opens a Dir in a new folder under t.TempDir(), with the TTL and
// the clock given, for tests.
func TempDir(t testing.TB, ttl time.Duration, now func() time.Time) *store.Dir {
	t.Helper()
	d, err := store.OpenDir(filepath.Join(t.TempDir(), "data"), ttl)
	if err != nil {
		t.Fatal(err)
	}
	d.Now = now
	return d
}

// Counter wraps a Store and counts the calls that refresh blobs. Safe for
// concurrent use.
type Counter struct {
	store.Store
	Puts, Touches atomic.Int64
}

// PutBlob counts and calls the Store's.
func (c *Counter) PutBlob(ctx context.Context, id string, data []byte) error {
	c.Puts.Add(1)
	return c.Store.PutBlob(ctx, id, data)
}

// TouchBlob counts and calls the Store's.
func (c *Counter) TouchBlob(ctx context.Context, id string) error {
	c.Touches.Add(1)
	return c.Store.TouchBlob(ctx, id)
}

// epoch is where every test's clock starts: a fixed time, far from now,
// so a store that reads the wall clock instead of Config.Now is caught.
var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// Run runs the suite, each part as a subtest with its own store. For a
// store that implements Expiring (itself or a store it wraps: see
// store.As), the Sweep part checks the life that
// puts, touches and gets give entries, through TTL and Age, instead of
// moving a clock and sweeping.
func Run(t *testing.T, open Open) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T, Open)
	}{
		{"Blobs", testBlobs},
		{"BadIDs", testBadIDs},
		{"Records", testRecords},
		{"NoRetention", testNoRetention},
		{"Sweep", testSweep},
		{"Concurrent", testConcurrent},
		{"PutIfAbsent", testPutIfAbsent},
		{"Ping", testPing},
		{"Files", testFiles},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open) })
	}
}

func openStore(t *testing.T, open Open, ttl time.Duration) (store.Store, *Clock) {
	t.Helper()
	clk := NewClock(epoch)
	s := open(t, Config{TTL: ttl, Now: clk.Now})
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, clk
}

// read returns a blob's content, or fails the test.
func read(t *testing.T, s store.Store, id string) []byte {
	t.Helper()
	rc, err := s.OpenBlob(context.Background(), id)
	if err != nil {
		t.Fatalf("OpenBlob(%s): %v", id, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading blob %s: %v", id, err)
	}
	return b
}

func testBlobs(t *testing.T, open Open) {
	s, _ := openStore(t, open, 0)
	big := bytes.Repeat([]byte("0123456789abcdef\n"), 1<<16) // over 1 MB
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"text", []byte("removed tool output\n")},
		{"empty", []byte{}},
		{"binary", []byte{0, 1, 2, 0xff, '\n', 0}},
		{"large", big},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := store.ID(tc.data)
			if s.HasBlob(context.Background(), id) {
				t.Fatal("HasBlob true before PutBlob")
			}
			if _, err := s.OpenBlob(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("OpenBlob of an absent blob: err %v, want ErrNotFound", err)
			}
			if err := s.TouchBlob(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("TouchBlob of an absent blob: err %v, want ErrNotFound", err)
			}
			if err := s.PutBlob(context.Background(), id, tc.data); err != nil {
				t.Fatal(err)
			}
			if !s.HasBlob(context.Background(), id) {
				t.Fatal("HasBlob false after PutBlob")
			}
			if got := read(t, s, id); !bytes.Equal(got, tc.data) {
				t.Errorf("read %d bytes, not the %d put: %.200q", len(got), len(tc.data), got)
			}
			if err := s.TouchBlob(context.Background(), id); err != nil {
				t.Errorf("TouchBlob: %v", err)
			}
			// Idempotent: a second put keeps the content.
			if err := s.PutBlob(context.Background(), id, tc.data); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(read(t, s, id), tc.data) {
				t.Error("content changed by a second PutBlob")
			}
		})
	}
}

func testBadIDs(t *testing.T, open Open) {
	s, _ := openStore(t, open, 0)
	data := []byte("x")
	good := store.ID(data)
	for _, bad := range []string{
		"", "../../etc/passwd", good[:store.IDLen-1], good + "a", "G" + good[1:], "0" + good[1:],
		"../" + good[3:], good[:6] + "/" + good[7:], good[:12] + ".", "é" + good[2:],
	} {
		t.Run(fmt.Sprintf("%q", bad), func(t *testing.T) {
			if err := s.PutBlob(context.Background(), bad, data); !errors.Is(err, store.ErrBadID) {
				t.Errorf("PutBlob err %v, want ErrBadID", err)
			}
			if _, err := s.OpenBlob(context.Background(), bad); !errors.Is(err, store.ErrBadID) {
				t.Errorf("OpenBlob err %v, want ErrBadID", err)
			}
			if err := s.TouchBlob(context.Background(), bad); !errors.Is(err, store.ErrBadID) {
				t.Errorf("TouchBlob err %v, want ErrBadID", err)
			}
			if s.HasBlob(context.Background(), bad) {
				t.Error("HasBlob true")
			}
			if p := store.BlobPath(s, bad); p != "" {
				t.Errorf("BlobPath %q, want empty", p)
			}
		})
	}
}

func testRecords(t *testing.T, open Open) {
	s, _ := openStore(t, open, 0)
	keys := []string{"calibration", "session/abc", "", "../../x", "ключ", "a\x00b"}
	for _, k := range keys {
		if _, err := s.Get(context.Background(), k); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%q) before Put: err %v, want ErrNotFound", k, err)
		}
	}
	for i, k := range keys {
		if err := s.Put(context.Background(), k, []byte(fmt.Sprint("value ", i))); err != nil {
			t.Fatalf("Put(%q): %v", k, err)
		}
	}
	if err := s.Put(context.Background(), "calibration", []byte(`{"f":1.1}`)); err != nil { // overwrite
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, k := range keys {
		v, err := s.Get(context.Background(), k)
		if err != nil {
			t.Fatalf("Get(%q): %v", k, err)
		}
		got[k] = string(v)
	}
	want := map[string]string{"calibration": `{"f":1.1}`, "session/abc": "value 1", "": "value 2", "../../x": "value 3", "ключ": "value 4", "a\x00b": "value 5"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	// Records and blobs do not share a name space.
	if s.HasBlob(context.Background(), store.ID([]byte("value 1"))) {
		t.Error("a record shows up as a blob")
	}
}

func testNoRetention(t *testing.T, open Open) {
	s, _ := openStore(t, open, 0)
	data := []byte("the caller's buffer")
	id := store.ID(data)
	if err := s.PutBlob(context.Background(), id, data); err != nil {
		t.Fatal(err)
	}
	val := []byte("record value")
	if err := s.Put(context.Background(), "k", val); err != nil {
		t.Fatal(err)
	}
	copy(data, "XXXXXXXXXXXXXXXXXXX")
	copy(val, "YYYYYYYYYYYY")
	if got := read(t, s, id); string(got) != "the caller's buffer" {
		t.Errorf("blob %q: the store kept the caller's slice", got)
	}
	got, err := s.Get(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "record value" {
		t.Errorf("record %q: the store kept the caller's slice", got)
	}
	copy(got, "ZZZZZZ") // nor does it hand out its own memory
	if again, _ := s.Get(context.Background(), "k"); string(again) != "record value" {
		t.Errorf("record %q after the caller changed what Get returned", again)
	}
	b := read(t, s, id)
	copy(b, "WWWW")
	if again := read(t, s, id); string(again) != "the caller's buffer" {
		t.Errorf("blob %q after the caller changed what it read", again)
	}
}

func testSweep(t *testing.T, open Open) {
	const ttl = 24 * time.Hour
	every := store.RefreshInterval(ttl)
	s, clk := openStore(t, open, ttl)
	if _, ok := store.As[Expiring](s); ok {
		testExpiry(t, open)
		return
	}
	blob := func(name string) string {
		id := store.ID([]byte(name))
		if err := s.PutBlob(context.Background(), id, []byte(name)); err != nil {
			t.Fatal(err)
		}
		return id
	}
	t0 := clk.Now()
	used, unused, reput := blob("used"), blob("unused"), blob("put again")
	clk.Advance(ttl / 2)
	if err := s.TouchBlob(context.Background(), used); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBlob(context.Background(), reput, []byte("put again")); err != nil {
		t.Fatal(err)
	}
	present := func() []string {
		var out []string
		for _, id := range []string{used, unused, reput} {
			if s.HasBlob(context.Background(), id) {
				out = append(out, id)
			}
		}
		return out
	}
	for _, step := range []struct {
		at      time.Duration // since t0
		removed int
		want    []string
	}{
		// Nothing is older than the TTL.
		{ttl, 0, []string{used, unused, reput}},
		// "unused" is older than the TTL, but a blob gets
		// RefreshInterval(ttl) more.
		{ttl + every, 0, []string{used, unused, reput}},
		{ttl + every + time.Second, 1, []string{used, reput}},
		// Touched or put again at ttl/2: their age runs from then.
		{ttl/2 + ttl + every, 0, []string{used, reput}},
		{ttl/2 + ttl + every + time.Second, 2, nil},
	} {
		n, err := s.Sweep(context.Background(), t0.Add(step.at))
		if err != nil {
			t.Fatalf("Sweep at t0+%v: %v", step.at, err)
		}
		if n != step.removed {
			t.Errorf("Sweep at t0+%v removed %d, want %d", step.at, n, step.removed)
		}
		if diff := cmp.Diff(step.want, present()); diff != "" {
			t.Errorf("after Sweep at t0+%v (-want +got):\n%s", step.at, diff)
		}
	}

	// Records live TTL after their last Put, Get or PutIfAbsent.
	r, rclk := openStore(t, open, ttl)
	ctx := context.Background()
	r0 := rclk.Now()
	for _, k := range []string{"put", "got", "again"} {
		if err := r.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	rclk.Advance(ttl / 2)
	if _, err := r.Get(ctx, "got"); err != nil {
		t.Fatal(err)
	}
	if _, stored, err := r.PutIfAbsent(ctx, "again", []byte("other")); err != nil || stored {
		t.Fatalf("PutIfAbsent over a record: stored %v, err %v", stored, err)
	}
	if n, err := r.Sweep(ctx, r0.Add(ttl)); n != 0 || err != nil {
		t.Errorf("Sweep at t0+ttl removed %d (err %v), want 0", n, err)
	}
	if n, err := r.Sweep(ctx, r0.Add(ttl+time.Second)); n != 1 || err != nil {
		t.Errorf("Sweep at t0+ttl+1s removed %d (err %v), want 1: the record only Put", n, err)
	}
	if _, err := r.Get(ctx, "put"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of the swept record: err %v, want ErrNotFound", err)
	}
	if n, err := r.Sweep(ctx, r0.Add(ttl/2+ttl+time.Second)); n != 2 || err != nil {
		t.Errorf("Sweep at t0+ttl/2+ttl+1s removed %d (err %v), want 2", n, err)
	}

	// A TTL of 0 keeps everything.
	forever, clk2 := openStore(t, open, 0)
	id := store.ID([]byte("kept"))
	if err := forever.PutBlob(context.Background(), id, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if n, err := forever.Sweep(context.Background(), clk2.Now().Add(100*365*24*time.Hour)); n != 0 || err != nil || !forever.HasBlob(context.Background(), id) {
		t.Errorf("TTL 0: Sweep removed %d (err %v), blob present %v", n, err, forever.HasBlob(context.Background(), id))
	}
}

func testConcurrent(t *testing.T, open Open) {
	s, clk := openStore(t, open, time.Hour)
	data := make([]byte, 1<<16)
	for i := range data {
		data[i] = byte(i)
	}
	id := store.ID(data)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				if err := s.PutBlob(context.Background(), id, data); err != nil {
					t.Error(err)
					return
				}
				if err := s.TouchBlob(context.Background(), id); err != nil {
					t.Error(err)
					return
				}
				if rc, err := s.OpenBlob(context.Background(), id); err != nil {
					t.Error(err)
				} else {
					b, _ := io.ReadAll(rc)
					rc.Close()
					if !bytes.Equal(b, data) {
						t.Errorf("a reader saw %d bytes, not the blob", len(b))
					}
				}
				key := fmt.Sprint("w", w)
				if err := s.Put(context.Background(), key, []byte(fmt.Sprint(i))); err != nil {
					t.Error(err)
				}
				if v, err := s.Get(context.Background(), key); err != nil || string(v) != fmt.Sprint(i) {
					t.Errorf("Get(%s) = %q, %v; want %d", key, v, err, i)
				}
				if _, err := s.Sweep(context.Background(), clk.Now()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}

func testPutIfAbsent(t *testing.T, open Open) {
	s, _ := openStore(t, open, time.Hour)
	ctx := context.Background()
	val := []byte("first")
	cur, stored, err := s.PutIfAbsent(ctx, "once", val)
	if err != nil || !stored || string(cur) != "first" {
		t.Fatalf("PutIfAbsent of a new key = %q, %v, %v; want \"first\", true, nil", cur, stored, err)
	}
	copy(val, "XXXXX")
	copy(cur, "YYYYY")
	cur, stored, err = s.PutIfAbsent(ctx, "once", []byte("second"))
	if err != nil || stored || string(cur) != "first" {
		t.Fatalf("PutIfAbsent of a present key = %q, %v, %v; want \"first\", false, nil", cur, stored, err)
	}
	if got, err := s.Get(ctx, "once"); err != nil || string(got) != "first" {
		t.Errorf("Get after PutIfAbsent = %q, %v", got, err)
	}
	// A record Put is present for PutIfAbsent too.
	if err := s.Put(ctx, "put", []byte("p")); err != nil {
		t.Fatal(err)
	}
	if cur, stored, err := s.PutIfAbsent(ctx, "put", []byte("q")); err != nil || stored || string(cur) != "p" {
		t.Errorf("PutIfAbsent over a Put record = %q, %v, %v", cur, stored, err)
	}

	// Racing writers: exactly one stores, and all see its value.
	const n = 16
	for round := range 5 {
		key := fmt.Sprint("race/", round)
		var wg sync.WaitGroup
		var wins atomic.Int32
		seen := make([]string, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cur, stored, err := s.PutIfAbsent(ctx, key, []byte(fmt.Sprint("writer ", i)))
				if err != nil {
					t.Error(err)
					return
				}
				if stored {
					wins.Add(1)
				}
				seen[i] = string(cur)
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Errorf("round %d: %d writers stored, want 1", round, wins.Load())
		}
		for i := 1; i < n; i++ {
			if seen[i] != seen[0] {
				t.Errorf("round %d: writers saw %q and %q", round, seen[0], seen[i])
				break
			}
		}
	}
}

func testPing(t *testing.T, open Open) {
	s, _ := openStore(t, open, 0)
	if err := s.Ping(context.Background()); err != nil {
		t.Errorf("Ping of an open store: %v", err)
	}
}

// testFiles checks the optional Files capability: a store that names
// files must keep each blob in the file it names; one that does not
// names none.
func testFiles(t *testing.T, open Open) {
	s, _ := openStore(t, open, 0)
	ctx := context.Background()
	data := []byte("blob in a file\n")
	id := store.ID(data)
	if err := s.PutBlob(ctx, id, data); err != nil {
		t.Fatal(err)
	}
	f, ok := store.As[store.Files](s)
	if !ok {
		if p, d := store.BlobPath(s, id), store.BlobDir(s); p != "" || d != "" {
			t.Errorf("a store without files names %q, %q", p, d)
		}
		return
	}
	p := f.BlobPath(id)
	if p != filepath.Join(f.BlobDir(), id+".txt") {
		t.Errorf("BlobPath %q is not BlobDir()/<id>.txt (BlobDir %q)", p, f.BlobDir())
	}
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("reading %s: %q, %v; want the blob", p, got, err)
	}
}

// testExpiry is testSweep for a store that expires entries itself: each
// use must set the life the contract gives (a blob ttl +
// RefreshInterval(ttl) after its last PutBlob or TouchBlob, a record ttl
// after its last Put, Get or PutIfAbsent), reads must not, an entry whose
// life ran out is gone, and a TTL <= 0 sets no expiry.
func testExpiry(t *testing.T, open Open) {
	const ttl = 24 * time.Hour
	blobLife := ttl + store.RefreshInterval(ttl)
	// The calls between setting a life and reading it back take far
	// less than this; it only absorbs them.
	const slack = 10 * time.Minute
	ctx := context.Background()
	s, _ := openStore(t, open, ttl)
	x, _ := store.As[Expiring](s)
	left := func(kind, name string) time.Duration {
		t.Helper()
		d, err := x.TTL(ctx, kind, name)
		if err != nil {
			t.Fatalf("TTL(%s %q): %v", kind, name, err)
		}
		return d
	}
	near := func(what, kind, name string, want time.Duration) {
		t.Helper()
		if d := left(kind, name); d > want || d < want-slack {
			t.Errorf("%s: %s %q has %v left, want %v (within %v)", what, kind, name, d, want, slack)
		}
	}
	age := func(kind, name string, d time.Duration) {
		t.Helper()
		if err := x.Age(ctx, kind, name, d); err != nil {
			t.Fatalf("Age(%s %q): %v", kind, name, err)
		}
	}
	blob := func(name string) string {
		t.Helper()
		id := store.ID([]byte(name))
		if err := s.PutBlob(ctx, id, []byte(name)); err != nil {
			t.Fatal(err)
		}
		return id
	}

	if _, err := x.TTL(ctx, "blob", store.ID([]byte("never put"))); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("TTL of an absent blob: err %v, want ErrNotFound", err)
	}
	used, unused, reput := blob("used"), blob("unused"), blob("put again")
	for _, id := range []string{used, unused, reput} {
		near("PutBlob", "blob", id, blobLife)
		age("blob", id, ttl/2)
		near("Age", "blob", id, blobLife-ttl/2)
	}
	if err := s.TouchBlob(ctx, used); err != nil {
		t.Fatal(err)
	}
	near("TouchBlob", "blob", used, blobLife)
	blob("put again")
	near("PutBlob of a present blob", "blob", reput, blobLife)
	// Reading is not a use.
	read(t, s, unused)
	s.HasBlob(ctx, unused)
	near("OpenBlob and HasBlob", "blob", unused, blobLife-ttl/2)
	// Its life runs out: gone, and Sweep has nothing to do.
	age("blob", unused, blobLife)
	if s.HasBlob(ctx, unused) {
		t.Error("a blob whose life ran out is present")
	}
	if _, err := s.OpenBlob(ctx, unused); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("OpenBlob of an expired blob: err %v, want ErrNotFound", err)
	}
	if n, err := s.Sweep(ctx, time.Now().Add(100*ttl)); n != 0 || err != nil {
		t.Errorf("Sweep of a self-expiring store = %d, %v; want 0, nil", n, err)
	}
	if !s.HasBlob(ctx, used) || !s.HasBlob(ctx, reput) {
		t.Error("Sweep removed blobs in use")
	}

	// Records.
	for _, k := range []string{"put", "got", "again", "a\x00b"} {
		if err := s.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
		near("Put", "record", k, ttl)
		age("record", k, ttl/2)
		near("Age", "record", k, ttl/2)
	}
	if _, err := s.Get(ctx, "got"); err != nil {
		t.Fatal(err)
	}
	near("Get", "record", "got", ttl)
	if _, stored, err := s.PutIfAbsent(ctx, "again", []byte("other")); err != nil || stored {
		t.Fatalf("PutIfAbsent over a record: stored %v, err %v", stored, err)
	}
	near("PutIfAbsent over a record", "record", "again", ttl)
	if err := s.Put(ctx, "a\x00b", []byte("new")); err != nil {
		t.Fatal(err)
	}
	near("Put over a record", "record", "a\x00b", ttl)
	near("untouched", "record", "put", ttl/2)
	if _, stored, err := s.PutIfAbsent(ctx, "new", []byte("v")); err != nil || !stored {
		t.Fatalf("PutIfAbsent of a new key: stored %v, err %v", stored, err)
	}
	near("PutIfAbsent of a new key", "record", "new", ttl)
	age("record", "put", ttl)
	if _, err := s.Get(ctx, "put"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of an expired record: err %v, want ErrNotFound", err)
	}
	if v, err := s.Get(ctx, "got"); err != nil || string(v) != "got" {
		t.Errorf("Get of a live record = %q, %v", v, err)
	}

	// A TTL of 0 sets no expiry, whatever the call.
	forever, _ := openStore(t, open, 0)
	fx, _ := store.As[Expiring](forever)
	id := store.ID([]byte("kept"))
	if err := forever.PutBlob(ctx, id, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if err := forever.TouchBlob(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := forever.PutBlob(ctx, id, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if err := forever.Put(ctx, "r", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := forever.Get(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := forever.PutIfAbsent(ctx, "r", []byte("w")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := forever.PutIfAbsent(ctx, "p", []byte("w")); err != nil {
		t.Fatal(err)
	}
	for _, e := range [][2]string{{"blob", id}, {"record", "r"}, {"record", "p"}} {
		if d, err := fx.TTL(ctx, e[0], e[1]); err != nil || d >= 0 {
			t.Errorf("TTL 0: %s %q has %v left (err %v), want no expiry", e[0], e[1], d, err)
		}
	}
}
