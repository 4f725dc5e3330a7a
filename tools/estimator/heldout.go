package estimator

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/ctxguard/ctxguard/tokens"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/tools/transcript"
)

// HeldOut checks the calibration out of sample on a fixed split: the
// session files of each corpus (transcript format) are ordered by the
// SHA-256 of their base name and cut in two halves (A: the first half,
// rounded up; B: the rest). A tokens.Calibration that never forgets learns the
// growth pairs of one half (Accuracy's pairs, by ObserveGrowth), and the
// other half's aggregate growth error is measured before and after its
// factors; then the halves swap. Sessions without usage contribute
// nothing.
func HeldOut(sessions []*transcript.Session, opt AccuracyOptions) *HeldOutReport {
	est := opt.Estimator
	if est == nil {
		est = tokens.Estimate
	}
	var excl Exclusions
	return heldOut(accCollect(sessions, est, &excl), "")
}

// heldOut is HeldOut on collected sessions; salt, prefixed to the file
// names before hashing, draws other splits.
func heldOut(all []*accSession, salt string) *HeldOutReport {
	// The halves, per corpus.
	files := map[transcript.Format][]string{}
	for _, a := range all {
		if f := filepath.Base(a.path); !slices.Contains(files[a.format], f) {
			files[a.format] = append(files[a.format], f)
		}
	}
	half := map[string]int{} // format/file → 0 (A) or 1 (B)
	hash := func(s string) string { h := sha256.Sum256([]byte(salt + s)); return hex.EncodeToString(h[:]) }
	for format, fs := range files {
		slices.SortFunc(fs, func(x, y string) int { return cmp.Compare(hash(x), hash(y)) })
		for i, f := range fs {
			half[format.String()+"/"+f] = min(i/((len(fs)+1)/2), 1)
		}
	}
	halfOf := func(a *accSession) int { return half[a.format.String()+"/"+filepath.Base(a.path)] }

	rep := &HeldOutReport{}
	for fit := range 2 {
		fold := HeldOutFold{Fit: "AB"[fit : fit+1], Check: "AB"[1-fit : 2-fit]}
		c := tokens.NewCalibrationHalfLife(0)
		sums := map[string]*[3]float64{} // model or "family:"+family → estimated, real, pairs
		for _, a := range all {
			if halfOf(a) == fit {
				for _, p := range a.pairs {
					if !c.ObserveGrowth(a.model, p.est, p.real) {
						continue
					}
					for _, k := range []string{a.model, "family:" + model.Family(a.model)} {
						if sums[k] == nil {
							sums[k] = &[3]float64{}
						}
						sums[k][0] += float64(p.est)
						sums[k][1] += float64(p.real)
						sums[k][2]++
					}
				}
			} else {
				fold.Files = append(fold.Files, a.format.String()+"/"+filepath.Base(a.path))
			}
		}
		fold.Files = slices.Compact(slices.Sorted(slices.Values(fold.Files)))
		rows := map[[2]string]*HeldOutRow{}
		// The ratio of sums of the pairs the calibration accepted, per
		// model else per family: the fit this calibration replaced.
		plain := func(m string) float64 {
			for _, k := range []string{m, "family:" + model.Family(m)} {
				if s := sums[k]; s != nil && s[2] >= tokens.CalibrationMinObservations {
					return s[1] / s[0]
				}
			}
			return 1
		}
		add := func(corpus, model string, factor, plain float64, p accPair) {
			r := rows[[2]string{corpus, model}]
			if r == nil {
				r = &HeldOutRow{Corpus: corpus, Model: model}
				rows[[2]string{corpus, model}] = r
			}
			r.Pairs++
			r.Real += p.real
			r.Estimated += p.est
			r.calibrated += factor * float64(p.est)
			r.plain += plain * float64(p.est)
		}
		for _, a := range all {
			if halfOf(a) == fit {
				continue
			}
			f, pf := c.Factor(a.model), plain(a.model)
			for _, p := range a.pairs {
				add(a.format.String(), a.model, f, pf, p)
				add(a.format.String(), "", f, pf, p)
				add("", "", f, pf, p)
			}
		}
		fitted := map[string]int{}
		for _, m := range c.Snapshot() {
			fitted[m.Model] = m.Growth
		}
		for _, r := range rows {
			if r.Real == 0 {
				continue
			}
			r.Before = float64(r.Estimated)/float64(r.Real) - 1
			r.After = r.calibrated/float64(r.Real) - 1
			r.SumRatio = r.plain/float64(r.Real) - 1
			if r.Model != "" {
				r.Factor, r.Basis = c.FactorBasis(r.Model)
				r.Fitted = fitted[r.Model]
				if r.Basis == "" {
					r.Basis = "none"
				}
			}
			fold.Rows = append(fold.Rows, *r)
		}
		// Overall last, each corpus after its models.
		slices.SortFunc(fold.Rows, func(x, y HeldOutRow) int {
			if x.Corpus != y.Corpus {
				if x.Corpus == "" || y.Corpus == "" {
					return strings.Compare(y.Corpus, x.Corpus)
				}
				return strings.Compare(x.Corpus, y.Corpus)
			}
			if x.Model == "" || y.Model == "" {
				return strings.Compare(y.Model, x.Model)
			}
			return strings.Compare(x.Model, y.Model)
		})
		rep.Folds = append(rep.Folds, fold)
	}
	return rep
}

