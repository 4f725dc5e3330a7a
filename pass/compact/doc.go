// Package compact keeps a session inside its model's window: ahead of the
// limit it replaces the oldest part of the history with one summary
// message, written in the background by a model (pass.Summarizer) or, as the
// fallback, extracted without one. Either way the compaction record keeps
// the facts of the summarized messages as data (the user's requests, the
// files, searches, commands, failures, images, the plan, the latest
// assistant texts): the extractive summary renders them within the
// budget, a model's summary is followed by the essentials, and a later
// compaction merges the records instead of parsing text back.
package compact
