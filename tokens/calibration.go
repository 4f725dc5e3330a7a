package tokens

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/ctxguard/ctxguard/model"
)

// Calibration learns, per model, how the estimate compares with the
// prompt tokens the API reports in usage (input + cache creation + cache
// read), and scales estimates by that factor.
//
// It learns from growth: between consecutive requests of one session, the
// increase of the estimate against the increase of the real prompt. The
// fixed part of a request (system prompt, tool schemas) then cancels, and
// every turn is an observation of its own instead of the same prefix seen
// again and again. The factor is a robust fit over a window of the most
// recent growth pairs (see Factor), so that a pair whose usage belongs to
// another request, or whose content the estimate misreads, moves it
// little. Whole-request observations (Observe) are kept as well and serve
// until a model has growth pairs.
//
// It is for reporting and for the overflow guard (will this request fit
// the window?). It must never feed back into how an earlier block was
// rewritten: rewrite decisions use the uncalibrated Estimate, so that
// appending turns cannot change them (a deterministic, monotone history); compaction keeps
// OverflowMargin free below the overflow line instead.
//
// Models are keyed by model.Canonical, so dated and undated ids share a
// factor; a model without data of its own borrows the growth of its
// family (model.Family: one tokenizer per provider). A Calibration is safe
// for concurrent use and serializes to JSON for a store to persist (the
// per-session bookkeeping of ObserveSession is not persisted). The zero
// Calibration is ready to use and never forgets; NewCalibration's forgets
// slowly.
type Calibration struct {
	mu       sync.Mutex
	decay    float64
	halfLife int
	byModel  map[string]*calState
	gen      uint64                  // counts accepted growth pairs, for the family cache
	families map[string]familyFit    // growth fit of each family's pooled pairs
	sessions map[string]*GrowthTrack // previous request of each session (bounded)
	seq      uint64                  // last use of a session, for eviction
}

type calState struct {
	// Whole-request observations (Observe), the only state of version 1.
	Estimated float64 `json:"estimated"` // decayed sum of accepted estimates
	Actual    float64 `json:"actual"`    // decayed sum of the matching usage
	N         int     `json:"n"`         // accepted observations
	Rejected  int     `json:"rejected"`  // observations refused as outliers
	// Growth pairs [estimated, actual], oldest first, at most
	// CalibrationWindow; absent in state written before they existed.
	Growth         [][2]int `json:"growth,omitempty"`
	GrowthN        int      `json:"growth_n,omitempty"`        // accepted growth pairs, ever
	GrowthRejected int      `json:"growth_rejected,omitempty"` // growth pairs refused as outliers

	fit   float64 // cached fitGrowth of Growth; valid while !dirty
	dirty bool
}

type familyFit struct {
	gen    uint64
	factor float64
	ok     bool
}

// Calibration limits.
const (
	// CalibrationMinEstimate: observations (whole requests, or growth
	// between two requests) with a smaller estimate are too noisy to
	// learn from and are ignored.
	CalibrationMinEstimate = 256
	// CalibrationMaxRatio: an observation whose actual/estimated ratio is
	// beyond this factor either way is refused as an outlier (a usage
	// that belongs to another request, a body the estimate did not see).
	CalibrationMaxRatio = 3.0
	// CalibrationMinObservations: a model's factor rests on its growth
	// pairs once it has this many, else on its whole-request
	// observations once it has this many, else on its family's growth
	// pairs, else it is 1.
	CalibrationMinObservations = 3
	// CalibrationWindow is the number of most recent growth pairs kept per
	// model.
	CalibrationWindow = 1024
	// CalibrationSessions is the number of sessions whose previous request
	// ObserveSession remembers; the least recently seen is forgotten
	// first.
	CalibrationSessions = 4096
	// Factors are clamped to [1/2, 2].
	calibrationMinFactor = 0.5
	calibrationMaxFactor = 2.0
	// DefaultHalfLife is the number of observations after which an
	// observation counts half, in NewCalibration.
	DefaultHalfLife = 50
	// huberK is the Huber threshold in robust standard deviations.
	huberK = 3.0
)

// NewCalibration returns an empty Calibration whose observations fade
// with a half-life of DefaultHalfLife observations, so a changed client
// or tokenizer is followed.
func NewCalibration() *Calibration { return NewCalibrationHalfLife(DefaultHalfLife) }

