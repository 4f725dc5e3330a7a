package compact

import (
	"context"
	"net/http"

	"github.com/ctxguard/ctxguard/internal/breaker"
)

// Summarizer writes the summary of a compaction: a model call of ctxguard's
// own (package summarize), or none (the extractive summary).
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
	// summary stopped waiting for it (Config.Wait passed): the call goes
	// on, and a summarizer with a breaker counts it as timed out.
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
