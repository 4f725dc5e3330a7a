package compact

import (
	"context"
	"net/http"
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
}

// Summary is a summarizer's answer.
type Summary struct {
	Text string
	// Model is the model that wrote it; InputTokens and OutputTokens
	// what its API reported (0 for the extractive summary).
	Model                     string
	InputTokens, OutputTokens int
}
