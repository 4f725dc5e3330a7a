package tokens

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/internal/shareddata"

	"github.com/ctxguard/ctxguard/tools/transcript"
)

// loadReal loads the real Claude Code sessions of the shared data.
func loadReal(t testing.TB) []*transcript.Session {
	t.Helper()
	ss, err := transcript.Load([]string{shareddata.Dir(t, "claude-code")}, transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// fitClasses are the classes whose weights are fitted; the others are
// tied to them (control) or fixed by prior knowledge (CJK).
var fitClasses = []class{cAlpha, cDigit, cSpace, cBackslash, cPunct, cLead}

type fitPair struct {
	session string
	x       []float64 // byte counts per fitted class
	fixed   float64   // tokens not fitted: payloads, CJK, controls (at current weights)
	y       float64   // real growth
}

// growthPairs walks the sessions exactly as Accuracy does and returns the
// pairs it compares, with class counts instead of estimates.
func growthPairs(ss []*transcript.Session) []fitPair {
	var out []fitPair
	var buf []byte
	for _, s := range ss {
		start := make([]int, len(s.Messages))
		h := 0
		for i := range s.Messages {
			if s.Messages[i].Reset {
				h = i
			}
			start[i] = h
		}
		prev, prevP := -1, 0
		for i := range s.Messages {
			m := &s.Messages[i]
			if m.Role != transcript.Assistant {
				continue
			}
			if m.Usage == nil {
				prev = -1
				continue
			}
			p := m.Usage.Prompt()
			if prev < 0 || start[prev] != start[i] {
				prev, prevP = i, p
				continue
			}
			var cnt [nClasses]int
			extra := 0
			skip := m.Gaps > 0
			for j := prev; j < i; j++ {
				buf = s.AppendJSON(buf[:0], j)
				c, x := counts(buf)
				for k := range cnt {
					cnt[k] += c[k]
				}
				extra += x
				skip = skip || s.Messages[j].Gaps > 0 || s.Messages[j].Repaired
			}
			if d := p - prevP; !skip && d >= 0 {
				fp := fitPair{session: s.ID, y: float64(d)}
				for _, c := range fitClasses {
					fp.x = append(fp.x, float64(cnt[c]))
				}
				fp.fixed = float64(extra) + float64(cnt[cCJK])*DefaultWeights.CJK +
					float64(cnt[cControl])*(DefaultWeights.Backslash+DefaultWeights.Alpha)
				out = append(out, fp)
			}
			prev, prevP = i, p
		}
	}
	return out
}

// huber fits y - fixed = x·w by iteratively reweighted least squares with
// Huber weights (k = 1.345 robust standard deviations), which keeps the
// fit on the typical turn instead of the turns where the transcript lacks
// part of what was sent.
func huber(ps []fitPair) []float64 {
	n := len(fitClasses)
	wts := make([]float64, len(ps))
	for i := range wts {
		wts[i] = 1
	}
	var w []float64
	for range 50 {
		ata := make([][]float64, n)
		for i := range ata {
			ata[i] = make([]float64, n+1)
		}
		for k, p := range ps {
			r := p.y - p.fixed
			for i := range n {
				for j := range n {
					ata[i][j] += wts[k] * p.x[i] * p.x[j]
				}
				ata[i][n] += wts[k] * p.x[i] * r
			}
		}
		w = solve(ata)
		res := make([]float64, len(ps))
		abs := make([]float64, len(ps))
		for k, p := range ps {
			e := p.y - p.fixed
			for i := range n {
				e -= w[i] * p.x[i]
			}
			res[k], abs[k] = e, math.Abs(e)
		}
		slices.Sort(abs)
		s := (abs[(len(abs)-1)/2]+abs[len(abs)/2])/2/0.6745 + 1e-9 // the median absolute residual
		for k := range ps {
			if a := math.Abs(res[k]); a > 1.345*s {
				wts[k] = 1.345 * s / a
			} else {
				wts[k] = 1
			}
		}
	}
	return w
}

// solve solves the augmented n x (n+1) system by Gaussian elimination.
func solve(a [][]float64) []float64 {
	n := len(a)
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		a[c], a[p] = a[p], a[c]
		for r := c + 1; r < n; r++ {
			f := a[r][c] / a[c][c]
			for k := c; k <= n; k++ {
				a[r][k] -= f * a[c][k]
			}
		}
	}
	x := make([]float64, n)
	for r := n - 1; r >= 0; r-- {
		s := a[r][n]
		for k := r + 1; k < n; k++ {
			s -= a[r][k] * x[k]
		}
		x[r] = s / a[r][r]
	}
	return x
}

func predict(w []float64, p fitPair) float64 {
	e := p.fixed
	for i := range w {
		e += w[i] * p.x[i]
	}
	return e
}

// TestFitWeights refits the estimator's weights on the real sessions and
// checks that DefaultWeights are that fit. It also reports how the fit
// generalises: each session is predicted with weights fitted on the
// others (leave one session out).
func TestFitWeights(t *testing.T) {
	ps := growthPairs(loadReal(t))
	if len(ps) < 500 {
		t.Fatalf("only %d growth pairs", len(ps))
	}
	w := huber(ps)
	var got []string
	def := []float64{DefaultWeights.Alpha, DefaultWeights.Digit, DefaultWeights.Space, DefaultWeights.Backslash, DefaultWeights.Punct, DefaultWeights.Lead}
	names := []string{"Alpha", "Digit", "Space", "Backslash", "Punct", "Lead"}
	for i, v := range w {
		got = append(got, fmt.Sprintf("%s: %.4f", names[i], v))
		if math.Abs(v-def[i]) > 0.01 && math.Abs(v-def[i]) > 0.03*def[i] {
			t.Errorf("fitted %s = %.4f, DefaultWeights has %.4f: update DefaultWeights", names[i], v, def[i])
		}
	}
	t.Logf("fitted on %d pairs: %s", len(ps), strings.Join(got, ", "))

	// Leave one session out.
	sessions := map[string]bool{}
	for _, p := range ps {
		sessions[p.session] = true
	}
	var sumE, sumR, sumIn float64
	var lines []string
	ids := make([]string, 0, len(sessions))
	for id := range sessions {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		var train, test []fitPair
		for _, p := range ps {
			if p.session == id {
				test = append(test, p)
			} else {
				train = append(train, p)
			}
		}
		wo := huber(train)
		var e, r, in float64
		for _, p := range test {
			e += predict(wo, p)
			in += predict(w, p)
			r += p.y
		}
		sumE, sumR, sumIn = sumE+e, sumR+r, sumIn+in
		lines = append(lines, fmt.Sprintf("%-40.40s pairs=%3d out-of-sample %+5.1f%%  in-sample %+5.1f%%", id, len(test), 100*(e/r-1), 100*(in/r-1)))
	}
	t.Logf("leave-one-session-out aggregate growth error %+.1f%% (in-sample %+.1f%%)\n%s",
		100*(sumE/sumR-1), 100*(sumIn/sumR-1), strings.Join(lines, "\n"))
	if math.Abs(sumE/sumR-1) > 0.08 {
		t.Errorf("leave-one-session-out aggregate error %+.1f%% beyond 8%%", 100*(sumE/sumR-1))
	}
}
