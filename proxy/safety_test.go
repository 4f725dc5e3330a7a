package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNoContentTypeInvented: an answer without Content-Type reaches the
// client without one (net/http would sniff one).
func TestNoContentTypeInvented(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header()["Content-Type"] = nil // this test server must not sniff either
		if r.URL.Query().Has("stream") {
			w.Header().Set("Transfer-Encoding", "chunked")
			w.(http.Flusher).Flush()
		}
		_, _ = io.WriteString(w, "<html><body>sniff me</body></html>")
	})
	srv, _ := newProxyServer(t, up.URL, Options{Rewriter: &identity{}})
	for _, path := range []string{"/v1/messages", "/v1/messages?stream", "/v1/other", "/v1/other?stream"} {
		res, body := do(t, rawClient(), "POST", srv.URL+path, jsonHeader(), strings.NewReader(`{}`))
		if diff := cmp.Diff([]string(nil), res.Header.Values("Content-Type")); diff != "" || string(body) != "<html><body>sniff me</body></html>" {
			t.Errorf("%s: Content-Type (-want +got)\n%s body %q", path, diff, body)
		}
	}
}
