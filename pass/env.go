package pass

import (
	"context"
	"log/slog"
	"net/http"
	"time"

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
}

// Summary is a summarizer's answer.
type Summary struct {
	Text string
	// Model is the model that wrote it; InputTokens and OutputTokens
	// what its API reported (0 for the extractive summary).
	Model                     string
	InputTokens, OutputTokens int
}