// HeldOutReport is the result of HeldOut: two folds, each fitting on one
// half and checking on the other.
type HeldOutReport struct {
	Folds []HeldOutFold
}

// HeldOutFold is one direction of the check.
type HeldOutFold struct {
	Fit, Check string   // "A" or "B"
	Files      []string // the checked half: corpus/base name
	// Rows per corpus and model, per corpus (Model ""), and over all
	// corpora (Corpus and Model ""), in that order.
	Rows []HeldOutRow
}

// HeldOutRow is the aggregate growth error of the checked half's pairs of
// one corpus and model.
type HeldOutRow struct {
	Corpus, Model   string
	Pairs           int
	Real, Estimated int     // summed real and estimated growth
	Factor          float64 // the factor applied (model rows)
	Basis           string  // what the factor rests on: growth, family, none (model rows)
	Fitted          int     // the model's growth pairs in the fitted half (model rows)
	Before, After   float64 // estimate/real - 1 without and with the factor
	// SumRatio is After with the ratio of sums of the same pairs as the
	// factor instead of the robust fit (the calibration before it).
	SumRatio          float64
	calibrated, plain float64
}

// Overall returns the fold's rows over a whole corpus ("" for all
// corpora), or false.
func (f *HeldOutFold) Overall(corpus string) (HeldOutRow, bool) {
	for _, r := range f.Rows {
		if r.Corpus == corpus && r.Model == "" {
			return r, true
		}
	}
	return HeldOutRow{}, false
}

// String renders the report as a table.
func (r *HeldOutReport) String() string {
	var b strings.Builder
	for _, f := range r.Folds {
		fmt.Fprintf(&b, "fit on half %s, checked on half %s (%d files): aggregate growth error\n", f.Fit, f.Check, len(f.Files))
		fmt.Fprintf(&b, "  %-12s %-20s %6s %9s %9s %7s %-7s %8s %8s %9s\n", "corpus", "model", "pairs", "real", "estimated", "factor", "basis", "before", "after", "sum ratio")
		for _, x := range f.Rows {
			corpus, m, factor := x.Corpus, x.Model, ""
			if corpus == "" {
				corpus = "all"
			}
			if m == "" {
				m = "all"
			} else {
				factor = fmt.Sprintf("%.3f", x.Factor)
			}
			fmt.Fprintf(&b, "  %-12s %-20s %6d %9d %9d %7s %-7s %+7.1f%% %+7.1f%% %+8.1f%%\n", corpus, m, x.Pairs, x.Real, x.Estimated, factor, x.Basis, 100*x.Before, 100*x.After, 100*x.SumRatio)
		}
	}
	return b.String()
}