// NewCalibrationHalfLife returns an empty Calibration with the given
// half-life in observations; 0 means observations never fade (growth
// pairs still leave the window after CalibrationWindow newer ones).
func NewCalibrationHalfLife(halfLife int) *Calibration {
	c := &Calibration{byModel: map[string]*calState{}, decay: 1, halfLife: max(halfLife, 0)}
	if halfLife > 0 {
		c.decay = math.Pow(0.5, 1/float64(halfLife))
	}
	return c
}

// stateLocked returns the state of a canonical model key, creating it.
func (c *Calibration) stateLocked(key string) *calState {
	if c.byModel == nil { // the zero Calibration: observations never fade
		c.byModel, c.decay = map[string]*calState{}, 1
	}
	st := c.byModel[key]
	if st == nil {
		st = &calState{}
		c.byModel[key] = st
	}
	return st
}

// outlier reports whether actual/estimated is beyond CalibrationMaxRatio.
func outlier(estimated, actual int) bool {
	r := float64(actual) / float64(estimated)
	return r > CalibrationMaxRatio || r < 1/CalibrationMaxRatio
}

// Observe records that a whole request to modelID estimated at estimated
// tokens was billed actual prompt tokens. It reports whether the
// observation was accepted (see the limits above). Whole-request
// observations only serve a model that has no growth pairs yet.
func (c *Calibration) Observe(modelID string, estimated, actual int) bool {
	if estimated < CalibrationMinEstimate || actual <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.observeLocked(model.Canonical(modelID), estimated, actual)
}

func (c *Calibration) observeLocked(key string, estimated, actual int) bool {
	st := c.stateLocked(key)
	if outlier(estimated, actual) {
		st.Rejected++
		return false
	}
	st.Estimated = st.Estimated*c.decay + float64(estimated)
	st.Actual = st.Actual*c.decay + float64(actual)
	st.N++
	return true
}

// ObserveGrowth records that between two consecutive requests of one
// session to modelID the estimate grew by estimated tokens and the real
// prompt by actual tokens. It reports whether the pair was accepted (see
// the limits above).
func (c *Calibration) ObserveGrowth(modelID string, estimated, actual int) bool {
	if estimated < CalibrationMinEstimate || actual <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.growthLocked(model.Canonical(modelID), estimated, actual)
}

func (c *Calibration) growthLocked(key string, estimated, actual int) bool {
	st := c.stateLocked(key)
	if outlier(estimated, actual) {
		st.GrowthRejected++
		return false
	}
	if len(st.Growth) >= CalibrationWindow {
		st.Growth = slices.Delete(st.Growth, 0, len(st.Growth)-CalibrationWindow+1)
	}
	st.Growth = append(st.Growth, [2]int{estimated, actual})
	st.GrowthN++
	st.dirty = true
	c.gen++
	return true
}

// ObserveSession records that a request of session to modelID, estimated
// at estimated tokens, was billed actual prompt tokens: a whole-request
// observation (Observe), and a growth pair (ObserveGrowth) against the
// session's previous request when the two are comparable: same model,
// neither the estimate nor the real prompt shrank, and the previous
// request was the largest of the session's history so far (a smaller one
// may be a side request sharing the session key, whose usage says nothing
// about the growth). Usage must be observed in the order the requests
// were sent. An empty session records the whole-request observation only.
// It reports whether anything was accepted.
func (c *Calibration) ObserveSession(session, modelID string, estimated, actual int) bool {
	if actual <= 0 || estimated <= 0 {
		return false
	}
	key := model.Canonical(modelID)
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := estimated >= CalibrationMinEstimate && c.observeLocked(key, estimated, actual)
	if session == "" {
		return ok
	}
	t := c.sessions[session]
	if t == nil {
		if c.sessions == nil {
			c.sessions = map[string]*GrowthTrack{}
		}
		if len(c.sessions) >= CalibrationSessions {
			c.evictLocked()
		}
		t = &GrowthTrack{}
		c.sessions[session] = t
	}
	c.seq++
	t.used = c.seq
	if de, da, why := t.Next(key, estimated, actual); why == GrowthOK && de >= CalibrationMinEstimate && da > 0 {
		ok = c.growthLocked(key, de, da) || ok
	}
	return ok
}

// evictLocked forgets the least recently seen session.
func (c *Calibration) evictLocked() {
	var oldest string
	var at uint64 = math.MaxUint64
	for k, t := range c.sessions {
		if t.used < at {
			oldest, at = k, t.used
		}
	}
	delete(c.sessions, oldest)
}

// GrowthSkip says why a request's growth is not compared.
type GrowthSkip uint8

