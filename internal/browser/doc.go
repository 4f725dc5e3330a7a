// Package browser tests the dashboard as a person sees it: headless
// Chromium (Debian's chromium, driven by chromedp) opens the pages that
// ctxguard serves in front of a fake Messages API, after a scripted
// Claude-Code-like session went through it; with auth_token set, it
// signs in through the sign-in page.
//
// Run it with
//
//	CTXGUARD_BROWSER=1 go test -tags browser -count=1 ./internal/browser/
//
// Without chromium it skips, unless CI or CTXGUARD_BROWSER is set: then
// it fails. Screenshots go to $CTXGUARD_ARTIFACTS (default: a temporary
// folder). With CTXGUARD_DOCS_SCREENSHOT=1, TestDocsScreenshot takes the
// README's picture, docs/dashboard.png: a real Claude Code session of the
// shared data sent through `ctxguard serve` with the shipped
// configuration.
package browser
