package tokens

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCalibrationLearns(t *testing.T) {
	c := NewCalibrationHalfLife(0)
	const m = "claude-sonnet-4-5-20250929"
	if f := c.Factor(m); f != 1 {
		t.Fatalf("empty factor %v", f)
	}
	for i := range CalibrationMinObservations {
		if !c.Observe(m, 10_000, 11_000) {
			t.Fatal("observation refused")
		}
		if f := c.Factor(m); i < CalibrationMinObservations-1 && f != 1 {
			t.Fatalf("factor %v after %d observations", f, i+1)
		}
	}
	if f := c.Factor(m); math.Abs(f-1.1) > 1e-9 {
		t.Errorf("factor %v, want 1.1", f)
	}
	// Dated and undated ids share the factor; others do not.
	if f := c.Factor("claude-sonnet-4-5"); math.Abs(f-1.1) > 1e-9 {
		t.Errorf("undated id factor %v", f)
	}
	if f := c.Factor("claude-opus-4-5"); f != 1 {
		t.Errorf("other model factor %v", f)
	}
	if got := c.Adjust(m, 1000); got != 1100 {
		t.Errorf("Adjust = %d", got)
	}
	if got := c.Adjust(m, 1001); got != 1102 { // rounds up
		t.Errorf("Adjust(1001) = %d", got)
	}
}

func TestCalibrationRejects(t *testing.T) {
	c := NewCalibration()
	const m = "claude-opus-4-8"
	for _, tc := range []struct {
		est, act int
		ok       bool
	}{
		{100, 110, false},   // too small to learn from
		{1000, 0, false},    // no usage
		{1000, 3500, false}, // beyond 3x
		{3500, 1000, false},
		{1000, 2900, true},
		{1000, 400, true},
	} {
		if got := c.Observe(m, tc.est, tc.act); got != tc.ok {
			t.Errorf("Observe(%d, %d) = %v", tc.est, tc.act, got)
		}
	}
	s := c.Snapshot()
	if len(s) != 1 || s[0].Observations != 2 || s[0].Rejected != 2 || s[0].Model != "claude-opus-4-8" {
		t.Errorf("snapshot %+v", s)
	}
}

func TestCalibrationClampAndFade(t *testing.T) {
	c := NewCalibrationHalfLife(10)
	for range 5 {
		c.Observe("m", 1000, 2900)
	}
	if f := c.Factor("m"); f != 2 {
		t.Errorf("factor %v not clamped to 2", f)
	}
	// A changed tokenizer: the old observations fade.
	for range 100 {
		c.Observe("m", 1000, 1000)
	}
	if f := c.Factor("m"); f > 1.01 {
		t.Errorf("factor %v did not follow the new ratio", f)
	}
	var never Calibration // zero value: usable, never fades
	for range 3 {
		never.Observe("m", 1000, 1500)
	}
	for range 100 {
		never.Observe("m", 1000, 1000)
	}
	if f := never.Factor("m"); math.Abs(f-104.5/103) > 1e-9 {
		t.Errorf("zero-value factor %v", f)
	}
}

// roundTrip writes c and loads it back, failing t unless the snapshot is
// the same; it returns the loaded Calibration and the JSON.
func roundTrip(t testing.TB, c *Calibration) (*Calibration, []byte) {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	back := &Calibration{}
	if err := json.Unmarshal(b, back); err != nil {
		t.Fatalf("written state does not load: %v\n%s", err, b)
	}
	if d := cmp.Diff(c.Snapshot(), back.Snapshot()); d != "" {
		t.Fatalf("round trip (-want +got):\n%s", d)
	}
	return back, b
}

