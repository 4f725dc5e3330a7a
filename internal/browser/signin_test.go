//go:build browser

package browser

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/openai/openaitest"
)

// TestSignIn: with auth_token set, a person opens the dashboard in the
// browser: it leads to the sign-in page, a wrong token is refused there,
// and the right one, typed into the form, opens the dashboard with the
// session the proxy saw. The token never shows in the address, and the
// page's script cannot read the sign-in cookie (HttpOnly).
func TestSignIn(t *testing.T) {
	const token = "browser-sign-in-token-3c1f9a0e"
	chromium := findChromium(t)
	up := anthropictest.NewServer(anthropictest.Options{})
	defer up.Close()
	oa := openaitest.New(openaitest.Options{})
	oa.Start()
	defer oa.Close()
	cfg := testConfig(t, up.URL, oa.URL)
	cfg.AuthToken = token
	base := start(t, cfg)
	postTo(t, base, "/v1/messages", sessionID, messages([]string{"RESULT-0 one line"}), http.Header{"X-Ctxguard-Token": {token}}, http.StatusOK)
	// Without the token, the proxy refuses the client.
	postTo(t, base, "/v1/messages", sessionID, messages([]string{"RESULT-0 one line"}), nil, http.StatusUnauthorized)

	ctx := browser(t, chromium)
	run(t, ctx, "open the dashboard", chromedp.Navigate(base+"/ctxguard/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	if loc := get(t, ctx, "read the address", chromedp.Location()); loc != base+"/ctxguard/signin" {
		t.Fatalf("the dashboard without signing in led to %s, want the sign-in page", loc)
	}
	if dir := os.Getenv("CTXGUARD_ARTIFACTS"); dir != "" {
		png := get(t, ctx, "screenshot the sign-in page", chromedp.FullScreenshot(100))
		if err := os.WriteFile(filepath.Join(dir, "signin.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, ctx, "sign in with a wrong token", chromedp.SendKeys(chromedp.CSS("#token"), token+"x"),
		chromedp.Click(chromedp.CSS("#signin")), chromedp.WaitVisible(chromedp.CSS("#signin-error")))
	run(t, ctx, "sign in", chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#signin")), loaded())
	loc := get(t, ctx, "read the address", chromedp.Location())
	if loc != base+"/ctxguard/" || strings.Contains(loc, token) {
		t.Errorf("after signing in the address is %s, want %s/ctxguard/", loc, base)
	}
	row := fmt.Sprintf(`tr[data-session=%q]`, sessionKey)
	run(t, ctx, "see the session", chromedp.WaitVisible(chromedp.CSS(row)))
	if c := get(t, ctx, "read the cookies", chromedp.Evaluate[string](`document.cookie`)); c != "" {
		t.Errorf("the page's script reads the cookies %q: the sign-in cookie must be HttpOnly", c)
	}
	// The other pages and their data open too.
	run(t, ctx, "open the configuration", chromedp.Navigate(base+"/ctxguard/config"), loaded(),
		chromedp.WaitVisible(chromedp.CSS("#yaml")))
	if text := page(t, ctx); strings.Contains(text, token) {
		t.Error("a page shows the token")
	}
}
