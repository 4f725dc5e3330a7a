package engine

import (
	"log/slog"
	"time"

	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/pass/clear"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/pass/compress"
	"github.com/ctxguard/ctxguard/pass/digest"
	"github.com/ctxguard/ctxguard/pass/persist"
	"github.com/ctxguard/ctxguard/pass/thinking"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/store"
)

// Deps are what a compiled pipeline's passes work with besides their
// configuration.
type Deps struct {
	// Blobs keeps removed content. Required.
	Blobs *store.Blobs
	// Log receives the passes' background work (default: discard).
	Log *slog.Logger
	// Summarizer writes compaction summaries; nil writes them without a
	// model (the extractive summary).
	Summarizer compact.Summarizer
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Signatures tells the thinking guard who minted thinking blocks; nil
	// makes a cache of its own (which nothing fills).
	Signatures *thinking.Signatures
	// Compact, when set, is the compaction pass to use rather than a new
	// one (a reload that left compaction's settings alone keeps the
	// summaries it is writing).
	Compact *compact.Pass
}

// Compile builds the pipeline cfg describes, in the order passes must run:
// per-result compression first (it shortens a result the same way on every
// request), then the small model's digest of a large result (opt-in),
// then persistence of what is still too large (it stores the
// original and previews the compressed text), then history clearing,
// which replaces whole old results and so supersedes both, then
// compaction, which replaces the oldest part of a long history, cleared
// or not, with a summary. It also returns the compaction pass, if any,
// whose background work its owner stops (compact.Pass.Close).
func Compile(cfg config.Config, d Deps) (*pipeline.Pipeline, *compact.Pass, error) {
	var passes []pipeline.Pass
	if cfg.Compress.Enabled {
		p, err := compress.New(cfg.Compress)
		if err != nil {
			return nil, nil, err
		}
		passes = append(passes, p)
	}
	if cfg.Digest.Enabled {
		p, err := digest.New(cfg.Digest, d.Blobs, d.Summarizer, d.Log)
		if err != nil {
			return nil, nil, err
		}
		passes = append(passes, p)
	}
	if cfg.Persist.Enabled {
		p, err := persist.New(cfg.Persist, d.Blobs)
		if err != nil {
			return nil, nil, err
		}
		passes = append(passes, p)
	}
	if cfg.ThinkingGuard.Enabled {
		sigs := d.Signatures
		if sigs == nil {
			sigs = thinking.NewSignatures(cfg.ThinkingGuard, d.Now)
		}
		p, err := thinking.New(sigs)
		if err != nil {
			return nil, nil, err
		}
		passes = append(passes, p)
	}
	if cfg.Clear.Enabled {
		p, err := clear.New(cfg.Clear, d.Blobs)
		if err != nil {
			return nil, nil, err
		}
		passes = append(passes, p)
	}
	var cp *compact.Pass
	if cfg.Compact.Enabled {
		if cp = d.Compact; cp == nil {
			var err error
			cp, err = compact.New(cfg.Compact, compact.Options{Blobs: d.Blobs, Summarizer: d.Summarizer, Log: d.Log, Now: d.Now})
			if err != nil {
				return nil, nil, err
			}
		}
		passes = append(passes, cp)
	}
	return pipeline.New(d.Log, passes...), cp, nil
}
