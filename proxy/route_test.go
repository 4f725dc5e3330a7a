package proxy

import (
	"context"
	"encoding/json"
	"hash/maphash"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/protocol"
)

// fakeOpenAI is a protocol of another family: it claims /v1/responses and
// requests without Anthropic's headers, rewrites POST /v1/responses, and
// shapes errors as {"error":{"message","type","code"}}.
type fakeOpenAI struct{}

func (fakeOpenAI) Name() string   { return "fake-openai" }
func (fakeOpenAI) Family() string { return "openai" }
func (fakeOpenAI) Claim(method, path string, h http.Header) protocol.Claim {
	switch {
	case path == "/v1/responses":
		return protocol.Yes
	case h.Get("Anthropic-Version") == "":
		return protocol.Maybe
	}
	return protocol.No
}
func (fakeOpenAI) Rewritable(method, path string) bool {
	return method == http.MethodPost && path == "/v1/responses"
}
func (fakeOpenAI) Parse([]byte) (*conversation.Conversation, error) { return nil, protocol.ErrShape }
func (fakeOpenAI) ParseAfter([]byte, *conversation.Conversation, int) (*conversation.Conversation, error) {
	return nil, protocol.ErrShape
}
func (fakeOpenAI) Stable(*conversation.Conversation, []byte) int { return 0 }
func (fakeOpenAI) NewUsageTap(string) protocol.UsageTap          { return nil }
func (fakeOpenAI) QuickKey(maphash.Seed, []byte) (uint64, bool)  { return 0, false }
func (fakeOpenAI) Features(http.Header, *conversation.Conversation) protocol.Features {
	return protocol.Features{}
}
func (fakeOpenAI) AppendError(dst []byte, k protocol.Kind, msg, id string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "fake_error", "code": id}})
	return append(dst, b...)
}

// TestRouting: requests go to the upstream of their protocol's family, or
// of a named route with its prefix removed; only the claiming protocol's
// rewritable endpoint reaches the Rewriter, and errors take its shape.
func TestRouting(t *testing.T) {
	ant, oai, other, named := newUpstream(t, nil), newUpstream(t, nil), newUpstream(t, nil), newUpstream(t, nil)
	parse := func(s string) *url.URL { u, _ := url.Parse(s); return u }
	var rewrote []string
	rw := RewriterFunc(func(_ context.Context, r *http.Request, proto protocol.Protocol, body []byte) Outcome {
		rewrote = append(rewrote, proto.Name()+" "+r.URL.Path)
		return Outcome{Body: body}
	})
	srv, _ := newProxyServer(t, other.URL, Options{
		Protocols: []protocol.Protocol{anthropic.Protocol, fakeOpenAI{}},
		Upstreams: map[string]*url.URL{"anthropic": parse(ant.URL), "openai": parse(oai.URL + "/prefix")},
		Routes:    []Route{{Prefix: "/x/named", Upstream: parse(named.URL + "/api")}},
		Rewriter:  rw,
	})
	for _, tc := range []struct {
		method, path string
		header       http.Header
		to           *upstream
		wantPath     string
	}{
		{"POST", "/v1/messages?beta=true", nil, ant, "/v1/messages"},
		{"POST", "/v1/messages/count_tokens", nil, ant, "/v1/messages/count_tokens"},
		{"GET", "/v1/models", http.Header{"Anthropic-Version": {"2023-06-01"}}, ant, "/v1/models"},
		{"POST", "/v1/responses", nil, oai, "/prefix/v1/responses"},
		{"GET", "/v1/models", nil, oai, "/prefix/v1/models"},
		{"POST", "/x/named/v1/responses", nil, named, "/api/v1/responses"},
		{"POST", "/x/named/v1/messages", nil, named, "/api/v1/messages"},
		{"POST", "/x/namedother/v1/messages", nil, oai, "/prefix/x/namedother/v1/messages"}, // not the route; no Anthropic header
	} {
		h := http.Header{"Content-Type": {"application/json"}}
		for k, v := range tc.header {
			h[k] = v
		}
		res, _ := do(t, rawClient(), tc.method, srv.URL+tc.path, h, strings.NewReader(`{}`))
		if res.StatusCode != 200 {
			t.Errorf("%s %s: %d", tc.method, tc.path, res.StatusCode)
			continue
		}
		if got := tc.to.last(t).Path; got != tc.wantPath {
			t.Errorf("%s %s: the upstream got %q, want %q", tc.method, tc.path, got, tc.wantPath)
		}
	}
	want := []string{"anthropic /v1/messages", "fake-openai /v1/responses", "fake-openai /x/named/v1/responses", "anthropic /x/named/v1/messages"}
	if strings.Join(rewrote, "|") != strings.Join(want, "|") {
		t.Errorf("rewritten: %q, want %q", rewrote, want)
	}
	if len(other.received()) != 0 {
		t.Errorf("the default upstream got %d requests", len(other.received()))
	}
}

// TestErrorShapePerProtocol: ctxguard's own errors take the shape of the
// request's protocol.
func TestErrorShapePerProtocol(t *testing.T) {
	srv, _ := newProxyServer(t, "http://127.0.0.1:1", Options{Protocols: []protocol.Protocol{anthropic.Protocol, fakeOpenAI{}}})
	for path, want := range map[string]string{"/v1/messages": `"type":"error"`, "/v1/responses": `"type":"fake_error"`} {
		res, body := do(t, rawClient(), "POST", srv.URL+path, http.Header{"Content-Type": {"application/json"}}, strings.NewReader(`{}`))
		if res.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), want) {
			t.Errorf("%s: %d %s, want a body with %s", path, res.StatusCode, body, want)
		}
	}
}

// TestWebSocketRefused: an upgrade to WebSocket gets 426 at once, never
// reaching the upstream, so that Codex falls back to HTTP.
func TestWebSocketRefused(t *testing.T) {
	up := newUpstream(t, nil)
	srv, _ := newProxyServer(t, up.URL, Options{Protocols: []protocol.Protocol{anthropic.Protocol, fakeOpenAI{}}})
	h := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"},
		"Sec-Websocket-Key": {"gRbqjjgnHZQ+nP7HzmXE+g=="}, "Openai-Beta": {"responses_websockets=2026-02-06"}}
	res, body := do(t, rawClient(), "GET", srv.URL+"/v1/responses", h, nil)
	if res.StatusCode != http.StatusUpgradeRequired || !strings.Contains(string(body), "WebSocket") {
		t.Errorf("upgrade: %d %s", res.StatusCode, body)
	}
	if len(up.received()) != 0 {
		t.Error("the upgrade reached the upstream")
	}
}

func TestRoutePrefixes(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1")
	for _, p := range []string{"", "/", "x", "/x/", "//x", "/x y", "/x%2f", "/ü"} {
		if _, err := New(Options{Routes: []Route{{Prefix: p, Upstream: u}}}); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
	if _, err := New(Options{Routes: []Route{{Prefix: "/x/open-router_1.v2", Upstream: u}}}); err != nil {
		t.Error(err)
	}
}
