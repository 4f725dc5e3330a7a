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
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/store"
)

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
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

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
func (c *Counter) PutBlob(id string, data []byte) error {
	c.Puts.Add(1)
	return c.Store.PutBlob(id, data)
}

// TouchBlob counts and calls the Store's.
func (c *Counter) TouchBlob(id string) error {
	c.Touches.Add(1)
	return c.Store.TouchBlob(id)
}

// epoch is where every test's clock starts: a fixed time, far from now,
// so a store that reads the wall clock instead of Config.Now is caught.
var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// Run runs the suite, each part as a subtest with its own store.
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
	rc, err := s.OpenBlob(id)
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
			if s.HasBlob(id) {
				t.Fatal("HasBlob true before PutBlob")
			}
			if _, err := s.OpenBlob(id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("OpenBlob of an absent blob: err %v, want ErrNotFound", err)
			}
			if err := s.TouchBlob(id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("TouchBlob of an absent blob: err %v, want ErrNotFound", err)
			}
			if err := s.PutBlob(id, tc.data); err != nil {
				t.Fatal(err)
			}
			if !s.HasBlob(id) {
				t.Fatal("HasBlob false after PutBlob")
			}
			if got := read(t, s, id); !bytes.Equal(got, tc.data) {
				t.Errorf("read %d bytes, not the %d put: %.200q", len(got), len(tc.data), got)
			}
			if err := s.TouchBlob(id); err != nil {
				t.Errorf("TouchBlob: %v", err)
			}
			// Idempotent: a second put keeps the content.
			if err := s.PutBlob(id, tc.data); err != nil {
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
			if err := s.PutBlob(bad, data); !errors.Is(err, store.ErrBadID) {
				t.Errorf("PutBlob err %v, want ErrBadID", err)
			}
			if _, err := s.OpenBlob(bad); !errors.Is(err, store.ErrBadID) {
				t.Errorf("OpenBlob err %v, want ErrBadID", err)
			}
			if err := s.TouchBlob(bad); !errors.Is(err, store.ErrBadID) {
				t.Errorf("TouchBlob err %v, want ErrBadID", err)
			}
			if s.HasBlob(bad) {
				t.Error("HasBlob true")
			}
			if p := s.BlobPath(bad); p != "" {
				t.Errorf("BlobPath %q, want empty", p)
			}
		})
	}
}

func testRecords(t *testing.T, open Open) {
	s, _ := openStore(t, open, 0)
	keys := []string{"calibration", "session/abc", "", "../../x", "ключ", "a\x00b"}
	for _, k := range keys {
		if _, err := s.Get(k); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%q) before Put: err %v, want ErrNotFound", k, err)
		}
	}
	for i, k := range keys {
		if err := s.Put(k, []byte(fmt.Sprint("value ", i))); err != nil {
			t.Fatalf("Put(%q): %v", k, err)
		}
	}
	if err := s.Put("calibration", []byte(`{"f":1.1}`)); err != nil { // overwrite
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, k := range keys {
		v, err := s.Get(k)
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
	if s.HasBlob(store.ID([]byte("value 1"))) {
		t.Error("a record shows up as a blob")
	}
}

func testNoRetention(t *testing.T, open Open) {
	s, _ := openStore(t, open, 0)
	data := []byte("the caller's buffer")
	id := store.ID(data)
	if err := s.PutBlob(id, data); err != nil {
		t.Fatal(err)
	}
	val := []byte("record value")
	if err := s.Put("k", val); err != nil {
		t.Fatal(err)
	}
	copy(data, "XXXXXXXXXXXXXXXXXXX")
	copy(val, "YYYYYYYYYYYY")
	if got := read(t, s, id); string(got) != "the caller's buffer" {
		t.Errorf("blob %q: the store kept the caller's slice", got)
	}
	got, err := s.Get("k")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "record value" {
		t.Errorf("record %q: the store kept the caller's slice", got)
	}
	copy(got, "ZZZZZZ") // nor does it hand out its own memory
	if again, _ := s.Get("k"); string(again) != "record value" {
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
	blob := func(name string) string {
		id := store.ID([]byte(name))
		if err := s.PutBlob(id, []byte(name)); err != nil {
			t.Fatal(err)
		}
		return id
	}
	t0 := clk.Now()
	used, unused, reput := blob("used"), blob("unused"), blob("put again")
	if err := s.Put("rec", []byte("r")); err != nil {
		t.Fatal(err)
	}
	clk.Advance(ttl / 2)
	if err := s.TouchBlob(used); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBlob(reput, []byte("put again")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put("rec2", []byte("r2")); err != nil {
		t.Fatal(err)
	}
	present := func() []string {
		var out []string
		for _, id := range []string{used, unused, reput} {
			if s.HasBlob(id) {
				out = append(out, id)
			}
		}
		for _, k := range []string{"rec", "rec2"} {
			if _, err := s.Get(k); err == nil {
				out = append(out, k)
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
		{ttl, 0, []string{used, unused, reput, "rec", "rec2"}},
		// "rec" is older than the TTL; "unused" is too, but a blob
		// gets RefreshInterval(ttl) more.
		{ttl + time.Second, 1, []string{used, unused, reput, "rec2"}},
		{ttl + every, 0, []string{used, unused, reput, "rec2"}},
		{ttl + every + time.Second, 1, []string{used, reput, "rec2"}},
		// Touched or put again at ttl/2: their age runs from then.
		{ttl/2 + ttl + time.Second, 1, []string{used, reput}},
		{ttl/2 + ttl + every + time.Second, 2, nil},
	} {
		n, err := s.Sweep(t0.Add(step.at))
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
	// A TTL of 0 keeps everything.
	forever, clk2 := openStore(t, open, 0)
	id := store.ID([]byte("kept"))
	if err := forever.PutBlob(id, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if n, err := forever.Sweep(clk2.Now().Add(100 * 365 * 24 * time.Hour)); n != 0 || err != nil || !forever.HasBlob(id) {
		t.Errorf("TTL 0: Sweep removed %d (err %v), blob present %v", n, err, forever.HasBlob(id))
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
				if err := s.PutBlob(id, data); err != nil {
					t.Error(err)
					return
				}
				if err := s.TouchBlob(id); err != nil {
					t.Error(err)
					return
				}
				if rc, err := s.OpenBlob(id); err != nil {
					t.Error(err)
				} else {
					b, _ := io.ReadAll(rc)
					rc.Close()
					if !bytes.Equal(b, data) {
						t.Errorf("a reader saw %d bytes, not the blob", len(b))
					}
				}
				key := fmt.Sprint("w", w)
				if err := s.Put(key, []byte(fmt.Sprint(i))); err != nil {
					t.Error(err)
				}
				if v, err := s.Get(key); err != nil || string(v) != fmt.Sprint(i) {
					t.Errorf("Get(%s) = %q, %v; want %d", key, v, err, i)
				}
				if _, err := s.Sweep(clk.Now()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}
