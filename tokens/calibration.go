package tokens

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/ctxguard/ctxguard/model"
)

// Calibration learns, per model, how the estimate of what was sent
// compares with the prompt tokens the API reports in usage (input +
// cache creation + cache read), and scales estimates by that factor.
//
// It is for reporting and for the overflow guard (will this request fit
// the window?). It must never feed back into how an earlier block was
// rewritten: rewrite decisions use the uncalibrated Estimate, so that
// appending turns cannot change them (BRIEF principle 3).
//
// Models are keyed by model.Canonical, so dated and undated ids share a
// factor. A Calibration is safe for concurrent use and serializes to
// JSON for a store to persist. The zero Calibration is ready to use and
// never forgets; NewCalibration's forgets slowly.
type Calibration struct {
	mu       sync.Mutex
	decay    float64
	byModel  map[string]*calState
	halfLife int
}

type calState struct {
	Estimated float64 `json:"estimated"` // decayed sum of accepted estimates
	Actual    float64 `json:"actual"`    // decayed sum of the matching usage
	N         int     `json:"n"`         // accepted observations
	Rejected  int     `json:"rejected"`  // observations refused as outliers
}

// Calibration limits.
const (
	// CalibrationMinEstimate: observations with a smaller estimate are too
	// noisy to learn from and are ignored.
	CalibrationMinEstimate = 256
	// CalibrationMaxRatio: an observation whose actual/estimated ratio is
	// beyond this factor either way is refused as an outlier (a usage
	// that belongs to another request, a body the estimate did not see).
	CalibrationMaxRatio = 3.0
	// CalibrationMinObservations: the factor stays 1 until this many
	// observations were accepted.
	CalibrationMinObservations = 3
	// Factors are clamped to [1/2, 2].
	calibrationMinFactor = 0.5
	calibrationMaxFactor = 2.0
	// DefaultHalfLife is the number of observations after which an
	// observation counts half, in NewCalibration.
	DefaultHalfLife = 50
)

// NewCalibration returns an empty Calibration whose observations fade
// with a half-life of DefaultHalfLife observations, so a changed client
// or tokenizer is followed.
func NewCalibration() *Calibration { return NewCalibrationHalfLife(DefaultHalfLife) }

// NewCalibrationHalfLife returns an empty Calibration with the given
// half-life in observations; 0 means observations never fade.
func NewCalibrationHalfLife(halfLife int) *Calibration {
	c := &Calibration{byModel: map[string]*calState{}, decay: 1, halfLife: max(halfLife, 0)}
	if halfLife > 0 {
		c.decay = math.Pow(0.5, 1/float64(halfLife))
	}
	return c
}

// Observe records that a request to modelID estimated at estimated tokens
// was billed actual prompt tokens. It reports whether the observation was
// accepted (see the limits above).
func (c *Calibration) Observe(modelID string, estimated, actual int) bool {
	if estimated < CalibrationMinEstimate || actual <= 0 {
		return false
	}
	r := float64(actual) / float64(estimated)
	key := model.Canonical(modelID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byModel == nil { // the zero Calibration: observations never fade
		c.byModel, c.decay = map[string]*calState{}, 1
	}
	st := c.byModel[key]
	if st == nil {
		st = &calState{}
		c.byModel[key] = st
	}
	if r > CalibrationMaxRatio || r < 1/CalibrationMaxRatio {
		st.Rejected++
		return false
	}
	st.Estimated = st.Estimated*c.decay + float64(estimated)
	st.Actual = st.Actual*c.decay + float64(actual)
	st.N++
	return true
}

// Factor returns actual/estimated for modelID, clamped to [0.5, 2], or 1
// if fewer than CalibrationMinObservations were accepted.
func (c *Calibration) Factor(modelID string) float64 {
	key := model.Canonical(modelID)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.factorLocked(c.byModel[key])
}

func (c *Calibration) factorLocked(st *calState) float64 {
	if st == nil || st.N < CalibrationMinObservations || st.Estimated <= 0 {
		return 1
	}
	return min(max(st.Actual/st.Estimated, calibrationMinFactor), calibrationMaxFactor)
}

// Adjust scales an estimate for modelID by its factor, rounding up (the
// overflow guard would rather be early than late).
func (c *Calibration) Adjust(modelID string, estimate int) int {
	return int(math.Ceil(float64(estimate) * c.Factor(modelID)))
}

// ModelFactor is one model's learned state.
type ModelFactor struct {
	Model        string
	Factor       float64
	Observations int
	Rejected     int
}

// Snapshot returns every model's state, sorted by model.
func (c *Calibration) Snapshot() []ModelFactor {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]ModelFactor, 0, len(c.byModel))
	for k, st := range c.byModel {
		out = append(out, ModelFactor{Model: k, Factor: c.factorLocked(st), Observations: st.N, Rejected: st.Rejected})
	}
	slices.SortFunc(out, func(a, b ModelFactor) int { return strings.Compare(a.Model, b.Model) })
	return out
}

type calJSON struct {
	Version  int                  `json:"version"`
	HalfLife int                  `json:"half_life"`
	Models   map[string]*calState `json:"models"`
}

// MarshalJSON writes the learned state (not the lock).
func (c *Calibration) MarshalJSON() ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return json.Marshal(calJSON{Version: 1, HalfLife: c.halfLife, Models: c.byModel})
}

// UnmarshalJSON replaces c's state with a serialized one.
func (c *Calibration) UnmarshalJSON(b []byte) error {
	var v calJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if v.Version != 1 {
		return fmt.Errorf("tokens: calibration version %d not supported", v.Version)
	}
	for k, st := range v.Models {
		if st == nil || st.Estimated < 0 || st.Actual < 0 || st.N < 0 || st.Rejected < 0 ||
			math.IsNaN(st.Estimated) || math.IsNaN(st.Actual) || math.IsInf(st.Estimated, 0) || math.IsInf(st.Actual, 0) {
			return fmt.Errorf("tokens: calibration for %q is invalid", k)
		}
	}
	n := NewCalibrationHalfLife(v.HalfLife)
	if v.Models != nil {
		n.byModel = v.Models
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.decay, c.halfLife, c.byModel = n.decay, n.halfLife, n.byModel
	return nil
}
