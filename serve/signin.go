package serve

import (
	"html/template"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/ctxguard/ctxguard/internal/auth"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/store"
)

// Auth for people and agents. With auth_token set, every request must
// carry the token in X-Ctxguard-Token (package proxy), except:
//
//   - a browser signed in to the dashboard: GET /ctxguard/signin shows a
//     form; POSTing the token to it (never in a URL) sets a cookie scoped
//     to /ctxguard/ — HttpOnly, SameSite=Strict, Secure over TLS or with
//     an https public_url — that holds an HMAC of its expiry keyed by a
//     secret derived from the token, not the token (internal/auth). It
//     admits every /ctxguard/ path for 30 days. The POST is refused from
//     another origin (Sec-Fetch-Site, else Origin against Host);
//   - an agent following a blob link of a stub or a summary: the link
//     ends with the blob's signature (/ctxguard/v1/blobs/<id>/<sig>), an
//     HMAC of its id keyed by another secret derived from the token. It
//     opens that blob, and nothing else, for as long as the blob lives;
//   - the sign-in page and the dashboard's script and styles, which hold
//     no data.
//
// A browser that opens a dashboard page without a cookie is sent to the
// sign-in page. Without auth_token, none of this applies: every local
// endpoint answers (local.access permitting) and links carry no
// signature.

// signInPath is the dashboard's sign-in page.
const signInPath = "/ctxguard/signin"

// localAuth admits a request for a local endpoint that carries no token
// (proxy.Options.LocalAuth): the sign-in page, the dashboard's assets, a
// blob link with its blob's signature, or any /ctxguard/ path with a
// valid sign-in cookie.
func (s *Server) localAuth(r *http.Request) bool {
	keys := s.engine.Keys()
	if keys == nil {
		return false
	}
	path := r.URL.Path
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case path == signInPath:
		return true
	case strings.HasPrefix(path, "/ctxguard/static/"):
		return read
	}
	if id, sig, ok := signedBlob(path); ok {
		return read && keys.CheckBlob(id, sig)
	}
	if !strings.HasPrefix(path, "/ctxguard/") {
		return false // the cookie is not for /metrics
	}
	c, err := r.Cookie(auth.CookieName)
	return err == nil && keys.CheckCookie(c.Value, s.now())
}

// signedBlob parses the path of a signed blob link,
// /ctxguard/v1/blobs/<id>/<sig>.
func signedBlob(path string) (id, sig string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/ctxguard/v1/blobs/")
	if !ok {
		return "", "", false
	}
	id, sig, ok = strings.Cut(rest, "/")
	if !ok || !store.ValidID(id) || len(sig) != auth.SigLen {
		return "", "", false
	}
	return id, sig, true
}

// serveSignedBlob serves GET /ctxguard/v1/blobs/{id}/{sig}: the blob, if
// sig is its signature under auth_token.
func (s *Server) serveSignedBlob(w http.ResponseWriter, r *http.Request) error {
	id, sig := r.PathValue("id"), r.PathValue("sig")
	if !store.ValidID(id) || !s.engine.Keys().CheckBlob(id, sig) {
		return protocol.Errorf(http.StatusNotFound, protocol.NotFound, nil, "ctxguard: no such blob link")
	}
	return s.writeBlob(w, r, id)
}

// signInCSP allows the sign-in page its styles and its form, nothing
// else.
const signInCSP = "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

var signInPage = template.Must(template.New("signin").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ctxguard · sign in</title>
<link rel="stylesheet" href="/ctxguard/static/app.css">
</head>
<body>
<header class="top"><span class="brand">ctxguard</span></header>
<main id="main">
<h1>Sign in</h1>
<p>This ctxguard asks for its token (<code>auth_token</code>). It travels once, in this form, never in a URL; then the browser keeps a sign-in cookie for this dashboard for 30 days.</p>
{{if .}}<p class="error" id="signin-error">{{.}}</p>{{end}}
<form method="post" action="/ctxguard/signin">
<label for="token">Token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<button type="submit" id="signin">Sign in</button>
</form>
</main>
</body>
</html>
`))

// maxSignInForm bounds the sign-in form's body.
const maxSignInForm = 4 << 10

// serveSignInPage serves GET /ctxguard/signin.
func (s *Server) serveSignInPage(w http.ResponseWriter, r *http.Request) error {
	if s.engine.Keys() == nil {
		http.Redirect(w, r, "/ctxguard/", http.StatusSeeOther) // nothing to sign in to
		return nil
	}
	return writeSignIn(w, http.StatusOK, "")
}

func writeSignIn(w http.ResponseWriter, status int, msg string) error {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", signInCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	return signInPage.Execute(w, msg)
}

// readForm reads the sign-in form from the request's body (never from
// its URL): application/x-www-form-urlencoded, at most maxSignInForm
// bytes.
func readForm(r *http.Request) (url.Values, error) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		return nil, protocol.Errorf(http.StatusUnsupportedMediaType, protocol.InvalidRequest, nil, "ctxguard: the sign-in form must be application/x-www-form-urlencoded")
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxSignInForm+1))
	if err != nil {
		return nil, protocol.Errorf(http.StatusBadRequest, protocol.InvalidRequest, err, "ctxguard: the sign-in form could not be read")
	}
	if len(b) > maxSignInForm {
		return nil, protocol.Errorf(http.StatusRequestEntityTooLarge, protocol.TooLarge, nil, "ctxguard: the sign-in form is too large")
	}
	form, err := url.ParseQuery(string(b))
	if err != nil {
		return nil, protocol.Errorf(http.StatusBadRequest, protocol.InvalidRequest, err, "ctxguard: the sign-in form could not be read")
	}
	return form, nil
}

// crossOrigin refuses a sign-in posted from another origin.
var crossOrigin = http.NewCrossOriginProtection()

// signIn serves POST /ctxguard/signin: the token, in a form, sets the
// sign-in cookie and leads to the dashboard; a wrong one shows the page
// again.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) error {
	keys := s.engine.Keys()
	if keys == nil {
		return protocol.Errorf(http.StatusNotFound, protocol.NotFound, nil, "ctxguard: no auth_token is set; there is nothing to sign in to")
	}
	if err := crossOrigin.Check(r); err != nil {
		return protocol.Errorf(http.StatusForbidden, protocol.Permission, err, "ctxguard: a sign-in from another site is refused")
	}
	form, err := readForm(r)
	if err != nil {
		return err
	}
	if !keys.Token(form.Get("token")) {
		s.log.Warn("dashboard sign-in with a wrong token", "remote", r.RemoteAddr)
		return writeSignIn(w, http.StatusUnauthorized, "That is not this ctxguard's token.")
	}
	http.SetCookie(w, &http.Cookie{
		Name:     auth.CookieName,
		Value:    keys.Cookie(s.now()),
		Path:     "/ctxguard/",
		MaxAge:   int(auth.CookieLife.Seconds()),
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   r.TLS != nil || strings.HasPrefix(s.engine.Config().PublicURL, "https://"),
	})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/ctxguard/", http.StatusSeeOther)
	return nil
}
