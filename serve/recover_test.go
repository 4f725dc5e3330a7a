package serve

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/ctxguard/ctxguard/internal/guardtest"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/store"
)

// TestRecoverThroughProxy: the proxy (Handler) in front of an upstream
// whose window is smaller than ctxguard believes: the upstream refuses
// the request as too long, ctxguard compacts it and retries once, and the
// client gets the answer with X-Ctxguard-Recovered: 1. Exactly two
// requests reach the upstream; the retry fits.
func TestRecoverThroughProxy(t *testing.T) {
	bodies := longSession(t)
	body := bodies[len(bodies)*2/3]
	cfg := config.Defaults()
	// The upstream's real window, in ctxguard's tokens: below what
	// ctxguard sends for the request.
	limit := newServer(t, cfg, withStore(store.NewMemory())).engine.RewriteBody(context.Background(), anthropic.Protocol, guardtest.SessionHeader(4), body).TokensAfter * 4 / 5
	up, got := tooLongUpstream(t, func() int { return limit })
	cfg.Upstreams = config.AllUpstreams(up.URL)
	s := newServer(t, cfg, withSummarizer(blockingSummarizer{}))
	h, err := s.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages", bytes.NewReader(body))
	req.Header = guardtest.SessionHeader(4)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("X-Ctxguard-Recovered") != "1" {
		t.Fatalf("status %d, recovered %q: %s", res.StatusCode, res.Header.Get("X-Ctxguard-Recovered"), answer)
	}
	sizes := got()
	if len(sizes) != 2 || sizes[0] <= limit || sizes[1] > limit {
		t.Fatalf("the upstream got %v tokens (limit %d): want one refused request and one retry that fits", sizes, limit)
	}
	// The headers describe the retry, the body that got the answer.
	if h := res.Header.Get("X-Ctxguard-Tokens-After"); h != strconv.Itoa(sizes[1]) {
		t.Errorf("X-Ctxguard-Tokens-After %s, want the retry's %d (the first attempt had %d)", h, sizes[1], sizes[0])
	}
}
