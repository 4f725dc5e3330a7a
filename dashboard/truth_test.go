package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
)

// TestAddedApart: a short session the rules took nothing from, on a
// model whose thinking binding setting adds 17 tokens a request, saves 0
// tokens and $0, with the 119 tokens added on purpose counted apart;
// never a negative saving. A request the rules shortened saves what they
// took out, the setting apart.
func TestAddedApart(t *testing.T) {
	d := New(Options{Now: newClock(at(10, 0)).Now, Prices: prices})
	var xs []*record.Exchange
	for i := range 7 {
		x := ex("anthropic:h:s", 2000+100*i, 2017+100*i)
		x.TokensAdded = 17
		x.CalibratedBefore, x.CalibratedAfter = 2000+100*i, 2017+100*i
		xs = append(xs, x)
	}
	long := ex("anthropic:h:s", 9000, 4017)
	long.TokensAdded = 17
	feed(d, xs...)
	o := d.Overview()
	if o.Today.Saved != 0 || o.Today.Added != 119 || o.Today.SavedUSD != 0 || o.Today.AddedUSD <= 0 || o.Sessions[0].Saved != 0 {
		t.Errorf("short session: saved %d ($%g), added %d ($%g); session saved %d; want 0, $0, 119 apart",
			o.Today.Saved, o.Today.SavedUSD, o.Today.Added, o.Today.AddedUSD, o.Sessions[0].Saved)
	}
	var sd SessionDetail
	getJSON(t, d.Handler(), "/ctxguard/api/session/anthropic:h:s", http.StatusOK, &sd)
	for _, p := range sd.Points {
		if p.Saved != 0 || p.SavedUSD != 0 || p.Added != 17 {
			t.Errorf("request %d: saved %d ($%g), added %d", p.N, p.Saved, p.SavedUSD, p.Added)
		}
	}
	feed(d, long)
	o = d.Overview()
	if o.Today.Saved != 5000 || o.Today.Added != 136 || !cmp.Equal(o.Today.SavedUSD, 5000*0.5/1e6, approx()) {
		t.Errorf("after a long request: saved %d ($%g), added %d; want 5000 ($0.0025), 136", o.Today.Saved, o.Today.SavedUSD, o.Today.Added)
	}
}

// TestUnlisted: bypassed and unreadable requests, and those refused
// before ctxguard read them, are counted but listed in no session, even
// with a session key; a client's own compaction is listed in its session.
func TestUnlisted(t *testing.T) {
	d := New(Options{Now: newClock(at(10, 0)).Now})
	bypass := &record.Exchange{Session: "anthropic:h:s", Protocol: "anthropic", Outcome: record.Bypassed, Skipped: "bypass", Status: 200}
	invalid := &record.Exchange{Session: "anthropic:h:s", Protocol: "anthropic", Outcome: record.Bypassed, Skipped: "invalid json", Status: 400}
	refused := &record.Exchange{Protocol: "anthropic", Outcome: record.Refused, Status: 413, ErrorID: "e1"}
	client := ex("anthropic:h:c", 5000, 5000)
	client.Outcome, client.Skipped = record.Bypassed, "client compaction"
	feed(d, bypass, invalid, refused, client)
	o := d.Overview()
	if o.Today.Requests != 4 || o.Today.Unlisted != 3 || len(o.Sessions) != 1 || o.Sessions[0].Key != "anthropic:h:c" || o.Sessions[0].Requests != 1 {
		t.Errorf("today %+v; sessions %+v", o.Today, o.Sessions)
	}
	// Their pages say so: a request of no session.
	var r RequestDetail
	getJSON(t, d.Handler(), "/ctxguard/api/request/1", http.StatusOK, &r)
	if r.Session != "" || r.N != 0 || r.Skipped != "bypass" {
		t.Errorf("bypassed request page: session %q #%d skipped %q", r.Session, r.N, r.Skipped)
	}
	getJSON(t, d.Handler(), "/ctxguard/api/session/anthropic:h:s", http.StatusNotFound, nil)
}