const (
	GrowthOK      GrowthSkip = iota
	GrowthFirst              // no previous request (of the same model)
	GrowthShrank             // the estimate shrank: the history was cut
	GrowthDrop               // the real prompt shrank although the estimate did not
	GrowthOffPeak            // the previous request was below the history's largest
)

// GrowthTrack follows the requests of one session: the previous one and
// the largest real prompt since the history was last cut. The rules are
// ObserveSession's; Accuracy measures with the same ones.
type GrowthTrack struct {
	model    string
	est, act int
	peak     int
	started  bool
	used     uint64
}

// next records a request and returns the growth since the previous one
// and whether it is comparable.
func (t *GrowthTrack) Next(key string, est, act int) (dEst, dAct int, why GrowthSkip) {
	prev := *t
	t.model, t.est, t.act, t.started = key, est, act, true
	switch {
	case !prev.started || prev.model != key:
		t.peak = act
		return 0, 0, GrowthFirst
	case est < prev.est:
		t.peak = act
		return 0, 0, GrowthShrank
	}
	t.peak = max(prev.peak, act)
	switch {
	case act < prev.act:
		return 0, 0, GrowthDrop
	case prev.act < prev.peak:
		return 0, 0, GrowthOffPeak
	}
	return est - prev.est, act - prev.act, GrowthOK
}

// Factor returns actual/estimated for modelID, clamped to [0.5, 2]: the
// robust fit of the model's growth pairs if it has at least
// CalibrationMinObservations, else the ratio of its whole-request
// observations if it has that many, else the fit of its family's growth
// pairs, else 1.
//
// The fit is a Huber M-estimate of actual = factor × estimated: each pair
// weighs by its age (the half-life) and its size, and a pair whose
// residual is beyond huberK robust standard deviations (residuals scaled
// by √estimated, the spread of a sum of per-token errors) counts less the
// further out it lies, where a plain ratio of sums lets one bad pair move
// the factor and a median ignores how large the pairs are.
func (c *Calibration) Factor(modelID string) float64 {
	f, _ := c.FactorBasis(modelID)
	return f
}

// FactorBasis is Factor, and what the factor rests on: "growth",
// "requests", "family", or "" when nothing was learned (the factor is 1).
func (c *Calibration) FactorBasis(modelID string) (float64, string) {
	key := model.Canonical(modelID)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.factorLocked(key)
}

// factorLocked returns the factor of a canonical key and what it rests on.
func (c *Calibration) factorLocked(key string) (float64, string) {
	clamp := func(f float64) float64 { return min(max(f, calibrationMinFactor), calibrationMaxFactor) }
	st := c.byModel[key]
	if st != nil && len(st.Growth) >= CalibrationMinObservations {
		if st.dirty || st.fit == 0 {
			st.fit, st.dirty = fitGrowth(st.Growth, c.decay), false
		}
		return clamp(st.fit), "growth"
	}
	if st != nil && st.N >= CalibrationMinObservations && st.Estimated > 0 {
		return clamp(st.Actual / st.Estimated), "requests"
	}
	fam := model.Family(key)
	if fam == "" {
		return 1, ""
	}
	ff, cached := c.families[fam]
	if !cached || ff.gen != c.gen {
		// The models in a fixed order: the fit's float sums, and so the
		// factor, do not depend on the map's order.
		var pool [][2]int
		for _, k := range slices.Sorted(maps.Keys(c.byModel)) {
			if s := c.byModel[k]; len(s.Growth) > 0 && model.Family(k) == fam {
				pool = append(pool, s.Growth...)
			}
		}
		ff = familyFit{gen: c.gen}
		if len(pool) >= CalibrationMinObservations {
			ff.factor, ff.ok = fitGrowth(pool, 1), true
		}
		if c.families == nil {
			c.families = map[string]familyFit{}
		}
		c.families[fam] = ff
	}
	if ff.ok {
		return clamp(ff.factor), "family"
	}
	return 1, ""
}

