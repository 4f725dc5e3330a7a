// Package browser tests the dashboard as a person sees it: headless
// Chromium (Debian's chromium, driven by chromedp) opens the pages that
// ctxguard serves in front of a fake Messages API, after a scripted
// Claude-Code-like session went through it.
//
// Run it with
//
//	CTXGUARD_BROWSER=1 go test -tags browser -count=1 ./internal/browser/
//
// Without chromium it skips, unless CI or CTXGUARD_BROWSER is set: then
// it fails. Screenshots go to $CTXGUARD_ARTIFACTS (default: a temporary
// folder); with CTXGUARD_DOCS_SCREENSHOT=1 the session page also goes to
// docs/dashboard.png, the README's picture.
package browser
