package observe

import (
	"log/slog"
	"sync/atomic"

	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

// calibrationKey is the store record holding the learned calibration.
const calibrationKey = "calibration"

// LoadCalibration returns the calibration st holds, or a new one when it
// holds none (or one that does not decode, which log is told).
func LoadCalibration(st store.Store, log *slog.Logger) *tokens.Calibration {
	c := tokens.NewCalibration()
	ctx, cancel := store.CallContext()
	defer cancel()
	if b, err := st.Get(ctx, calibrationKey); err == nil {
		if err := c.UnmarshalJSON(b); err != nil {
			log.Warn("ignoring a stored calibration that does not decode", "err", err)
		}
	}
	return c
}

// Calibration feeds the token estimator's calibration (Tokens) with the
// usage the API reports, and saves it to the store every 20 usages and
// at Save. Reports read the calibration; rewrite decisions never do (they
// are a function of the session's history alone). Make it with NewSet.
type Calibration struct {
	Tokens   *tokens.Calibration
	store    store.Store
	log      *slog.Logger
	observed *atomic.Int64 // the usages taken (Stats.Observed)
}

// Observe implements record.Observer: it learns from the usage of every
// 2xx answer.
func (c *Calibration) Observe(x *record.Exchange) {
	if x.Usage != nil && x.ModelID != "" && x.Status/100 == 2 {
		c.ObserveSession(x.Session, x.ModelID, x.TokensAfter, *x.Usage)
	}
}

// ObserveSession records the usage u the API reported for a request of
// the session with the given key (may be empty) whose body ctxguard
// estimated at estimate tokens: the calibration learns from it and from
// the growth since the session's previous request
// (tokens.Calibration.ObserveSession).
func (c *Calibration) ObserveSession(session, modelID string, estimate int, u protocol.Usage) {
	if c.Tokens.ObserveSession(session, modelID, estimate, u.PromptTokens()) {
		if c.observed.Add(1)%20 == 0 {
			c.Save()
		}
	}
}

// Save writes the calibration to the store; a failure is logged.
func (c *Calibration) Save() {
	b, err := c.Tokens.MarshalJSON()
	if err == nil {
		ctx, cancel := store.CallContext()
		err = c.store.Put(ctx, calibrationKey, b)
		cancel()
	}
	if err != nil {
		c.log.Warn("saving the calibration", "err", err)
	}
}