// fitGrowth fits actual = f × estimated over pairs (oldest first) whose
// weights fade by decay per newer pair: a Huber M-estimate by iteratively
// reweighted least squares, started at the size-weighted median ratio,
// with the scale fixed at the weighted median absolute residual (in
// units of √estimated) about that start.
func fitGrowth(pairs [][2]int, decay float64) float64 {
	n := len(pairs)
	if n == 0 {
		return 1
	}
	age := make([]float64, n)
	a := 1.0
	for i := n - 1; i >= 0; i-- {
		age[i] = a
		a *= decay
	}
	type wv struct{ v, w float64 }
	vals := make([]wv, n)
	wmedian := func() float64 {
		slices.SortFunc(vals, func(x, y wv) int {
			switch {
			case x.v < y.v:
				return -1
			case x.v > y.v:
				return 1
			}
			return 0
		})
		var tot float64
		for _, x := range vals {
			tot += x.w
		}
		acc := 0.0
		for _, x := range vals {
			acc += x.w
			if acc >= tot/2 {
				return x.v
			}
		}
		return vals[n-1].v
	}
	for i, p := range pairs {
		vals[i] = wv{float64(p[1]) / float64(p[0]), age[i] * float64(p[0])}
	}
	f := wmedian()
	for i, p := range pairs {
		vals[i] = wv{math.Abs(float64(p[1])-f*float64(p[0])) / math.Sqrt(float64(p[0])), age[i]}
	}
	s := wmedian() / 0.6745
	if s <= 0 {
		return f
	}
	for range 50 {
		var num, den float64
		for i, p := range pairs {
			e, r := float64(p[0]), float64(p[1])
			w := age[i]
			if z := math.Abs(r-f*e) / math.Sqrt(e); z > huberK*s {
				w *= huberK * s / z
			}
			num += w * r
			den += w * e
		}
		nf := num / den
		if math.Abs(nf-f) < 1e-9 {
			return nf
		}
		f = nf
	}
	return f
}

// Adjust scales an estimate for modelID by its factor, rounding up (the
// overflow guard would rather be early than late).
func (c *Calibration) Adjust(modelID string, estimate int) int {
	return int(math.Ceil(float64(estimate) * c.Factor(modelID)))
}

// ModelFactor is one model's learned state.
type ModelFactor struct {
	Model          string
	Factor         float64
	Basis          string // what Factor rests on: "growth", "requests", "family", or "" (1, nothing learned)
	Observations   int    // whole-request observations accepted
	Rejected       int    // whole-request observations refused as outliers
	Growth         int    // growth pairs accepted
	GrowthRejected int    // growth pairs refused as outliers
}

// Snapshot returns every model's state, sorted by model.
func (c *Calibration) Snapshot() []ModelFactor {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ModelFactor, 0, len(c.byModel))
	for k, st := range c.byModel {
		f, basis := c.factorLocked(k)
		out = append(out, ModelFactor{Model: k, Factor: f, Basis: basis, Observations: st.N, Rejected: st.Rejected,
			Growth: st.GrowthN, GrowthRejected: st.GrowthRejected})
	}
	slices.SortFunc(out, func(a, b ModelFactor) int { return strings.Compare(a.Model, b.Model) })
	return out
}

// calJSON is the serialized state. Growth pairs were added to version 1
// as optional fields, so state written before loads (it has whole-request
// observations only) and state written now loads in a version that
// predates them (which ignores the pairs).
type calJSON struct {
	Version  int                  `json:"version"`
	HalfLife int                  `json:"half_life"`
	Models   map[string]*calState `json:"models"`
}

// MarshalJSON writes the learned state (not the lock, not the sessions).
func (c *Calibration) MarshalJSON() ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return json.Marshal(calJSON{Version: 1, HalfLife: c.halfLife, Models: c.byModel})
}

// UnmarshalJSON replaces c's state with a serialized one. The sessions'
// previous requests are forgotten.
func (c *Calibration) UnmarshalJSON(b []byte) error {
	var v calJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if v.Version != 1 {
		return fmt.Errorf("tokens: calibration version %d not supported", v.Version)
	}
	for k, st := range v.Models {
		if st == nil || st.Estimated < 0 || st.Actual < 0 || st.N < 0 || st.Rejected < 0 || st.GrowthN < 0 || st.GrowthRejected < 0 ||
			math.IsNaN(st.Estimated) || math.IsNaN(st.Actual) || math.IsInf(st.Estimated, 0) || math.IsInf(st.Actual, 0) {
			return fmt.Errorf("tokens: calibration for %q is invalid", k)
		}
		for _, p := range st.Growth {
			if p[0] <= 0 || p[1] <= 0 {
				return fmt.Errorf("tokens: calibration for %q has an invalid growth pair %v", k, p)
			}
		}
		if len(st.Growth) > CalibrationWindow {
			st.Growth = st.Growth[len(st.Growth)-CalibrationWindow:]
		}
		st.dirty = true
	}
	n := NewCalibrationHalfLife(v.HalfLife)
	if v.Models != nil {
		n.byModel = v.Models
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.decay, c.halfLife, c.byModel = n.decay, n.halfLife, n.byModel
	c.families, c.sessions, c.gen = nil, nil, c.gen+1
	return nil
}
