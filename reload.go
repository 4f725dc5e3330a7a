package ctxguard

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

// setup is what a Guard builds from its configuration: one value, swapped
// whole by Reload. A request reads it once, when it starts, and keeps it
// to the end (its overflow retry included), so it never mixes two
// configurations. What a Guard learns and counts (the store, calibration,
// learned limits, statistics, the records' bus, the thinking guard's
// signatures) lives beside it and outlives reloads.
type setup struct {
	cfg        config.Config
	models     *model.Registry
	blobs      *store.Blobs
	summarizer pass.Summarizer // nil: extractive summaries only
	pipe       *pipeline.Pipeline
	built      *pass.Built // the pipeline's passes
	compacts   bool        // compaction is on: an overflow is retried compacted (recover.go)
	// keys are auth_token's (nil without one): the token, the sign-in
	// cookie, the blob links' signatures.
	keys *auth.Keys
	// gen counts the reloads that changed the configuration; the
	// sessions' memories are keyed by it (memoKey), so that what passes
	// memoized under one configuration never serves another.
	gen uint64
}

// current returns the setup new requests use.
func (g *Guard) current() *setup { return g.setup.Load() }

// memoKey is the key of the session memory a request of the session key
// uses under this setup ("" remembers none).
func (s *setup) memoKey(key string) string {
	if key == "" || s.gen == 0 {
		return key
	}
	return strconv.FormatUint(s.gen, 10) + "/" + key
}

// build builds the setup of cfg (validated). With prev, the setup it
// replaces, it keeps what cfg did not change: the blobs' memo, the
// summarizer and the compaction pass with the summaries it is writing.
func (g *Guard) build(cfg config.Config, prev *setup) (*setup, error) {
	s := &setup{cfg: cfg, keys: auth.New(cfg.AuthToken)}
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
		s.blobs = &store.Blobs{Store: g.store, TTL: cfg.BlobTTL, Now: g.now, BaseURL: base}
		if s.keys != nil {
			// Blob links are capabilities: an agent fetches its own
			// blob without the token, and no other.
			s.blobs.Sign = s.keys.SignBlob
		}
	}
	cc := pass.Get[compact.Config](cfg.Passes)
	s.compacts = cc.Enabled
	switch {
	case g.summarizer != nil: // WithSummarizer
		s.summarizer = g.summarizer
	case (cc.Enabled || pass.Get[digest.Config](cfg.Passes).Enabled) && cc.Summarizer.Mode != "none":
		if prev != nil && prev.summarizer != nil && reflect.DeepEqual(pass.Get[compact.Config](prev.cfg.Passes).Summarizer, cc.Summarizer) && prev.cfg.Upstreams == cfg.Upstreams {
			s.summarizer = prev.summarizer
			break
		}
		ups := map[string]string{"anthropic": cfg.Upstreams.Anthropic, "openai": cfg.Upstreams.OpenAI}
		sc, err := summarize.New(cc.Summarizer, g.protocols, ups, nil, g.log)
		if err != nil {
			return nil, err
		}
		sc.Now = g.now
		s.summarizer = sc
	}
	d := Deps{Blobs: s.blobs, Log: g.log, Summarizer: s.summarizer, Now: g.now, Signatures: g.sigs}
	var prevBuilt *pass.Built
	if prev != nil {
		prevBuilt = prev.built
	}
	if s.built, err = compile(cfg, d, prevBuilt); err != nil {
		return nil, err
	}
	s.pipe = pipeline.New(g.log, s.built.Passes()...)
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
	// changes and the Guard kept at their running values: they take
	// effect at the next start.
	Kept []string
	// Handler reports that the change concerns the proxy (upstreams,
	// routes, max_body, limits.max_buffered, auth_token, the proxy's
	// timeouts, log.dump_bodies): a Handler built before keeps the old
	// values; build a new one.
	Handler bool
}

// Reload makes cfg the Guard's configuration for the requests that start
// after it returns; those in flight end with the one they started with.
// cfg is checked like New's (paths expanded, Validate), then its
// restart-only settings (config.RestartOnly) are set to the running
// values (Reloaded.Kept names those that differed) and the result is
// validated again. An invalid cfg is an error and changes nothing.
//
// What the Guard learned and counts is kept: the store, the calibration,
// the learned limits, the statistics, the records' observers (dashboard,
// metrics), the thinking guard's signatures. The sessions' memories of
// their previous requests, and what the passes memoized in them, are
// dropped when the configuration changed: the next request of each
// session is rewritten from scratch, to the bytes a restart with cfg
// would give. The compaction pass, and the summaries it is writing, is
// kept when compact's settings, the summarizer, the blob base URL and
// auth_token are unchanged; a replaced one finishes its summaries in the
// background until Close.
func (g *Guard) Reload(cfg config.Config) (Reloaded, error) {
	if err := cfg.ExpandPaths(); err != nil {
		return Reloaded{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Reloaded{}, err
	}
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	cur := g.current()
	kept := config.KeepRestartOnly(cur.cfg, &cfg)
	if err := cfg.Validate(); err != nil {
		return Reloaded{}, fmt.Errorf("with the restart-only settings kept (%v): %w", kept, err)
	}
	r := Reloaded{Changed: config.Changed(cur.cfg, cfg), Kept: kept}
	if len(r.Changed) == 0 {
		return r, nil
	}
	next, err := g.build(cfg, cur)
	if err != nil {
		return Reloaded{}, err
	}
	r.Handler = !reflect.DeepEqual(handlerSettings(cur.cfg), handlerSettings(cfg))
	g.setup.Store(next)
	g.retired = append(g.retired, cur.built.Closers(next.built)...)
	g.recent.dropAll() // unreachable now (setup.memoKey); free them
	return r, nil
}

// handlerSettings are the settings Handler builds a proxy with.
func handlerSettings(c config.Config) any {
	return struct {
		ups         config.Upstreams
		routes      map[string]string
		maxBody     int64
		maxBuffered int64
		token       string
		timeouts    any
		dump        bool
	}{c.Upstreams, c.Routes, c.MaxBody, c.Limits.MaxBuffered, c.AuthToken, proxyTimeouts(c.Timeouts), c.Log.DumpBodies}
}

// closeSetups stops the background work of the passes, the current ones
// and those reloads replaced.
func (g *Guard) closeSetups() {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	closeAll(append(g.retired, g.current().built.Closers(nil)...))
	g.retired = nil
}