// TestDryRunTotals: a dry run saves nothing; what it would have saved is
// counted apart, and its session shows the would-be size.
func TestDryRunTotals(t *testing.T) {
	d := New(Options{Now: newClock(at(10, 0)).Now, Prices: prices})
	x := ex("anthropic:h:d", 8000, 8000)
	x.Outcome, x.Skipped, x.WouldSend, x.WouldAdd = record.Unchanged, record.SkipDryRun, 3017, 17
	x.Event = true // would have been: nothing changed upstream
	feed(d, x)
	o := d.Overview()
	want := Totals{Requests: 1, DryRun: 1, Before: 8000, After: 8000, WouldSave: 5000, WouldSaveUSD: 5000 * 0.5 / 1e6}
	if diff := cmp.Diff(want, o.Today, approx()); diff != "" {
		t.Errorf("today (-want +got):\n%s", diff)
	}
	if s := o.Sessions[0]; !s.DryRun || s.LastAfter != 3017 || s.LastSent != 8000 {
		t.Errorf("session: dry run %v, last after %d, sent %d; want true, 3017 (would be), 8000 (went)", s.DryRun, s.LastAfter, s.LastSent)
	}
}

// memStore is a store.Memory that can be made to fail.
type memStore struct {
	*store.Memory
	fail atomic.Bool // read by the dashboard's background store reads
}

var errDown = errors.New("store down")

func (m *memStore) Get(ctx context.Context, k string) ([]byte, error) {
	if m.fail.Load() {
		return nil, errDown
	}
	return m.Memory.Get(ctx, k)
}
func (m *memStore) Put(ctx context.Context, k string, v []byte) error {
	if m.fail.Load() {
		return errDown
	}
	return m.Memory.Put(ctx, k, v)
}
func (m *memStore) PutIfAbsent(ctx context.Context, k string, v []byte) ([]byte, bool, error) {
	if m.fail.Load() {
		return nil, false, errDown
	}
	return m.Memory.PutIfAbsent(ctx, k, v)
}

// TestTodaySurvivesRestart: today's totals go through the store: a new
// process on the store starts from them, two processes on one store add
// up, and the next day starts from nothing.
func TestTodaySurvivesRestart(t *testing.T) {
	st := store.NewMemory()
	clk := newClock(at(10, 0))
	first := New(Options{Now: clk.Now, Store: st, Prices: prices})
	feed(first, ex("anthropic:h:a", 3000, 1000), ex("anthropic:h:a", 4000, 1500))
	if err := first.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A restart: a new process, nothing observed yet.
	second := New(Options{Now: clk.Now, Store: st, Prices: prices})
	if got := second.Overview().Today; got.Requests != 2 || got.Saved != 4500 {
		t.Errorf("after a restart: today %d requests, %d saved; want 2, 4500", got.Requests, got.Saved)
	}
	feed(second, ex("anthropic:h:b", 1000, 500))
	if got := second.Overview().Today; got.Requests != 3 || got.Saved != 5000 || !cmp.Equal(got.SavedUSD, 5000*0.5/1e6, approx()) {
		t.Errorf("after one more: today %d requests, %d saved ($%g); want 3, 5000", got.Requests, got.Saved, got.SavedUSD)
	}
	// The first goes on serving beside it: each sees the other's within
	// readEvery.
	feed(first, ex("anthropic:h:a", 500, 400))
	for _, d := range []*Dashboard{first, second} {
		if err := d.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(readEvery)
	for i, d := range []*Dashboard{first, second} {
		if got := d.Overview().Today; got.Requests != 4 || got.Saved != 5100 {
			t.Errorf("instance %d: today %d requests, %d saved; want 4, 5100", i+1, got.Requests, got.Saved)
		}
	}
	// Since start stays the process's own.
	if got := second.Overview().All.Requests; got != 1 {
		t.Errorf("second since start: %d requests, want 1", got)
	}
	// The next day.
	clk.Advance(24 * time.Hour)
	third := New(Options{Now: clk.Now, Store: st})
	if got := third.Overview().Today; got.Requests != 0 {
		t.Errorf("the next day: %d requests today", got.Requests)
	}
}

// TestTodayLocalDate: the day's record is named by the local date of the
// clock's location, not UTC's.
func TestTodayLocalDate(t *testing.T) {
	st := store.NewMemory()
	sydney := time.FixedZone("AEST", 10*3600)
	now := time.Date(2030, 3, 15, 8, 0, 0, 0, sydney) // 2030-03-14 22:00 UTC
	d := New(Options{Now: func() time.Time { return now }, Store: st})
	feed(d, ex("anthropic:h:a", 10, 5))
	if err := d.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := st.Get(context.Background(), "dashboard/day/2030-03-15/1")
	var tot Totals
	if err != nil || json.Unmarshal(b, &tot) != nil || tot.Requests != 1 {
		t.Errorf("the local day's record: %s, %v", b, err)
	}
	if _, err := st.Get(context.Background(), "dashboard/day/2030-03-14/1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a record under the UTC date: %v", err)
	}
}

