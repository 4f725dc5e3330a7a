package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
)

// The proxy calls into what rewrites requests through hooks it defines
// here, in the manner of httputil.ReverseProxy, and never imports it:
// Options.Rewriter (nil: a pure proxy), the Outcome's Release and Recover
// (nil: nothing to hand back, no overflow recovery) and Options.Record
// (nil: the proxy logs a line per exchange itself).

// Rewriter turns a client's request body, of any protocol that finds the
// request rewritable (protocol.Protocol.Rewritable), into the body to
// send upstream.
type Rewriter interface {
	// Rewrite is called once per rewritable request (such as POST
	// /v1/messages) with the decoded request body and the protocol that
	// claimed it. It must be safe for concurrent use.
	//
	// body holds the whole (decoded) request in pooled memory that the
	// proxy reuses once the exchange is over: the Rewriter must not keep
	// it (or any slice of it) after Rewrite returns, and must never
	// modify it, because the proxy forwards it as it is when Outcome.Body
	// says "unchanged". req gives
	// the request's method, URL and headers; its Body has been consumed,
	// and neither req nor its headers may be retained or modified.
	//
	// Rewrite must fail open: on any problem (invalid JSON, an unknown
	// shape, an internal error) it returns the body unchanged. A panic in
	// Rewrite is recovered, logged with an error ID, and the original
	// body is forwarded.
	Rewrite(ctx context.Context, req *http.Request, proto protocol.Protocol, body []byte) Outcome
}

// RewriterFunc adapts a function to Rewriter.
type RewriterFunc func(ctx context.Context, req *http.Request, proto protocol.Protocol, body []byte) Outcome

// Rewrite calls f.
func (f RewriterFunc) Rewrite(ctx context.Context, req *http.Request, proto protocol.Protocol, body []byte) Outcome {
	return f(ctx, req, proto, body)
}

// Outcome is what a Rewriter decided for one request.
type Outcome struct {
	// Body is the body to send upstream. nil, or the input slice itself
	// (same start and length), means unchanged: the request is then
	// forwarded exactly as the client sent it. A new body becomes owned
	// by the proxy.
	Body []byte
	// AddHeader lists values to append to list headers of the upstream
	// request (name, value), such as anthropic-beta; values the client
	// already sent are not repeated.
	AddHeader [][2]string
	// RespHeader holds headers to add to the client's response. Only
	// names starting with X-Ctxguard- are applied.
	RespHeader http.Header
	// Release, if set, is called once nothing reads Body any more (the
	// exchange is over and the transport closed the body), so a Rewriter
	// can hand out pooled memory.
	Release func()
	// Record, if set, is the Rewriter's part of the exchange's record
	// (record.Exchange): what the rewrite decided. The proxy completes it
	// with what the transport saw and hands it to Options.Record. A nil
	// Record gets a fresh one.
	Record *record.Exchange
	// Recover, if set, is called when the upstream answers with a
	// context-overflow error (protocol.OverflowReader) before any byte of
	// the answer reached the client. It returns one retry, compacted
	// harder, or an error saying why it has none: the upstream's error is
	// then forwarded and the exchange recorded as a failed recovery
	// (record.RecoveryFailed) with that reason. The proxy calls it at
	// most once per request and never retries a request whose answer has
	// started to reach the client.
	Recover func(ctx context.Context, o protocol.Overflow) (Retry, error)
}

// Timeouts bound the proxy's waits on the client and on the upstream. A
// zero field takes its default (DefaultTimeouts); a negative one disables
// that bound.
type Timeouts struct {
	// BodyRead bounds the client's silence while it sends a request
	// body: no byte for this long and the request fails with 408.
	// Default 30s.
	BodyRead time.Duration
	// BodyMinRate, in bytes per second, bounds the whole body: it must
	// arrive within BodyRead + size/BodyMinRate, where size is the
	// Content-Length, or for a chunked body the bytes received so far.
	// It applies only with BodyRead. Default 65536.
	BodyMinRate int64
	// Dial bounds connecting to the upstream, TLS handshake included.
	// Default 30s.
	Dial time.Duration
	// UpstreamWrite bounds the upstream's silence while it takes the
	// request body: if the transport reads nothing of the body for this
	// long (time it spends waiting on a client that is still sending
	// does not count), the request is cancelled and answered with 504.
	// Default 30s.
	UpstreamWrite time.Duration
	// ResponseHeader bounds the wait for the upstream's response headers
	// once the request is sent. Default 10m: a non-streamed Messages
	// answer only starts when the model has finished.
	ResponseHeader time.Duration
	// Idle bounds the upstream's silence between two reads of a response
	// body (the API sends SSE pings while it works). Time spent writing
	// to a slow client does not count. Default 5m.
	Idle time.Duration
	// ClientWrite bounds one write (and flush) of the answer to the
	// client: a client that takes nothing for this long has the answer
	// cut and the upstream request cancelled. Default 5m.
	ClientWrite time.Duration
}

