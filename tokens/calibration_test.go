package tokens

import (
	"encoding/json"
	"fmt"
	"math"
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

func TestCalibrationJSON(t *testing.T) {
	c := NewCalibration()
	for i := range 5 {
		c.Observe("claude-opus-4-5-20251101", 2000+i, 2100)
		c.Observe("gpt-5", 3000, 2700+i)
	}
	c.Observe("gpt-5", 3000, 10) // rejected
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Calibration
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(c.Snapshot(), back.Snapshot()); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	// It keeps learning with the same half-life.
	c.Observe("gpt-5", 3000, 3000)
	back.Observe("gpt-5", 3000, 3000)
	if c.Factor("gpt-5") != back.Factor("gpt-5") {
		t.Error("restored calibration learns differently")
	}
	for _, bad := range []string{`{"version":2,"models":{}}`, `{"version":1,"models":{"m":{"estimated":-1}}}`, `{"version":1,"models":{"m":null}}`, `[`} {
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
			for range 500 {
				c.Observe(m, 1000, 1200)
				_ = c.Factor(m)
				_, _ = json.Marshal(c)
			}
		}()
	}
	wg.Wait()
	for _, s := range c.Snapshot() {
		if s.Observations != 2000 || math.Abs(s.Factor-1.2) > 1e-9 {
			t.Errorf("%+v", s)
		}
	}
}