// TestTodayWrittenByItself: without a flush, what Observe counts reaches
// the store by itself.
func TestTodayWrittenByItself(t *testing.T) {
	st := store.NewMemory()
	d := New(Options{Store: st})
	feed(d, ex("anthropic:h:a", 10, 5))
	key := dayKey(dayOf(time.Now()), 1)
	deadline := time.Now().Add(time.Minute)
	for {
		if b, err := st.Get(context.Background(), key); err == nil && strings.Contains(string(b), `"requests":1,`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("today's totals did not reach the store within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTodayStoreDown: a failing store costs nothing but persistence:
// today's totals are kept in memory, the overview says what failed, and
// they are written once the store is back.
func TestTodayStoreDown(t *testing.T) {
	st := &memStore{Memory: store.NewMemory()}
	st.fail.Store(true)
	clk := newClock(at(10, 0))
	d := New(Options{Now: clk.Now, Store: st})
	feed(d, ex("anthropic:h:a", 10, 5))
	if err := d.Flush(context.Background()); !errors.Is(err, errDown) {
		t.Errorf("flush: %v", err)
	}
	o := d.Overview()
	if o.Today.Requests != 1 || !strings.Contains(o.TodayError, "store down") {
		t.Errorf("today %d requests, error %q", o.Today.Requests, o.TodayError)
	}
	st.fail.Store(false)
	if err := d.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.Advance(readEvery)
	if o := d.Overview(); o.Today.Requests != 1 || o.TodayError != "" {
		t.Errorf("store back: today %d requests, error %q", o.Today.Requests, o.TodayError)
	}
	if _, err := st.Get(context.Background(), dayKey(dayOf(clk.Now()), 1)); err != nil {
		t.Errorf("not written once the store was back: %v", err)
	}
}

// TestTodayMidnight: the requests of a day's last minutes reach that
// day's record, and the next day starts a record of its own.
func TestTodayMidnight(t *testing.T) {
	st := store.NewMemory()
	clk := newClock(at(23, 50))
	d := New(Options{Now: clk.Now, Store: st})
	feed(d, ex("anthropic:h:a", 10, 5))
	clk.Advance(9 * time.Minute)
	feed(d, ex("anthropic:h:a", 10, 5))
	clk.Advance(6 * time.Minute) // 00:05
	feed(d, ex("anthropic:h:a", 10, 5))
	if err := d.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for day, want := range map[date]int{dayOf(at(12, 0)): 2, dayOf(at(12, 0).Add(24 * time.Hour)): 1} {
		b, err := st.Get(context.Background(), dayKey(day, 1))
		var tot Totals
		if err != nil || json.Unmarshal(b, &tot) != nil || tot.Requests != want {
			t.Errorf("%s: %s %v; want %d requests", day, b, err, want)
		}
	}
}
