package ctxguard

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/ctxguard/ctxguard/protocol"
)

// Middleware rewrites the requests an HTTP client makes in process,
// without the proxy: Anthropic Messages, OpenAI Responses and Chat
// Completions requests alike (Protocols). Its signature matches the
// option.Middleware of the official Go SDKs (anthropic-sdk-go and
// openai-go), so it plugs in with one line:
//
//	client := anthropic.NewClient(option.WithMiddleware(
//		func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
//			return guard.Middleware(r, next)
//		}))
//
// The API's path is found after the client's base URL (from /v1/ on).
// Requests no protocol rewrites pass through untouched; so does any
// request whose body cannot be read or rewritten (fail open).
func (g *Guard) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return next(req)
	}
	// The SDK's base URL may have a path of its own: the API's path is
	// what follows it, from /v1/ on.
	path := req.URL.Path
	if i := strings.Index(path, "/v1/"); i > 0 {
		path = path[i:]
	}
	proto := protocol.Pick(g.protocols, req.Method, path, req.Header)
	if proto == nil || !proto.Rewritable(req.Method, path) {
		return next(req)
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, g.cfg.MaxBody+1))
	req.Body.Close()
	if err != nil || int64(len(body)) > g.cfg.MaxBody || req.Header.Get("Content-Encoding") != "" {
		// Give the client back exactly what it had.
		req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		return next(req)
	}
	res := g.RewriteBody(req.Context(), proto, req.Header, body)
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(res.Body))
	out.ContentLength = int64(len(res.Body))
	out.Header.Set("Content-Length", strconv.Itoa(len(res.Body)))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(res.Body)), nil }
	for _, hv := range res.Headers {
		protocol.AppendList(out.Header, hv[0], hv[1])
	}
	return next(out)
}

// errReader returns err (or EOF) once the body's bytes are read.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

// Transport returns an http.RoundTripper that rewrites Messages requests
// and sends everything through base (http.DefaultTransport when nil), for
// any Go HTTP client.
func (g *Guard) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripper(func(r *http.Request) (*http.Response, error) { return g.Middleware(r, base.RoundTrip) })
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
