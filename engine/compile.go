package engine

import (
	"log/slog"
	"time"

	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/pass"
	_ "github.com/ctxguard/ctxguard/pass/all" // the passes ctxguard ships
	"github.com/ctxguard/ctxguard/pass/thinking"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/store"
)

// Deps are what a compiled pipeline's passes work with besides their
// configuration (pass.Env).
type Deps struct {
	// Blobs keeps removed content. Required.
	Blobs *store.Blobs
	// Log receives the passes' background work (default: discard).
	Log *slog.Logger
	// Summarizer writes compaction summaries and digests; nil writes
	// summaries without a model (the extractive summary).
	Summarizer pass.Summarizer
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Signatures tells the thinking guard who minted thinking blocks; nil
	// makes a cache of its own (which nothing fills).
	Signatures *thinking.Signatures
}

// Compile builds the pipeline cfg describes: the passes it switches on,
// as package pass's registry has them (package pass/all gives their order
// and why), each compiled with d. stop ends the passes' background work
// (the summaries compaction is writing); call it once the pipeline is no
// longer used.
func Compile(cfg config.Config, d Deps) (pipe *pipeline.Pipeline, stop func(), err error) {
	b, err := compile(cfg, d, nil)
	if err != nil {
		return nil, nil, err
	}
	return pipeline.New(d.Log, b.Passes()...), func() { closeAll(b.Closers(nil)) }, nil
}

// compile builds cfg's passes with d; prev is what compile built for the
// configuration a reload replaces (pass.Compile), or nil.
func compile(cfg config.Config, d Deps, prev *pass.Built) (*pass.Built, error) {
	env := pass.Env{Blobs: d.Blobs, Log: d.Log, Now: d.Now, Summarizer: d.Summarizer}
	if d.Signatures != nil { // not a non-nil interface holding nil
		env.Signatures = d.Signatures
	}
	return pass.Compile(cfg.Passes, env, prev)
}

// closeAll stops the background work of passes.
func closeAll(passes []pass.Closer) {
	for _, p := range passes {
		p.Close()
	}
}
