package proxy

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// hopHeaders are dropped in both directions (RFC 9110 section 7.6.1),
// with whatever the Connection header names.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func removeHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = http.CanonicalHeaderKey(strings.TrimSpace(f)); f != "" {
				delete(h, f)
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
}

// outRequest builds the upstream request: same method, path (after a
// route's prefix), query and headers, minus hop-by-hop headers and
// X-Ctxguard-Token; the body is streamed unless the rewrite path replaces
// it.
func (p *Proxy) outRequest(ctx context.Context, r *http.Request, x *exchange) *http.Request {
	up := x.up.url
	u := *up
	u.Path, u.RawPath = joinPath(up, x.path, x.escPath)
	switch {
	case u.RawQuery == "":
		u.RawQuery = r.URL.RawQuery
	case r.URL.RawQuery != "":
		u.RawQuery += "&" + r.URL.RawQuery
	}
	h := r.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	te := h["Te"]
	removeHopHeaders(h)
	delete(h, TokenHeader)
	for _, v := range te {
		if strings.EqualFold(strings.TrimSpace(v), "trailers") {
			h.Set("Te", "trailers")
		}
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // keep Go from adding its own
	}
	out := (&http.Request{
		Method:        r.Method,
		URL:           &u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Host:          u.Host,
		ContentLength: r.ContentLength,
		Body:          x.body,
		Close:         false,
	}).WithContext(ctx)
	if r.ContentLength == 0 {
		out.Body = nil // so the transport may retry on a stale connection
	}
	return out
}

// joinPath appends a request path (path, and esc as the client escaped
// it) to the upstream's path prefix, keeping the client's escaping.
func joinPath(base *url.URL, path, esc string) (joined, rawpath string) {
	if base.Path != "" && base.Path != "/" {
		esc = strings.TrimSuffix(base.EscapedPath(), "/") + "/" + strings.TrimPrefix(esc, "/")
		path = strings.TrimSuffix(base.Path, "/") + "/" + strings.TrimPrefix(path, "/")
	}
	if esc == (&url.URL{Path: path}).EscapedPath() {
		return path, ""
	}
	return path, esc
}
