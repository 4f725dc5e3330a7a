package serve

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
)

// Middleware rewrites the requests an HTTP client makes in process,
// without the proxy: Anthropic Messages, OpenAI Responses and Chat
// Completions requests alike (the Server's protocols). Its signature
// matches the option.Middleware of the official Go SDKs (anthropic-sdk-go
// and openai-go), so it plugs in with one line:
//
//	client := anthropic.NewClient(option.WithMiddleware(
//		func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
//			return guard.Middleware(r, next)
//		}))
//
// The API's path is found after the client's base URL (from /v1/ on).
// Requests no protocol rewrites pass through untouched; so does any
// request whose body cannot be read or rewritten (fail open). The record
// of a rewritable exchange (the engine's Records) is published when the answer's body ends or is
// closed, with the usage read from it when it is not content-coded; a
// client that never closes the body never publishes it.
func (s *Server) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return next(req)
	}
	// The SDK's base URL may have a path of its own: the API's path is
	// what follows it, from /v1/ on.
	path := req.URL.Path
	if i := strings.Index(path, "/v1/"); i > 0 {
		path = path[i:]
	}
	proto := protocol.Pick(s.protocols, req.Method, path, req.Header)
	if proto == nil || !proto.Rewritable(req.Method, path) {
		return next(req)
	}
	cfg := s.engine.Config()
	body, err := io.ReadAll(io.LimitReader(req.Body, cfg.MaxBody+1))
	req.Body.Close()
	if err != nil || int64(len(body)) > cfg.MaxBody || req.Header.Get("Content-Encoding") != "" {
		// Give the client back exactly what it had.
		req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
		return next(req)
	}
	start := time.Now()
	oc := s.engine.RewriteRequest(req.Context(), req.Header, proto, body)
	rec := oc.Record
	rec.Start, rec.Path, rec.Rewrite = start, path, time.Since(start)
	rec.BytesIn, rec.BytesOut = int64(len(body)), int64(len(oc.Body))
	resp, err := next(withBody(req, oc.Body, oc.AddHeader))
	rec.FirstByte = time.Since(start)
	if err != nil || resp == nil {
		if err != nil {
			rec.Error = err.Error()
		}
		rec.Total = rec.FirstByte
		s.engine.Publish(rec)
		return resp, err
	}
	rec.Status = resp.StatusCode
	rb := &recordedBody{ReadCloser: resp.Body, s: s, rec: rec}
	if resp.StatusCode/100 == 2 && resp.Header.Get("Content-Encoding") == "" {
		rb.tap = proto.NewUsageTap(resp.Header.Get("Content-Type"))
	}
	resp.Body = rb
	return resp, nil
}

// withBody returns a copy of req that sends body, with the list-header
// values add appended (proxy.Outcome.AddHeader).
func withBody(req *http.Request, body []byte, add [][2]string) *http.Request {
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.Header.Set("Content-Length", strconv.Itoa(len(body)))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	for _, hv := range add {
		protocol.AppendList(out.Header, hv[0], hv[1])
	}
	return out
}

// recordedBody is an answer's body on its way to an in-process client: it
// feeds the usage tap and publishes the exchange's record once, when the
// body ends (EOF or an error) or is closed.
type recordedBody struct {
	io.ReadCloser
	s    *Server
	rec  *record.Exchange
	tap  protocol.UsageTap // nil: no usage is read
	done bool
}

func (b *recordedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.rec.BytesResp += int64(n)
	if b.tap != nil && n > 0 {
		b.tap.Write(p[:n])
	}
	if err != nil {
		b.finish(err)
	}
	return n, err
}

func (b *recordedBody) Close() error {
	err := b.ReadCloser.Close()
	b.finish(nil)
	return err
}

// finish publishes the record, once.
func (b *recordedBody) finish(err error) {
	if b.done {
		return
	}
	b.done = true
	if err != nil && err != io.EOF {
		b.rec.Error = err.Error()
	}
	if b.tap != nil {
		if u, ok := b.tap.Usage(); ok {
			b.rec.Usage = &u
		}
	}
	b.rec.Total = time.Since(b.rec.Start)
	b.s.engine.Publish(b.rec)
}

// errReader returns err (or EOF) once the body's bytes are read.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

// Transport returns an http.RoundTripper that rewrites the requests of
// every protocol the Server speaks, as Middleware does, and sends
// everything through base (http.DefaultTransport when nil), for any Go
// HTTP client.
func (s *Server) Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripper(func(r *http.Request) (*http.Response, error) { return s.Middleware(r, base.RoundTrip) })
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
