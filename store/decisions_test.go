package store_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/store/storetest"
)

func intDecisions(st store.Store, clk *storetest.Clock) *store.Decisions[int] {
	return &store.Decisions[int]{
		Store: st, Refresh: time.Hour, Now: clk.Now,
		Encode: func(n int) ([]byte, error) { return strconv.AppendInt(nil, int64(n), 10), nil },
		Decode: func(b []byte) (int, error) {
			n, err := strconv.Atoi(string(b))
			if err != nil || n <= 0 {
				return 0, errors.New("not a decision")
			}
			return n, nil
		},
	}
}

// TestDecisions: the first decision stored stands for every process on
// the store (two Decisions over one store stand for two processes); a
// value in use is refreshed in the store and written back if the store
// lost it; a record that does not decode is an error, never used.
func TestDecisions(t *testing.T) {
	ctx := context.Background()
	clk := storetest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	const ttl = 24 * time.Hour
	st := store.NewMemoryWith(store.MemoryOptions{TTL: ttl, Now: clk.Now})
	a, b := intDecisions(st, clk), intDecisions(st, clk)

	if _, ok, err := a.Get(ctx, "k"); ok || err != nil {
		t.Fatalf("Get before any decision: ok %v, err %v", ok, err)
	}
	if v, err := a.Decide(ctx, "k", 7); v != 7 || err != nil {
		t.Fatalf("first Decide = %d, %v; want 7", v, err)
	}
	if v, err := b.Decide(ctx, "k", 9); v != 7 || err != nil {
		t.Fatalf("second process's Decide = %d, %v; want the first decision, 7", v, err)
	}
	if v, ok, err := b.Get(ctx, "k"); v != 7 || !ok || err != nil {
		t.Fatalf("Get = %d, %v, %v; want 7", v, ok, err)
	}

	// In use every hour for two TTLs: the record never expires.
	for range 48 {
		clk.Advance(time.Hour)
		if v, ok, err := a.Get(ctx, "k"); v != 7 || !ok || err != nil {
			t.Fatalf("Get at %v = %d, %v, %v", clk.Now(), v, ok, err)
		}
		if _, err := st.Sweep(ctx, clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := st.Get(ctx, "k"); string(got) != "7" || err != nil {
		t.Fatalf("the store holds %q, %v after two TTLs of use", got, err)
	}

	// Lost from the store (swept after an idle TTL, say) while cached:
	// written back as it was.
	clk.Advance(ttl + time.Hour)
	if n, _ := st.Sweep(ctx, clk.Now()); n != 1 {
		t.Fatalf("Sweep removed %d records, want 1", n)
	}
	if v, ok, err := a.Get(ctx, "k"); v != 7 || !ok || err != nil {
		t.Fatalf("Get after the store lost it = %d, %v, %v", v, ok, err)
	}
	if got, err := st.Get(ctx, "k"); string(got) != "7" || err != nil {
		t.Fatalf("not written back: the store holds %q, %v", got, err)
	}

	// A record that is not a decision is an error, for Get and Decide.
	if err := st.Put(ctx, "bad", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.Get(ctx, "bad"); ok || err == nil {
		t.Errorf("Get of a bad record: ok %v, err %v", ok, err)
	}
	if _, err := a.Decide(ctx, "bad", 3); err == nil {
		t.Error("Decide over a bad record: no error")
	}
}
