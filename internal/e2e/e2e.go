// Package e2e holds ctxguard's end-to-end tests with real clients. They
// are behind the build tag e2e so that "go test ./..." stays fast:
//
//	go test -tags e2e ./internal/e2e/
//
// TestClaudeCode installs the Claude Code CLI from the npm registry into a
// cache folder (CTXGUARD_E2E_CACHE, default $TMPDIR/ctxguard-e2e; a given
// binary can be named with CTXGUARD_CLAUDE_BIN, a version with
// CTXGUARD_CLAUDE_VERSION), builds and starts a real ctxguard process, and
// drives the CLI through a recording hop and ctxguard to a scripted fake
// Anthropic upstream. It skips, saying why, only when npm or the client
// cannot be installed.
//
// TestCodex, TestOpencode and TestGeminiCLI do the same with Codex CLI,
// opencode and Gemini CLI (@google/gemini-cli; CTXGUARD_GEMINI_BIN,
// CTXGUARD_GEMINI_VERSION) against the fake OpenAI and Gemini APIs.
//
// The TestRun* tests start each CLI as a user does, with `ctxguard run`
// (which starts ctxguard and points the CLI at it), and check that the
// requests went through it and that it stopped with the CLI.
//
// testdata/claude-code-wire.md records the wire facts observed with the
// pinned Claude Code version.
package e2e
