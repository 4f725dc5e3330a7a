package serve

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/proxy"
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
// request whose body cannot be read or rewritten (fail open). Like the
// proxy, it recovers from a context overflow: when the upstream refuses
// the rewritten request as too long and compaction is on, next is called
// once more with a body compacted harder, and the client gets the retry's
// answer (recoverOverflow). The record of a rewritable exchange (the
// engine's Records) is published when the answer's body ends or is
// closed, with the usage read from it when it is not content-coded; a
// client that never closes the body never publishes it.
func (s *Server) Middleware(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return next(req)
	}
	path := apiPath(req.URL.Path)
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
	if err == nil && resp != nil && oc.Recover != nil {
		resp = s.recoverOverflow(req, resp, next, &oc, proto, cfg.Timeouts.Idle)
	}
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

// recoverOverflow looks at the first answer resp to a rewritten request.
// When the protocol reads it as a context overflow (proxy.PeekOverflow,
// which reads at most a bounded head of it, within idle when positive)
// and the engine has a compacted body for it (oc.Recover), the request is
// sent again through next, once, with that body, and the retry's answer
// is returned instead, whatever it is: a 2xx marks the exchange recovered,
// anything else a failed recovery, whose reason the record keeps.
// Otherwise, or when the retry cannot be sent, resp is returned as it
// came (what was read of its body is put back); an overflow that got no
// retry is a failed recovery too.
func (s *Server) recoverOverflow(req *http.Request, resp *http.Response, next func(*http.Request) (*http.Response, error),
	oc *proxy.Outcome, proto protocol.Protocol, idle time.Duration) *http.Response {
	or, ok := proto.(protocol.OverflowReader)
	if !ok {
		return resp
	}
	o, ok := peekOverflow(resp, or, idle)
	if !ok {
		return resp
	}
	rec := oc.Record
	rt, err := oc.Recover(req.Context(), o)
	if err != nil {
		rec.Outcome, rec.Reason = record.RecoveryFailed, "no smaller body to retry with: "+err.Error()
		return resp
	}
	retry, err := next(withBody(req, rt.Body, oc.AddHeader))
	if err != nil || retry == nil {
		// Fail open: the upstream's own answer, its head put back.
		reason := "no answer"
		if err != nil {
			reason = err.Error()
		}
		rec.Outcome, rec.Reason = record.RecoveryFailed, "the compacted retry could not be sent: "+reason
		return resp
	}
	resp.Body.Close()
	if rt.Sent != nil {
		rt.Sent()
	}
	rec.BytesOut = int64(len(rt.Body))
	if retry.StatusCode/100 != 2 {
		rec.Outcome, rec.Reason = record.RecoveryFailed, "the compacted retry got status "+strconv.Itoa(retry.StatusCode)
		if o2, ok := peekOverflow(retry, or, idle); ok {
			rec.Reason = "the compacted retry was too long too" + proxy.OverflowFigures(o2)
		}
		return retry
	}
	rec.Outcome = record.Recovered
	s.log.Info("request too long for the upstream; retried compacted", "tokens", o.Tokens, "limit", o.Limit, "status", retry.StatusCode)
	return retry
}

// peekOverflow is proxy.PeekOverflow with the read of the answer's head
// bounded by idle (when positive): past it, the answer's body is closed.
func peekOverflow(resp *http.Response, or protocol.OverflowReader, idle time.Duration) (protocol.Overflow, bool) {
	if idle > 0 {
		body := resp.Body
		defer time.AfterFunc(idle, func() { body.Close() }).Stop()
	}
	return proxy.PeekOverflow(resp, or)
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

// apiVersions are the first path segments of the APIs' paths.
var apiVersions = []string{"/v1/", "/v1beta/", "/v1alpha/"}

// apiPath returns the API's path in the path of a request an SDK sends,
// whose base URL may have a path of its own: what follows it, from the
// first version segment (/v1/, Gemini's /v1beta/ and /v1alpha/) on.
func apiPath(path string) string {
	at := -1
	for _, v := range apiVersions {
		if i := strings.Index(path, v); i > 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at > 0 {
		return path[at:]
	}
	return path
}
