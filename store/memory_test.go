package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/store/storetest"
)

// t0 is where the tests' clocks start.
var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// TestMemoryCap: a capped Memory evicts the least recently used blobs
// (PutBlob and TouchBlob are uses, OpenBlob is not) and refuses a blob
// larger than the cap.
func TestMemoryCap(t *testing.T) {
	clk := storetest.NewClock(t0)
	m := store.NewMemoryWith(store.MemoryOptions{MaxBytes: 100, TTL: time.Hour, Now: clk.Now})
	blob := func(s string) string { return store.ID([]byte(s)) }
	put := func(s string) {
		t.Helper()
		clk.Advance(time.Second)
		if err := m.PutBlob(context.Background(), blob(s), []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c, d := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40), strings.Repeat("d", 20)
	held := func() []string {
		var out []string
		for _, s := range []string{a, b, c, d} {
			if m.HasBlob(context.Background(), blob(s)) {
				out = append(out, s[:1])
			}
		}
		return out
	}
	put(a)
	put(b)
	if err := m.TouchBlob(context.Background(), blob(a)); err != nil { // a is now newer than b
		t.Fatal(err)
	}
	if rc, err := m.OpenBlob(context.Background(), blob(b)); err != nil { // reading is not a use
		t.Fatal(err)
	} else {
		rc.Close()
	}
	put(c) // 120 bytes: b goes
	if diff := cmp.Diff([]string{"a", "c"}, held()); diff != "" || m.Bytes() != 80 {
		t.Errorf("after c (-want +got):\n%s bytes %d", diff, m.Bytes())
	}
	put(a) // a use
	put(d) // 100 bytes: fits
	if diff := cmp.Diff([]string{"a", "c", "d"}, held()); diff != "" || m.Bytes() != 100 {
		t.Errorf("after d (-want +got):\n%s bytes %d", diff, m.Bytes())
	}
	put(b) // 140: c is the least recently used
	if diff := cmp.Diff([]string{"a", "b", "d"}, held()); diff != "" || m.Bytes() != 100 {
		t.Errorf("after b again (-want +got):\n%s bytes %d", diff, m.Bytes())
	}
	big := strings.Repeat("x", 101)
	if err := m.PutBlob(context.Background(), blob(big), []byte(big)); !errors.Is(err, store.ErrTooLarge) || m.HasBlob(context.Background(), blob(big)) {
		t.Errorf("a blob over the cap: err %v", err)
	}
	if diff := cmp.Diff([]string{"a", "b", "d"}, held()); diff != "" {
		t.Errorf("a refused blob evicted others (-want +got):\n%s", diff)
	}
	// Unbounded, as before.
	u := store.NewMemory()
	huge := make([]byte, 8<<20)
	if err := u.PutBlob(context.Background(), store.ID(huge), huge); err != nil || u.Len() != 1 {
		t.Errorf("NewMemory refused a large blob: %v", err)
	}
	if n, _ := u.Sweep(context.Background(), time.Now().Add(1000*time.Hour)); n != 0 {
		t.Errorf("NewMemory swept %d", n)
	}
}
