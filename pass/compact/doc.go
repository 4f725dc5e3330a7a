// Package compact keeps a session inside its model's window: ahead of the
// limit it replaces the oldest part of the history with one summary
// message, written in the background by a model (Summarizer) or, as the
// fallback, extracted without one (Extract).
package compact
