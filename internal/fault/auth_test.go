package fault

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/internal/testtool"
	"github.com/ctxguard/ctxguard/tools/sessiongen"
)

// authToken is the token of the auth tests' instances.
const authToken = "fault-auth-token-5b9c2e71d04a"

// stubConfig clears and persists early, so that a short session's
// requests carry stubs that name blobs and persisted results that link
// to them.
const stubConfig = `
compress: {enabled: false}
clear: {trigger: 3000, keep_tokens: 1000, clear_at_least: 1000, payback: 0}
persist: {threshold: 2000, preview: 300}
`

var (
	signedLinkRE = regexp.MustCompile(`(http://[0-9.:]+)/ctxguard/v1/blobs/([a-z]{13})/([a-z]{22})`)
	signedNameRE = regexp.MustCompile(`blob ([a-z]{13})/([a-z]{22})`)
)

// curl runs the real curl with args (at most 30 s) and returns the
// status it reports (-w %{http_code}) and the body it wrote to a file.
func curl(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "body")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := execCommand(ctx, bin, append([]string{"-sS", "-o", out, "-w", "%{http_code}"}, args...)...)
	code, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl %v: %v", args, err)
	}
	body, _ := os.ReadFile(out)
	status := 0
	for _, c := range strings.TrimSpace(string(code)) {
		status = status*10 + int(c-'0')
	}
	return status, string(body)
}