func TestCalibrationJSON(t *testing.T) {
	c := NewCalibration()
	for i := range 5 {
		c.Observe("claude-opus-4-5-20251101", 2000+i, 2100)
		c.Observe("gpt-5", 3000, 2700+i)
	}
	c.Observe("gpt-5", 3000, 10) // rejected
	back, _ := roundTrip(t, c)
	// It keeps learning with the same half-life.
	c.Observe("gpt-5", 3000, 3000)
	back.Observe("gpt-5", 3000, 3000)
	if c.Factor("gpt-5") != back.Factor("gpt-5") {
		t.Error("restored calibration learns differently")
	}
	for _, bad := range []string{`{"version":2,"models":{}}`, `{"version":1,"models":{"m":{"estimated":-1}}}`, `{"version":1,"models":{"m":null}}`, `[`,
		`{"version":1,"models":{"m":{"growth":[[0,5]]}}}`, `{"version":1,"models":{"m":{"growth":[[5,-1]]}}}`,
		`{"version":1,"models":{"m":{"growth_n":-1}}}`, `{"version":1,"models":{"m":{"growth":[[5]]}}}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestCalibrationConcurrent(t *testing.T) {
	c := NewCalibration()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := fmt.Sprint("model-", g%2)
			for k := range 500 {
				c.ObserveSession(fmt.Sprint("s", g), "claude-"+m, 10_000+300*k, 12_000+360*k)
				c.Observe(m, 1000, 1200)
				_ = c.Factor(m)
				_, _ = json.Marshal(c)
			}
		}()
	}
	wg.Wait()
	snap := c.Snapshot()
	if len(snap) != 4 {
		t.Errorf("%d models", len(snap))
	}
	for _, s := range snap {
		growth := 0
		if strings.HasPrefix(s.Model, "claude-") {
			growth = 4 * 499 // each session's first request has no growth
		}
		if s.Observations != 2000 || s.Growth != growth || math.Abs(s.Factor-1.2) > 1e-9 {
			t.Errorf("%+v", s)
		}
	}
}

func TestCalibrationGrowthRobust(t *testing.T) {
	c := NewCalibrationHalfLife(0)
	const m = "gpt-5.2-codex"
	// Typical turns: real growth 0.86 of the estimate, with noise.
	for i := range 200 {
		e := 400 + 37*(i%23)
		r := int(0.86*float64(e)) + (i%7-3)*9
		if !c.ObserveGrowth(m, e, r) {
			t.Fatalf("pair %d refused", i)
		}
	}
	// A tenth of the pairs are bad but inside the outlier gate: twice the
	// real growth (a side request's usage in between), large ones.
	for i := range 20 {
		c.ObserveGrowth(m, 3000+i, 2*(3000+i))
	}
	// The plain ratio of sums is dragged far off by those pairs; the
	// Huber fit bounds their influence (a few percent, not a tenth).
	var e, r float64
	for _, p := range c.byModel[m].Growth {
		e += float64(p[0])
		r += float64(p[1])
	}
	plain := r / e
	if plain < 0.95 {
		t.Errorf("the test's bad pairs move the plain ratio only to %.3f", plain)
	}
	if f := c.Factor(m); math.Abs(f-0.86) > 0.03 || math.Abs(f-0.86) > math.Abs(plain-0.86)/4 {
		t.Errorf("robust factor %.4f, want about 0.86 (plain ratio %.3f)", f, plain)
	}
	// Gates: too small, no growth, beyond 3x.
	for _, p := range [][2]int{{255, 200}, {1000, 0}, {1000, 3100}, {3100, 1000}} {
		if c.ObserveGrowth(m, p[0], p[1]) {
			t.Errorf("ObserveGrowth(%d, %d) accepted", p[0], p[1])
		}
	}
	s := c.Snapshot()
	if len(s) != 1 || s[0].Growth != 220 || s[0].GrowthRejected != 2 || s[0].Basis != "growth" || s[0].Observations != 0 {
		t.Errorf("snapshot %+v", s)
	}
}

func TestCalibrationBasis(t *testing.T) {
	c := NewCalibrationHalfLife(0)
	// Whole-request observations serve until growth pairs exist.
	for range CalibrationMinObservations {
		c.Observe("claude-opus-4-5", 10_000, 12_000)
	}
	if f, b := c.FactorBasis("claude-opus-4-5"); b != "requests" || math.Abs(f-1.2) > 1e-9 {
		t.Errorf("factor %v basis %q, want 1.2 from requests", f, b)
	}
	for range CalibrationMinObservations {
		c.ObserveGrowth("claude-opus-4-5-20251101", 1000, 1050)
	}
	if f, b := c.FactorBasis("claude-opus-4-5"); b != "growth" || math.Abs(f-1.05) > 1e-9 {
		t.Errorf("factor %v basis %q, want 1.05 from growth", f, b)
	}
	// A model without data borrows its family's growth pairs; another
	// family's do not count.
	if f, b := c.FactorBasis("claude-sonnet-4-5"); b != "family" || math.Abs(f-1.05) > 1e-9 {
		t.Errorf("sibling factor %v basis %q", f, b)
	}
	if f, b := c.FactorBasis("gpt-5"); b != "" || f != 1 {
		t.Errorf("other family factor %v basis %q", f, b)
	}
	c.ObserveGrowth("gpt-5.2-codex", 1000, 800)
	c.ObserveGrowth("gpt-5.1-codex-max", 1000, 800)
	if f, _ := c.FactorBasis("gpt-5"); f != 1 {
		t.Errorf("family factor %v from 2 pairs", f)
	}
	c.ObserveGrowth("gpt-5.2-codex", 2000, 1600)
	if f, b := c.FactorBasis("gpt-5"); b != "family" || math.Abs(f-0.8) > 1e-9 {
		t.Errorf("family factor %v basis %q, want 0.8", f, b)
	}
	// The family cache follows new pairs.
	for range 50 {
		c.ObserveGrowth("gpt-5.1-codex-max", 1000, 900)
	}
	if f, _ := c.FactorBasis("gpt-5"); math.Abs(f-0.9) > 0.02 {
		t.Errorf("family factor %v after new pairs, want about 0.9", f)
	}
}

func TestCalibrationWindowAndFade(t *testing.T) {
	c := NewCalibrationHalfLife(0)
	for range CalibrationWindow {
		c.ObserveGrowth("m", 1000, 1500)
	}
	for range CalibrationWindow {
		c.ObserveGrowth("m", 1000, 1000)
	}
	if got := len(c.byModel["m"].Growth); got != CalibrationWindow {
		t.Errorf("window holds %d pairs", got)
	}
	if f := c.Factor("m"); f != 1 {
		t.Errorf("factor %v: pairs older than the window still count", f)
	}
	// With a half-life, recent pairs dominate long before the window ends.
	h := NewCalibrationHalfLife(10)
	for range 100 {
		h.ObserveGrowth("m", 1000, 1500)
	}
	for range 60 {
		h.ObserveGrowth("m", 1000, 1000)
	}
	if f := h.Factor("m"); f > 1.01 {
		t.Errorf("factor %v did not follow the new ratio", f)
	}
}

func TestCalibrationObserveSession(t *testing.T) {
	type req struct {
		session, model string
		est, act       int
		growth         bool // a growth pair is learned
	}
	const m = "claude-sonnet-4-5"
	for _, tc := range []struct {
		name string
		reqs []req
	}{
		{"grows", []req{{"s", m, 10_000, 12_000, false}, {"s", m, 11_000, 13_100, true}, {"s", m, 12_000, 14_200, true}}},
		{"too small a step", []req{{"s", m, 10_000, 12_000, false}, {"s", m, 10_100, 12_110, false}, {"s", m, 11_000, 13_100, true}}},
		{"no session", []req{{"", m, 10_000, 12_000, false}, {"", m, 11_000, 13_100, false}}},
		{"sessions apart", []req{{"a", m, 10_000, 12_000, false}, {"b", m, 30_000, 31_000, false}, {"a", m, 11_000, 13_100, true}, {"b", m, 31_000, 32_100, true}}},
		{"model change", []req{{"s", m, 10_000, 12_000, false}, {"s", "claude-opus-4-5", 11_000, 13_100, false}, {"s", "claude-opus-4-5", 12_000, 14_200, true}}},
		// The history was cut (compaction): both shrink; learning
		// resumes from the smaller request.
		{"shrank", []req{{"s", m, 50_000, 60_000, false}, {"s", m, 8_000, 9_000, false}, {"s", m, 9_000, 10_100, true}}},
		// A side request with the same key reports a smaller prompt: the
		// step to it and the step from it are not growth.
		{"side request", []req{{"s", m, 20_000, 24_000, false}, {"s", m, 21_000, 4_000, false}, {"s", m, 22_000, 26_200, false}, {"s", m, 23_000, 27_300, true}}},
		// The real prompt stays below an earlier peak: not learned until
		// it passes it.
		{"below the peak", []req{{"s", m, 20_000, 24_000, false}, {"s", m, 21_000, 15_000, false}, {"s", m, 22_000, 16_100, false}, {"s", m, 30_000, 26_000, false}, {"s", m, 31_000, 27_100, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCalibrationHalfLife(0)
			for i, r := range tc.reqs {
				before := c.Snapshot()
				c.ObserveSession(r.session, r.model, r.est, r.act)
				grown := 0
				for _, s := range c.Snapshot() {
					grown += s.Growth
				}
				for _, s := range before {
					grown -= s.Growth
				}
				if (grown == 1) != r.growth || grown > 1 {
					t.Errorf("request %d: %d growth pairs learned, want %v", i, grown, r.growth)
				}
			}
		})
	}
	// Whole requests are observed as Observe does.
	c := NewCalibrationHalfLife(0)
	if !c.ObserveSession("s", m, 10_000, 12_000) || c.ObserveSession("s", m, 100, 120) {
		t.Error("whole-request observation")
	}
	if s := c.Snapshot(); len(s) != 1 || s[0].Observations != 1 {
		t.Errorf("snapshot %+v", s)
	}
}

func TestCalibrationSessionsBounded(t *testing.T) {
	c := NewCalibrationHalfLife(0)
	for i := range CalibrationSessions + 10 {
		c.ObserveSession(fmt.Sprint("s", i), "m", 1000, 1000)
		if i == CalibrationSessions-1 {
			c.ObserveSession("s0", "m", 1000, 1000) // s0 is recent again
		}
	}
	if len(c.sessions) != CalibrationSessions {
		t.Fatalf("%d sessions remembered", len(c.sessions))
	}
	if c.sessions["s0"] == nil || c.sessions["s10"] != nil || c.sessions["s11"] == nil {
		t.Error("not the least recently seen session was forgotten")
	}
}

// TestCalibrationOldState: state stored before growth pairs existed loads
// and keeps its factor; state with pairs round-trips.
func TestCalibrationOldState(t *testing.T) {
	old := `{"version":1,"half_life":50,"models":{"claude-sonnet-4-5":{"estimated":100000,"actual":106000,"n":12,"rejected":1}}}`
	var c Calibration
	if err := json.Unmarshal([]byte(old), &c); err != nil {
		t.Fatal(err)
	}
	want := []ModelFactor{{Model: "claude-sonnet-4-5", Factor: 1.06, Basis: "requests", Observations: 12, Rejected: 1}}
	if d := cmp.Diff(want, c.Snapshot()); d != "" {
		t.Errorf("old state (-want +got):\n%s", d)
	}
	for i := range 5 {
		c.ObserveGrowth("claude-sonnet-4-5", 1000+i, 1020+i)
	}
	back, b := roundTrip(t, &c)
	if s := back.Snapshot(); s[0].Basis != "growth" || s[0].Growth != 5 {
		t.Errorf("restored %+v", s)
	}
	// The state a version without growth pairs reads: the same fields
	// plus ones it ignores.
	var v1 struct {
		Version int `json:"version"`
		Models  map[string]struct {
			Estimated float64 `json:"estimated"`
			N         int     `json:"n"`
		} `json:"models"`
	}
	if err := json.Unmarshal(b, &v1); err != nil || v1.Version != 1 || v1.Models["claude-sonnet-4-5"].N != 12 {
		t.Errorf("written state as version 1 reads it: %+v %v", v1, err)
	}
}

// TestCalibrationFamilyDeterministic: a model without data of its own
// borrows its family's growth pairs, pooled from several models; the
// factor is the same, to the last bit, however the models are stored.
func TestCalibrationFamilyDeterministic(t *testing.T) {
	models := []string{"gpt-5.2-codex", "gpt-5.1-codex-max", "gpt-5-codex", "gpt-5.1", "gpt-5.2"}
	factor := func() float64 {
		c := NewCalibrationHalfLife(0)
		for i, m := range models {
			for k := range 40 {
				e := 1000 + 137*i + 613*k%977
				r := e * (700 + 71*i + (37*k)%113) / 1000
				if k%5 == 0 {
					r = e * 3 / 2 // far off the fit: weighed down by a fraction
				}
				c.ObserveGrowth(m, e, r)
			}
		}
		f, b := c.FactorBasis("gpt-5.3-codex")
		if b != "family" {
			t.Fatalf("basis %q, want family", b)
		}
		return f
	}
	want := factor()
	for range 50 {
		if got := factor(); got != want {
			t.Fatalf("family factor %v, then %v: the pooled pairs' order follows the map's", want, got)
		}
	}
}
