package dashboard

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/record"
)

// TestColdCache: the tokens saved by a request that arrived after its
// session's cache expired are priced at the cache-write rate ($2 per
// MTok for m1), the others at the read rate ($0.50). Whether it had is
// the engine's decision in the record, unless the usage shows cache
// reads. Expected dollars by hand:
// 1,000 tokens warm 0.0005, 2,000 cold 0.004.
func TestColdCache(t *testing.T) {
	type step struct {
		session string
		start   time.Time
		before  int
		after   int
		reads   int // cache reads in the usage; 0: no usage
		// ttl and cold: the engine's decision (record.Exchange.CacheTTL
		// and Cold); ttl 0: none.
		ttl  time.Duration
		cold bool
	}
	type got struct {
		Cold  bool
		Saved float64
	}
	t0 := at(12, 0)
	for _, tc := range []struct {
		name  string
		model func(string) model.Info // Options.Model
		steps []step
		want  []got
	}{
		// The dashboard keeps no clock of its own: a long gap the engine
		// found warm (a 1-hour cache) is warm.
		{"the engine's decision: a 1-hour cache is warm after 10 minutes", nil, []step{
			{"h:a", t0, 4000, 4000, 0, time.Hour, false},
			{"h:a", t0.Add(10 * time.Minute), 4000, 3000, 0, time.Hour, false},
			{"h:a", t0.Add(80 * time.Minute), 5000, 3000, 0, time.Hour, true},
			{"h:b", t0.Add(81 * time.Minute), 4000, 3000, 0, 5 * time.Minute, false},
		}, []got{{false, 0}, {false, 0.0005}, {true, 0.004}, {false, 0.0005}}},
		{"the engine's decision, but the usage read the cache", nil, []step{
			{"h:a", t0, 4000, 4000, 0, time.Hour, false},
			{"h:a", t0.Add(80 * time.Minute), 4000, 3000, 100, time.Hour, true},
		}, []got{{false, 0}, {false, 0.0005}}},
		{"a record the engine did not time: warm", nil, []step{
			{"h:a", t0, 4000, 4000, 0, 0, false},
			{"h:a", t0.Add(time.Hour), 4000, 3000, 0, 0, false},
		}, []got{{false, 0}, {false, 0.0005}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := New(Options{Now: newClock(t0).Now, Prices: prices, Model: tc.model})
			var xs []*record.Exchange
			for _, s := range tc.steps {
				x := ex(s.session, s.before, s.after)
				x.Start = s.start
				x.CacheTTL, x.Cold = s.ttl, s.cold
				if s.reads > 0 {
					x.Usage = usage(0, s.reads, 0)
				}
				xs = append(xs, x)
			}
			feed(d, xs...)
			var all []got
			for i, x := range xs {
				// The request page prices it the same way.
				r, err := d.Request(x.Seq)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, got{r.Cold, r.SavedUSD})
				if x.Usage != nil && r.SpentUSD != 100*0.5/1e6 {
					t.Errorf("step %d: spent %v: the bill is the usage's, whatever the clock", i, r.SpentUSD)
				}
			}
			if d := cmp.Diff(tc.want, all, approx()); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			var sd SessionDetail
			getJSON(t, d.Handler(), "/ctxguard/api/session/h:a", http.StatusOK, &sd)
			var fromAPI []got
			for _, p := range sd.Points {
				fromAPI = append(fromAPI, got{p.Cold, p.SavedUSD})
			}
			var wantA []got
			for i, s := range tc.steps {
				if s.session == "h:a" {
					wantA = append(wantA, tc.want[i])
				}
			}
			if d := cmp.Diff(wantA, fromAPI, approx()); d != "" {
				t.Errorf("session points (-want +got):\n%s", d)
			}
		})
	}
}

// TestEventCause: the request page says why an edit event happened, as
// the record does.
func TestEventCause(t *testing.T) {
	d := New(Options{Now: newClock(at(12, 0)).Now, Prices: prices})
	var xs []*record.Exchange
	for _, cause := range []string{record.CauseThreshold, record.CauseCold, ""} {
		x := ex("h:a", 4000, 3000)
		x.Event, x.Cause = cause != "", cause
		xs = append(xs, x)
	}
	feed(d, xs...)
	for i, x := range xs {
		r, err := d.Request(x.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if r.Cause != x.Cause || r.Event != x.Event {
			t.Errorf("request %d: event %v cause %q, want %v %q", i, r.Event, r.Cause, x.Event, x.Cause)
		}
	}
}
