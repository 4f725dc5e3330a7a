package engine

import (
	"fmt"
	"reflect"
	"strconv"

	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/auth"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/pass/digest"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/summarize"
)

// compiled is what an Engine builds from its configuration: one value, swapped
// whole by Reload. A request reads it once, when it starts, and keeps it
// to the end (its overflow retry included), so it never mixes two
// configurations. What an Engine learns and counts (the store, calibration,
// learned limits, statistics, the records' bus, the thinking guard's
// signatures) lives beside it and outlives reloads.
type compiled struct {
	cfg        config.Config
	models     *model.Registry
	blobs      *store.Blobs
	summarizer pass.Summarizer // nil: extractive summaries only
	pipe       *pipeline.Pipeline
	built      *pass.Built // the pipeline's passes
	compacts   bool        // compaction is on: an overflow is retried compacted (overflow.go)
	// keys are auth_token's (nil without one): the token, the sign-in
	// cookie, the blob links' signatures.
	keys *auth.Keys
	// gen counts the reloads that changed the configuration; the
	// cached sessions are keyed by it (cacheKey), so that what passes
	// memoized under one configuration never serves another.
	gen uint64
}

// current returns what new requests use.
func (e *Engine) current() *compiled { return e.compiled.Load() }

// cacheKey is the key of the cached session a request under cache key
// key uses under this configuration ("" caches none).
func (s *compiled) cacheKey(key string) string {
	if key == "" || s.gen == 0 {
		return key
	}
	return strconv.FormatUint(s.gen, 10) + "/" + key
}

// build compiles cfg (validated). With prev, what it replaces, it keeps
// what cfg did not change: the blobs' memo, the summarizer and the
// compaction pass with the summaries it is writing.
func (e *Engine) build(cfg config.Config, prev *compiled) (*compiled, error) {
	s := &compiled{cfg: cfg, keys: auth.New(cfg.AuthToken)}
	var err error
	if prev != nil && reflect.DeepEqual(prev.cfg.Models, cfg.Models) {
		s.models = prev.models
	} else if s.models, err = model.NewRegistry(cfg.Models); err != nil {
		return nil, err
	}
	base := ""
	switch {
	case cfg.PublicURL != "":
		base = cfg.PublicURL
	case cfg.Local.Access != "off":
		base = "http://" + config.LocalAddr(cfg.Listen)
	}
	if prev != nil && prev.blobs.BaseURL == base && prev.cfg.AuthToken == cfg.AuthToken {
		s.blobs = prev.blobs
	} else {
		s.blobs = &store.Blobs{Store: e.store, TTL: cfg.BlobTTL, Now: e.now, BaseURL: base}
		if s.keys != nil {
			// Blob links are capabilities: an agent fetches its own
			// blob without the token, and no other.
			s.blobs.Sign = s.keys.SignBlob
		}
	}
	cc := pass.Get[compact.Config](cfg.Passes)
	s.compacts = cc.Enabled
	switch {
	case e.summarizer != nil: // Options.Summarizer
		s.summarizer = e.summarizer
	case (cc.Enabled || pass.Get[digest.Config](cfg.Passes).Enabled) && cc.Summarizer.Mode != "none":
		if prev != nil && prev.summarizer != nil && reflect.DeepEqual(pass.Get[compact.Config](prev.cfg.Passes).Summarizer, cc.Summarizer) && prev.cfg.Upstreams == cfg.Upstreams {
			s.summarizer = prev.summarizer
			break
		}
		sc, err := summarize.New(cc.Summarizer, e.protocols, cfg.Upstreams.ByFamily(), nil, e.log)
		if err != nil {
			return nil, err
		}
		sc.Now = e.now
		s.summarizer = sc
	}
	d := Deps{Blobs: s.blobs, Log: e.log, Summarizer: s.summarizer, Now: e.now, Signatures: e.sigs}
	var prevBuilt *pass.Built
	if prev != nil {
		prevBuilt = prev.built
	}
	if s.built, err = compile(cfg, d, prevBuilt); err != nil {
		return nil, err
	}
	s.pipe = pipeline.New(e.log, s.built.Passes()...)
	if prev != nil {
		s.gen = prev.gen + 1
	}
	return s, nil
}

// Reloaded says what a Reload did.
type Reloaded struct {
	// Changed are the top-level keys whose values changed
	// (config.Changed), now in force. Empty: cfg was the configuration
	// already in force.
	Changed []string
	// Kept are the restart-only settings (config.RestartOnly) that cfg
	// changes and the Engine kept at their running values: they take
	// effect at the next start.
	Kept []string
	// From is the configuration that was in force before, To the one
	// cfg became (with the restart-only settings kept): equal when
	// Changed is empty.
	From, To config.Config
}

// Reload makes cfg the Engine's configuration for the requests that
// start after it returns; those in flight end with the one they started
// with. cfg is checked like a new one (paths expanded, Validate), then its
// restart-only settings (config.RestartOnly) are set to the running
// values (Reloaded.Kept names those that differed) and the result is
// validated again. An invalid cfg is an error and changes nothing.
//
// What the Engine learned is kept: the store, the calibration, the
// learned limits, the records' observers, the thinking guard's
// signatures. The cached sessions, and what the passes memoized in them,
// are dropped when the configuration changed: the next request of each
// session is rewritten from scratch, to the bytes a restart with cfg
// would give. The compaction pass, and the summaries it is writing, is
// kept when compact's settings, the summarizer, the blob base URL and
// auth_token are unchanged (pass.Compile); a replaced one finishes its
// summaries in the background until Close.
func (e *Engine) Reload(cfg config.Config) (Reloaded, error) {
	if err := cfg.ExpandPaths(); err != nil {
		return Reloaded{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Reloaded{}, err
	}
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	cur := e.current()
	kept := config.KeepRestartOnly(cur.cfg, &cfg)
	if err := cfg.Validate(); err != nil {
		return Reloaded{}, fmt.Errorf("with the restart-only settings kept (%v): %w", kept, err)
	}
	r := Reloaded{Changed: config.Changed(cur.cfg, cfg), Kept: kept, From: cur.cfg, To: cfg}
	if len(r.Changed) == 0 {
		return r, nil
	}
	next, err := e.build(cfg, cur)
	if err != nil {
		return Reloaded{}, err
	}
	e.compiled.Store(next)
	e.retired = append(e.retired, cur.built.Closers(next.built)...)
	e.sessions.dropAll() // unreachable now (compiled.cacheKey); free them
	return r, nil
}

// Model returns the registry entry of model id under the configuration
// in force.
func (e *Engine) Model(id string) model.Info { return e.current().models.Lookup(id) }

// Summarizer returns the summarizer in force, or nil (extractive
// summaries only).
func (e *Engine) Summarizer() pass.Summarizer { return e.current().summarizer }

// Keys returns auth_token's keys in force (nil without one): the token,
// the sign-in cookie, the blob links' signatures.
func (e *Engine) Keys() *auth.Keys { return e.current().keys }
