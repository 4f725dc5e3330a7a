package pass

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/ctxguard/ctxguard/internal/breaker"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/store"
)

// Env is what the engine compiles every pass with besides its section.
// The same Env serves every module, so a field is here because the engine
// provides it, not because one pass needs it.
type Env struct {
	// Blobs keeps removed content and the passes' records. Required.
	Blobs *store.Blobs
	// Log receives the passes' background work (Compile sets a discarding
	// one when nil).
	Log *slog.Logger
	// Now is the clock (Compile sets time.Now when nil).
	Now func() time.Time
	// Summarizer writes summaries with a model (compaction, digests);
	// nil: passes write them without one, or not at all.
	Summarizer Summarizer
	// Signatures says which model family minted the signed blocks the
	// engine saw in answers; nil: a pass that needs it makes an empty
	// one of its own.
	Signatures Signatures
	// Previous is, during a reload, the pass this module compiled for the
	// configuration being replaced, when that configuration had the same
	// section and the Env the same Blobs and Summarizer; nil otherwise
	// (Compile sets it). A pass with state worth keeping (the summaries
	// compaction is writing) returns it rather than a new one; others
	// ignore it.
	Previous pipeline.Pass
}

// Signatures attributes signed blocks (a thinking block's signature, a
// redacted_thinking block's data, a reasoning item's encrypted_content,
// as the JSON string sent) to the model family that minted them.
type Signatures interface {
	Family(sig []byte) (family string, ok bool)
}

// Summarizer writes a summary with a model: a call of ctxguard's own
// (package summarize), or none (the passes' extractive summaries).
// Implementations are safe for concurrent use and honour ctx.
type Summarizer interface {
	Summarize(ctx context.Context, j *Job) (Summary, error)
}

// Job is one summary to write.
type Job struct {
	// Protocol is the name of the session's protocol ("anthropic",
	// "responses", "chat"); the default summarizer calls the session's
	// own upstream in it.
	Protocol string
	// Model is the model the session's request named.
	Model string
	// Header is the header of the session's request that started the
	// job: the credentials the default summarizer calls with. It is
	// held in memory only for the call, never stored, never logged.
	Header http.Header
	// System is the summarizer's instructions; Input the text to
	// summarize (the previous summary and the span, as a transcript).
	System, Input string
	// MaxTokens bounds the summary's length.
	MaxTokens int
	// Overdue, if not nil, is closed when a request that needed this
	// summary stopped waiting for it (compaction's wait passed): the
	// call goes on, and a summarizer with a breaker counts it as timed
	// out.
	Overdue <-chan struct{}
}

// ErrBreakerOpen is matched by the error of a summary a Breaker refused,
// or cut short, because its model API is known to fail. It is no failure
// of the span: its summary is asked for again once the breaker lets
// calls through.
var ErrBreakerOpen = breaker.ErrOpen

// Breaker is implemented by a Summarizer that stops calling a model API
// that failed (summarize.Client, per upstream and model): its calls are
// refused for a back-off period, then one call probes it.
//
// Compaction asks it before starting a summary: when a call would be
// refused, none starts, and a request at the overflow line takes the
// extractive summary at once. A request waits for a model's summary only
// while the breaker is closed: never for a probe, whose answer is in
// doubt.
type Breaker interface {
	// Allows reports whether a call for j (its Protocol and Model) would
	// be made now, and whether it would be the probe of a breaker that
	// opened. With count, a refusal is counted as a call refused:
	// compaction counts the summary it writes without a model because
	// of the breaker, not each request that asked while its span waited.
	Allows(j *Job, count bool) (ok, probe bool)
}

// Summary is a summarizer's answer.
type Summary struct {
	Text string
	// Model is the model that wrote it; InputTokens and OutputTokens
	// what its API reported (0 for the extractive summary).
	Model                     string
	InputTokens, OutputTokens int
}
