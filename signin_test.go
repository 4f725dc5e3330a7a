package ctxguard

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/auth"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/store/storetest"
)

const authToken = "auth-test-token-0123456789abcdef"

// authServer is a Guard with cfg (and auth_token) behind its proxy, in
// front of a fake Messages API.
type authServer struct {
	g   *Guard
	srv *httptest.Server
	api *anthropictest.Server
}

func newAuthServer(t *testing.T, cfg config.Config, opts ...Option) *authServer {
	t.Helper()
	api := anthropictest.NewServer(anthropictest.Options{})
	t.Cleanup(api.Close)
	cfg.Upstreams = config.AllUpstreams(api.URL)
	g := newGuard(t, cfg, opts...)
	h, err := g.Handler()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &authServer{g: g, srv: srv, api: api}
}

// do sends a request to the server, without following redirects.
func (a *authServer) do(t *testing.T, method, path string, h http.Header, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// signedLink matches a signed blob link; signedName a blob's name with
// its signature, as stubs give it.
var (
	signedLink = regexp.MustCompile(`/ctxguard/v1/blobs/([a-z]{13})/([a-z]{22})`)
	signedName = regexp.MustCompile(`blob ([a-z]{13})/([a-z]{22})`)
	plainName  = regexp.MustCompile(`blob [a-z]{13}\b[^/]`)
)

// TestSignedBlobLinks: with auth_token, the stubs of a session name their
// blobs with signatures and the persisted results link to them signed;
// each signed link opens its blob with no header, and nothing else does:
// not a tampered signature, another blob's, or the plain link. A second
// instance on the same store with the same token sends the same bytes.
func TestSignedBlobLinks(t *testing.T) {
	st := store.NewMemory()
	cfg := blobConfig()
	cfg.AuthToken = authToken
	a := newAuthServer(t, cfg, WithStore(st))
	tok := http.Header{"X-Ctxguard-Token": {authToken}, "Content-Type": {"application/json"}, "X-Claude-Code-Session-Id": {"signed"}}
	var sent [][]byte
	for _, body := range blobSession(t, 5) {
		res, b := a.do(t, "POST", "/v1/messages", tok, string(body))
		if res.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", res.StatusCode, b)
		}
		reqs := a.api.MessagesRequests()
		sent = append(sent, reqs[len(reqs)-1].Decoded)
	}
	links := map[string]string{} // id → sig
	nLinks, nNames := 0, 0
	for _, b := range sent {
		if m := plainName.Find(b); m != nil {
			t.Fatalf("a stub names a blob without its signature: %q", m)
		}
		for _, re := range []*regexp.Regexp{signedLink, signedName} {
			for _, m := range re.FindAllSubmatch(b, -1) {
				links[string(m[1])] = string(m[2])
			}
		}
		nLinks += len(signedLink.FindAll(b, -1))
		nNames += len(signedName.FindAll(b, -1))
	}
	if nLinks == 0 || nNames == 0 || len(links) < 3 {
		t.Fatalf("%d signed links, %d signed names, %d blobs: the session tests too little", nLinks, nNames, len(links))
	}
	var other string
	for id, sig := range links {
		rc, err := st.OpenBlob(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := io.ReadAll(rc)
		rc.Close()
		res, got := a.do(t, "GET", "/ctxguard/v1/blobs/"+id+"/"+sig, nil, "")
		if res.StatusCode != http.StatusOK || got != string(want) {
			t.Errorf("blob %s by its signed link: %d, %d bytes (want %d)", id, res.StatusCode, len(got), len(want))
		}
		tampered := []byte(sig)
		tampered[0] = 'a' + (tampered[0]-'a'+1)%26
		for what, path := range map[string]string{
			"a tampered signature":     "/ctxguard/v1/blobs/" + id + "/" + string(tampered),
			"a short signature":        "/ctxguard/v1/blobs/" + id + "/" + sig[1:],
			"the plain link":           "/ctxguard/v1/blobs/" + id,
			"another blob's sig":       "/ctxguard/v1/blobs/" + id + "/" + links[other],
			"the signature, elsewhere": "/ctxguard/v1/stats/" + sig,
		} {
			if what == "another blob's sig" && other == "" {
				continue
			}
			if res, _ := a.do(t, "GET", path, nil, ""); res.StatusCode != http.StatusUnauthorized {
				t.Errorf("blob %s by %s: status %d, want 401", id, what, res.StatusCode)
			}
		}
		other = id
	}
	// With the token, the plain link opens the blob; a wrong signature
	// is no link.
	for id, sig := range links {
		if res, _ := a.do(t, "GET", "/ctxguard/v1/blobs/"+id, tok, ""); res.StatusCode != http.StatusOK {
			t.Errorf("the plain link with the token: %d", res.StatusCode)
		}
		if res, _ := a.do(t, "GET", "/ctxguard/v1/blobs/"+id+"/"+strings.Repeat("a", len(sig)), tok, ""); res.StatusCode != http.StatusNotFound {
			t.Errorf("a wrong signature with the token: %d, want 404", res.StatusCode)
		}
		break
	}
	// Another instance on the store, with the token: the same bytes.
	b := newGuard(t, cfg, WithStore(st))
	for k, body := range blobSession(t, 5) {
		res := b.RewriteBody(context.Background(), anthropic.Protocol, http.Header{"X-Claude-Code-Session-Id": {"signed"}}, body)
		if !bytes.Equal(res.Body, sent[k]) {
			t.Fatalf("request %d: a second instance with the same token sent other bytes", k)
		}
	}
}

// TestUnsignedWithoutToken: without auth_token, stubs name plain blob ids
// and the how-to is the plain link, as before links were signed.
func TestUnsignedWithoutToken(t *testing.T) {
	g := newGuard(t, blobConfig(), WithStore(store.NewMemory()))
	var last []byte
	for _, body := range blobSession(t, 5) {
		last = g.RewriteBody(context.Background(), anthropic.Protocol, http.Header{"X-Claude-Code-Session-Id": {"plain"}}, body).Body
	}
	if signedLink.Match(last) || signedName.Match(last) || bytes.Contains(last, []byte("<sig>")) {
		t.Error("a link is signed without auth_token")
	}
	if !bytes.Contains(last, []byte("GET http://127.0.0.1:8787/ctxguard/v1/blobs/<blob>")) || !plainName.Match(last) {
		t.Errorf("the stubs do not name plain blobs:\n%.3000s", last)
	}
}

// TestSignIn: the dashboard's sign-in with auth_token. A browser without
// a cookie is sent to the sign-in page; the token posted in the form (and
// only there: not in the URL, not from another site) sets a cookie that
// holds no token, is HttpOnly, SameSite=Strict and scoped to /ctxguard/,
// and admits the dashboard's pages and API, not the model API nor the
// metrics, until it expires.
func TestSignIn(t *testing.T) {
	clk := storetest.NewClock(time.Date(2026, 11, 5, 9, 0, 0, 0, time.UTC))
	cfg := config.Defaults()
	cfg.AuthToken = authToken
	a := newAuthServer(t, cfg, WithStore(store.NewMemory()), WithClock(clk.Now))
	html := http.Header{"Accept": {"text/html,application/xhtml+xml"}}
	form := func(h http.Header) http.Header {
		out := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
		for k, v := range h {
			out[k] = v
		}
		return out
	}
	good := url.Values{"token": {authToken}}.Encode()
	origin := http.Header{"Origin": {a.srv.URL}, "Sec-Fetch-Site": {"same-origin"}}

	res, _ := a.do(t, "GET", "/ctxguard/", html, "")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ctxguard/signin" {
		t.Errorf("the dashboard without a cookie: %d to %q, want 303 to the sign-in page", res.StatusCode, res.Header.Get("Location"))
	}
	if res, _ := a.do(t, "GET", "/ctxguard/api/overview", nil, ""); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("the API without a cookie: %d, want 401", res.StatusCode)
	}
	res, page := a.do(t, "GET", "/ctxguard/signin", html, "")
	if res.StatusCode != http.StatusOK || !strings.Contains(page, `<form method="post" action="/ctxguard/signin">`) ||
		!strings.Contains(res.Header.Get("Content-Security-Policy"), "form-action 'self'") || res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("the sign-in page: %d %v\n%s", res.StatusCode, res.Header, page)
	}
	for _, tc := range []struct {
		name   string
		path   string
		h      http.Header
		body   string
		status int
	}{
		{"a wrong token", "/ctxguard/signin", origin, url.Values{"token": {authToken + "x"}}.Encode(), http.StatusUnauthorized},
		{"no token", "/ctxguard/signin", origin, "", http.StatusUnauthorized},
		{"the token in the URL", "/ctxguard/signin?" + good, origin, "", http.StatusUnauthorized},
		{"from another site (Origin)", "/ctxguard/signin", http.Header{"Origin": {"http://evil.example"}}, good, http.StatusForbidden},
		{"from another site (Sec-Fetch-Site)", "/ctxguard/signin", http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {a.srv.URL}}, good, http.StatusForbidden},
		{"a form over the cap", "/ctxguard/signin", origin, good + "&pad=" + strings.Repeat("x", 5000), http.StatusRequestEntityTooLarge},
	} {
		res, _ := a.do(t, "POST", tc.path, form(tc.h), tc.body)
		if res.StatusCode != tc.status || len(res.Cookies()) != 0 {
			t.Errorf("%s: %d with %d cookies, want %d and none", tc.name, res.StatusCode, len(res.Cookies()), tc.status)
		}
	}

	res, _ = a.do(t, "POST", "/ctxguard/signin", form(origin), good)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/ctxguard/" || len(res.Cookies()) != 1 {
		t.Fatalf("sign-in: %d to %q, %d cookies", res.StatusCode, res.Header.Get("Location"), len(res.Cookies()))
	}
	c := res.Cookies()[0]
	if c.Name != auth.CookieName || c.Path != "/ctxguard/" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure ||
		c.MaxAge != int(auth.CookieLife.Seconds()) || strings.Contains(c.Value, authToken) {
		t.Errorf("the cookie: %+v", c)
	}
	cookie := http.Header{"Cookie": {c.Name + "=" + c.Value}}
	for _, tc := range []struct {
		method, path string
		h            http.Header
		status       int
	}{
		{"GET", "/ctxguard/", html, http.StatusOK},
		{"GET", "/ctxguard/config", html, http.StatusOK},
		{"GET", "/ctxguard/api/overview", nil, http.StatusOK},
		{"GET", "/ctxguard/v1/stats", nil, http.StatusOK},
		{"GET", "/metrics", nil, http.StatusUnauthorized},
		{"POST", "/v1/messages", http.Header{"Content-Type": {"application/json"}}, http.StatusUnauthorized},
	} {
		h := cookie.Clone()
		for k, v := range tc.h {
			h[k] = v
		}
		body := ""
		if tc.method == "POST" {
			body = string(smallMessages())
		}
		if res, _ := a.do(t, tc.method, tc.path, h, body); res.StatusCode != tc.status {
			t.Errorf("%s %s with the cookie: %d, want %d", tc.method, tc.path, res.StatusCode, tc.status)
		}
	}
	// A cookie of another token, and an expired one, admit nothing.
	other := http.Header{"Cookie": {auth.CookieName + "=" + auth.New(authToken+"x").Cookie(clk.Now())}}
	if res, _ := a.do(t, "GET", "/ctxguard/api/overview", other, ""); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("another token's cookie: %d, want 401", res.StatusCode)
	}
	clk.Advance(auth.CookieLife)
	if res, _ := a.do(t, "GET", "/ctxguard/api/overview", cookie, ""); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("an expired cookie: %d, want 401", res.StatusCode)
	}
}

// TestSignInSecure: behind an https public_url the cookie is Secure.
func TestSignInSecure(t *testing.T) {
	cfg := config.Defaults()
	cfg.AuthToken = authToken
	cfg.PublicURL = "https://ctxguard.example.com"
	a := newAuthServer(t, cfg, WithStore(store.NewMemory()))
	res, _ := a.do(t, "POST", "/ctxguard/signin", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, url.Values{"token": {authToken}}.Encode())
	if cs := res.Cookies(); len(cs) != 1 || !cs[0].Secure {
		t.Errorf("sign-in behind https: %d, cookies %+v; want one Secure cookie", res.StatusCode, cs)
	}
}

// smallMessages is a valid Messages request.
func smallMessages() []byte {
	return []byte(`{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
}
