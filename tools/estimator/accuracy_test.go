package estimator

import (
	"flag"
	"math"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/tools/transcript"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestAccuracyTestdata runs the measurement on the small real sessions in
// tools/transcript/testdata; the report is a golden file.
func TestAccuracyTestdata(t *testing.T) {
	ss, err := transcript.Load([]string{"../transcript/testdata/claude-code", "../transcript/testdata/swe-agent"}, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := Accuracy(ss, AccuracyOptions{})
	if r.Sessions != 5 || r.Pairs == 0 || r.Excluded.Gap == 0 {
		t.Errorf("sessions %d pairs %d excluded %+v", r.Sessions, r.Pairs, r.Excluded)
	}
	// Characters/4 undercounts; the fitted estimator is much closer.
	if r.Baseline.Growth.Aggregate > -0.15 || math.Abs(r.Estimate.Growth.Aggregate) > 0.1 {
		t.Errorf("baseline %+.3f estimate %+.3f", r.Baseline.Growth.Aggregate, r.Estimate.Growth.Aggregate)
	}
	got := []byte(r.String())
	const path = "testdata/accuracy.golden"
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("report changed (-golden +now); go test -update if intended:\n%s", d)
	}
}

// TestAccuracyRealData measures the estimator on all real Claude Code
// sessions and holds it to the targets of the issue: after calibration,
// aggregate error within 5% and p90 per-request error within 10%.
func TestAccuracyRealData(t *testing.T) {
	r := Accuracy(loadShared(t, "claude-code"), AccuracyOptions{})
	t.Logf("\n%s", r)
	for _, s := range r.PerSession {
		if s.Pairs > 0 {
			t.Logf("%-52.52s %-18s pairs=%3d real=%7d est=%7d (%+5.1f%%) factor=%.3f",
				s.ID, s.Model, s.Pairs, s.Real, s.Estimated, 100*(float64(s.Estimated)/float64(s.Real)-1), s.Factor)
		}
	}
	if r.Pairs < 700 {
		t.Errorf("only %d growth pairs compared", r.Pairs)
	}
	if a := r.Calibrated.Growth.Aggregate; math.Abs(a) > 0.05 {
		t.Errorf("calibrated aggregate error %+.1f%% beyond 5%%", 100*a)
	}
	if p := r.Calibrated.Totals.P90; p > 0.10 {
		t.Errorf("calibrated p90 per-request error %.1f%% beyond 10%%", 100*p)
	}
	if a := r.Estimate.Growth.Aggregate; math.Abs(a) > 0.08 {
		t.Errorf("uncalibrated aggregate error %+.1f%%", 100*a)
	}
	// The baseline the issue quotes: characters/4 is about -27%.
	if a := r.Baseline.Growth.Aggregate; a > -0.2 || a < -0.35 {
		t.Errorf("characters/4 aggregate %+.1f%%, expected about -27%%", 100*a)
	}
}

func BenchmarkAccuracyRealData(b *testing.B) {
	ss := loadShared(b, "claude-code")
	b.ReportAllocs()
	var r *AccuracyReport
	for b.Loop() {
		r = Accuracy(ss, AccuracyOptions{})
	}
	b.ReportMetric(100*r.Calibrated.Growth.Aggregate, "agg-err-%")
	b.ReportMetric(100*r.Calibrated.Totals.P90, "p90-err-%")
}