// TestAgentFetchesSignedBlob: with auth_token set, the blob links that
// stubs and persisted results give the agent are signed, and the agent's
// own tools fetch them with no header: real curl gets each blob's text.
// A tampered signature, another blob's, and the plain link are refused
// with 401. (Before: every blob link answered 401 without the token
// header, which the agent's tools cannot know to send.)
func TestAgentFetchesSignedBlob(t *testing.T) {
	curlBin := testtool.Find(t, "CTXGUARD_CURL", "apt-get install curl", "curl")
	up := newUpstream(t)
	in := start(t, serveOpts{upstream: up.URL, config: stubConfig, env: []string{"CTXGUARD_AUTH_TOKEN=" + authToken}})
	gen, err := sessiongen.Generate(rand.New(rand.NewPCG(5, 7)), sessiongen.Options{Turns: 60, MaxResult: 20_000})
	if err != nil {
		t.Fatal(err)
	}
	bodies, err := gen.Bodies()
	if err != nil {
		t.Fatal(err)
	}
	c := client()
	h := http.Header{"X-Ctxguard-Token": {authToken}, "X-Claude-Code-Session-Id": {"agent"}}
	for _, b := range bodies {
		if res, body := post(t, c, in.URL, h, b); res.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", res.StatusCode, body)
		}
	}
	links := map[string]string{} // blob id → the signed URL
	urls, names := 0, 0
	for _, b := range up.messages() {
		for _, m := range signedLinkRE.FindAllSubmatch(b, -1) {
			if string(m[1]) != in.URL {
				t.Fatalf("a link to %s, not to the instance %s", m[1], in.URL)
			}
			links[string(m[2])] = string(m[0])
			urls++
		}
		for _, m := range signedNameRE.FindAllSubmatch(b, -1) {
			links[string(m[1])] = in.URL + "/ctxguard/v1/blobs/" + string(m[1]) + "/" + string(m[2])
			names++
		}
	}
	if len(links) < 3 || names == 0 || urls == 0 {
		t.Fatalf("%d blobs, %d signed URLs, %d stubs naming one: the session tests too little", len(links), urls, names)
	}
	var prev string
	for id, link := range links {
		want, err := os.ReadFile(filepath.Join(in.dataDir, "blobs", id+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		if status, got := curl(t, curlBin, link); status != http.StatusOK || got != string(want) {
			t.Errorf("curl %s: %d, %d bytes (the blob has %d)", link, status, len(got), len(want))
		}
		sig := link[strings.LastIndexByte(link, '/')+1:]
		tampered := []byte(sig)
		tampered[len(tampered)-1] = 'a' + (tampered[len(tampered)-1]-'a'+1)%26
		refused := []string{
			in.URL + "/ctxguard/v1/blobs/" + id + "/" + string(tampered),
			in.URL + "/ctxguard/v1/blobs/" + id,
		}
		if prev != "" {
			refused = append(refused, in.URL+"/ctxguard/v1/blobs/"+id+"/"+prev) // another blob's signature
		}
		for _, u := range refused {
			if status, body := curl(t, curlBin, u); status != http.StatusUnauthorized || strings.Contains(body, string(want[:min(len(want), 64)])) {
				t.Errorf("curl %s: %d, want 401 and no content", u, status)
			}
		}
		prev = sig
	}
	if strings.Contains(in.Log(), authToken) {
		t.Error("the token is in the log")
	}
}

// TestDashboardSignIn: with auth_token set, the dashboard opens in a
// client that cannot set headers: a page without a cookie leads to the
// sign-in page; the token posted in its form (real curl, keeping cookies
// in a jar) sets the cookie, which then opens the dashboard's pages and
// API, and not the model API. (Before: the token travelled only in a
// header, so a plain browser could not open the dashboard.)
func TestDashboardSignIn(t *testing.T) {
	curlBin := testtool.Find(t, "CTXGUARD_CURL", "apt-get install curl", "curl")
	up := newUpstream(t)
	in := start(t, serveOpts{upstream: up.URL, env: []string{"CTXGUARD_AUTH_TOKEN=" + authToken}})
	jar := filepath.Join(t.TempDir(), "cookies")
	html := []string{"-H", "Accept: text/html"}

	if status, _ := curl(t, curlBin, append(html, "-b", jar, "-c", jar, in.URL+"/ctxguard/api/overview")...); status != http.StatusUnauthorized {
		t.Errorf("the API before signing in: %d, want 401", status)
	}
	status, _ := curl(t, curlBin, append(html, "-b", jar, "-c", jar, "-L", in.URL+"/ctxguard/config")...)
	if status != http.StatusOK {
		t.Fatalf("a page before signing in, following redirects: %d", status)
	}
	if status, page := curl(t, curlBin, append(html, in.URL+"/ctxguard/signin")...); status != http.StatusOK || !strings.Contains(page, `name="token"`) {
		t.Fatalf("the sign-in page: %d\n%s", status, page)
	}
	form := []string{"-b", jar, "-c", jar, "-H", "Origin: " + in.URL, "--data-urlencode", "token=" + authToken}
	if status, _ := curl(t, curlBin, append([]string{"-H", "Origin: http://evil.example", "--data-urlencode", "token=" + authToken, "-c", jar}, in.URL+"/ctxguard/signin")...); status != http.StatusForbidden {
		t.Errorf("a sign-in posted from another site: %d, want 403", status)
	}
	if status, _ := curl(t, curlBin, append(form, in.URL+"/ctxguard/signin")...); status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d, want 303", status)
	}
	b, err := os.ReadFile(jar)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "#HttpOnly_") || !strings.Contains(string(b), "/ctxguard/") || strings.Contains(string(b), authToken) {
		t.Errorf("the cookie jar (want an HttpOnly cookie for /ctxguard/, without the token):\n%s", b)
	}
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/ctxguard/api/overview", http.StatusOK},
		{"/ctxguard/api/config", http.StatusOK},
		{"/ctxguard/", http.StatusOK},
		{"/metrics", http.StatusUnauthorized},
		{"/v1/models", http.StatusUnauthorized},
	} {
		if status, _ := curl(t, curlBin, append(html, "-b", jar, in.URL+tc.path)...); status != tc.status {
			t.Errorf("%s with the cookie: %d, want %d", tc.path, status, tc.status)
		}
	}
	q := url.Values{"token": {authToken}}.Encode()
	if strings.Contains(in.Log(), q) || strings.Contains(in.Log(), authToken) {
		t.Error("the token is in the log")
	}
}
