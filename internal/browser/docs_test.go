//go:build browser

package browser

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/dashboard"
	"github.com/ctxguard/ctxguard/internal/shareddata"
	"github.com/ctxguard/ctxguard/tools/prompt"
	"github.com/ctxguard/ctxguard/tools/transcript"
)

// docsSession is the real Claude Code session the README's picture
// shows: 24 requests of claude-sonnet-4-5, from 10K to 67K tokens.
const docsSession = "ff33b5b0-cc51-4271-a3eb-545a85882e5f.jsonl"

// TestDocsScreenshot takes the README's picture, docs/dashboard.png: a
// real Claude Code session from the shared data, its requests rebuilt as
// Claude Code sent them (as ctxguard replay does), sent through `ctxguard
// serve` with the shipped configuration to a fake Messages API that
// bills prompts as the prompt cache would (cachedUsage), and the
// session's page in the light theme. It runs only with CTXGUARD_DOCS_SCREENSHOT=1,
// and fails if the session saved nothing, which the picture would
// misstate.
func TestDocsScreenshot(t *testing.T) {
	if os.Getenv("CTXGUARD_DOCS_SCREENSHOT") != "1" {
		t.Skip("CTXGUARD_DOCS_SCREENSHOT=1 takes the README's picture")
	}
	chromium := findChromium(t)
	ss, err := transcript.Load([]string{shareddata.File(t, "claude-code", docsSession)}, transcript.Options{SkipSidechains: true})
	if err != nil || len(ss) != 1 {
		t.Fatalf("%d sessions, %v", len(ss), err)
	}
	b, err := transcript.NewBuilder(ss[0], transcript.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}

	up := anthropictest.NewServer(anthropictest.Options{Script: cachedUsage(t)})
	defer up.Close()
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Upstreams = config.AllUpstreams(up.URL)
	base := start(t, cfg)
	for k := range b.Len() {
		r, err := b.Request(k)
		if err != nil {
			t.Fatal(err)
		}
		post(t, base, ss[0].ClientSessionID, r.Body)
	}
	key := "anthropic:h:" + ss[0].ClientSessionID
	var v dashboard.SessionDetail
	if err := json.Unmarshal([]byte(fetch(t, base+"/ctxguard/api/session/"+key, http.StatusOK)), &v); err != nil {
		t.Fatal(err)
	}
	s := v.Session
	t.Logf("%s: %d requests, %d → %d tokens, %d saved ($%.4f), %d added, %d edit events, spent $%.4f",
		key, s.Requests, s.Before, s.After, s.Saved, s.SavedUSD, s.Added, s.Events, s.SpentUSD)
	if s.Requests != b.Len() || s.Saved <= 0 || s.SavedUSD <= 0 {
		t.Fatalf("the session saved %d tokens ($%g) over %d requests: the picture would show no savings", s.Saved, s.SavedUSD, s.Requests)
	}

	ctx := browser(t, chromium)
	run(t, ctx, "open the session", scheme("light"), chromedp.Navigate(base+"/ctxguard/session?key="+key), loaded(),
		chromedp.WaitVisible(chromedp.CSS(`#chart`)))
	if !get(t, ctx, "chart drawn", chromedp.Poll[bool](`document.getElementById("chart").complete && document.getElementById("chart").naturalWidth > 0`)) {
		t.Fatal("the chart image did not load")
	}
	png := get(t, ctx, "screenshot for the README", chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join("..", "..", "docs", "dashboard.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// cachedUsage answers every request with the usage the prompt cache
// would report: what a cache_control breakpoint of an earlier request
// reaches read from the cache (prompt.BreakpointCache, as ctxguard
// replay's breakpoint cost model), the rest written to it.
func cachedUsage(t *testing.T) func(r *anthropictest.Request) anthropictest.Turn {
	var mu sync.Mutex
	var cache prompt.BreakpointCache
	return func(r *anthropictest.Request) anthropictest.Turn {
		mu.Lock()
		defer mu.Unlock()
		p, err := prompt.Parse(r.Decoded)
		if err != nil {
			t.Errorf("request %d: %v", r.Index, err)
			return anthropictest.Turn{Status: http.StatusBadRequest}
		}
		read := cache.Read(p)
		return anthropictest.Turn{
			Blocks: []anthropictest.Block{anthropictest.Text("Done.")},
			Usage:  anthropic.Usage{CacheReadInputTokens: read, CacheCreationInputTokens: p.Tokens() - read, OutputTokens: 200},
		}
	}
}