// DefaultTimeouts returns the timeouts a zero Timeouts field stands for.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		BodyRead:       30 * time.Second,
		BodyMinRate:    64 << 10,
		Dial:           30 * time.Second,
		UpstreamWrite:  30 * time.Second,
		ResponseHeader: 10 * time.Minute,
		Idle:           5 * time.Minute,
		ClientWrite:    5 * time.Minute,
	}
}

// Options configure a Proxy. The zero value proxies to DefaultUpstream
// with no rewriting.
type Options struct {
	// Upstream is the API base URL (scheme, host, optional path prefix)
	// for requests whose protocol family has none in Upstreams, and for
	// requests no protocol claims. Default DefaultUpstream.
	Upstream *url.URL
	// Upstreams are the base URLs by protocol family ("anthropic",
	// "openai").
	Upstreams map[string]*url.URL
	// Routes are named path prefixes to other upstreams.
	Routes []Route
	// Protocols are the APIs the proxy knows, most preferred first: they
	// claim requests, parse rewritable bodies (through the Rewriter), read
	// usage and shape errors. Without any, the proxy forwards everything
	// untouched and answers its own errors in a plain JSON shape.
	Protocols []protocol.Protocol
	// MaxBody is the largest rewritable request body accepted, after
	// decompression; larger ones get 413 request_too_large. Default
	// DefaultMaxBody. Other paths are streamed and not limited here (the
	// upstream enforces its own per-endpoint limits).
	MaxBody int64
	// MaxBuffered caps the request bytes buffered at once across all
	// requests: rewritable bodies as received, their decoded copies and
	// the Rewriter's output (reserved as len(body) + outSlack). A body
	// that does not fit is answered with 529 overloaded_error and a
	// Retry-After header; when only the decoded copy or the output does
	// not fit, the body is forwarded untouched with X-Ctxguard-Skipped:
	// overloaded. Default (0) 4×MaxBody; negative means no cap. Keep it
	// at least MaxBody, or the largest bodies always get 529.
	MaxBuffered int64
	// AuthToken, when not empty, must come with every request (API
	// paths and /ctxguard/ alike) in the X-Ctxguard-Token header;
	// other requests get 401 authentication_error. That header is never
	// forwarded upstream, token or not, and never logged.
	AuthToken string
	Timeouts  Timeouts
	// Logger receives one line per request and every error with its ID.
	// Default: discard.
	Logger *slog.Logger
	// Rewriter rewrites the bodies of rewritable requests. Default: none
	// (pure proxy).
	Rewriter Rewriter
	// LocalAuth, with AuthToken, admits a request for a local path
	// (Extra's) that carries no token header: a sign-in cookie, a signed
	// link, a public page. Default: none is.
	LocalAuth func(r *http.Request) bool
	// SignIn, with AuthToken, is the path a browser's GET of a page
	// under /ctxguard/ (not /ctxguard/v1/ nor /ctxguard/api/) is
	// redirected to (303) when it is not admitted, instead of 401.
	SignIn string
	// Extra serves every path under /ctxguard/, /metrics and the health
	// probes /healthz and /readyz (never forwarded: no model API has
	// them; the probes need no AuthToken). Default: 404 for those paths.
	Extra http.Handler
	// Record, if set, receives the record of every exchange that took the
	// rewrite path (a rewritable request: see Protocol.Rewritable),
	// whether the Rewriter changed it, left it, or never saw it because
	// the proxy answered with its own error (outcome record.Refused): the
	// Rewriter's part (Outcome.Record) completed with the route, the
	// durations, the status, the usage read from a 2xx answer and the
	// byte counts. It is called once per exchange, after the answer was
	// relayed (or cut), on the request's goroutine, so it must return
	// quickly. The proxy then logs nothing of the exchange itself: the
	// record is the log line. Without it, the proxy logs a line per
	// exchange.
	Record func(*record.Exchange)
	// DumpBodies logs client and upstream request bodies at debug level.
	// For debugging only: bodies hold the user's data.
	DumpBodies bool
	// Transport replaces the proxy's own upstream transport (tests,
	// custom dialers). It must not follow redirects or decompress
	// responses. When nil, the proxy builds an http.Transport from
	// Timeouts that honours HTTPS_PROXY / NO_PROXY.
	Transport http.RoundTripper
}

// Route sends the requests under a path prefix to another upstream:
// Prefix + "/rest" goes to Upstream + "/rest".
type Route struct {
	Prefix   string // "/x/openrouter": starts with '/', does not end with one
	Upstream *url.URL
}
