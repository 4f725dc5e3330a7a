// Package proxy is ctxguard's HTTP layer: a reverse proxy to the model APIs
// that hands every rewritable request body to a Rewriter and streams the
// answer straight back.
//
// Routing: each request is claimed by one of Options.Protocols (see
// protocol.Protocol.Claim: the Messages API claims /v1/messages, the
// Responses API /v1/responses, ...), and goes to the upstream of that
// protocol's family (Options.Upstreams, else Options.Upstream). A path
// under a named route's prefix (Options.Routes, e.g. /x/openrouter/...)
// goes to that route's upstream with the prefix removed, and is claimed
// by what follows the prefix. Every method and path is forwarded. A
// request its protocol calls rewritable (POST /v1/messages, with any
// query such as Claude Code's ?beta=true) with a JSON body is read into
// memory, given to the Rewriter with its protocol, and the body it
// returns is sent upstream with a correct Content-Length. Everything
// else — count_tokens, models, unknown paths, another method or content
// type — is streamed through untouched, without being buffered. Paths
// under /ctxguard/, /metrics and the probes /healthz and /readyz are
// never forwarded: they go to Options.Extra.
// WebSocket upgrades are refused with 426 Upgrade Required, so that
// clients that try them (Codex) fall back to HTTP, where ctxguard sees
// the whole history.
//
// Fidelity: headers pass both ways unchanged (credentials, anthropic-beta,
// anthropic-version, request-id, retry-after and unknown headers alike),
// except the hop-by-hop headers HTTP requires a proxy to drop,
// X-Ctxguard-Token (see Access) and list-header values (anthropic-beta)
// the Rewriter asks to append. Nothing is added
// (no X-Forwarded-For, no default User-Agent). A body the Rewriter leaves
// unchanged is forwarded byte for byte — if it arrived compressed, in its
// original compressed form. Response bodies reach the client exactly as
// the upstream sent them, flushed after every read when they stream.
//
// Compressed bodies: a request body with Content-Encoding gzip, deflate,
// br or zstd is decoded (at most MaxBody bytes; more is a 413) for the
// Rewriter; a rewritten body is sent uncompressed, an unchanged one in its
// original encoding, and one that cannot be decoded untouched. Answers are
// never decoded on their way to the client: the client's Accept-Encoding
// goes upstream as sent (Claude Code sends gzip, deflate, br, zstd), so the
// upstream may compress, and the client receives exactly its bytes. The
// usage tap reads a copy decoded on a side goroutine, after each chunk has
// been written to the client; an answer in any other coding gives no usage.
//
// Streaming: answers are copied as they arrive and flushed after every
// read when they are SSE or of unknown length; full duplex is enabled so
// an HTTP/1 client is never cut while the upstream streams (see
// golang/go#40747). A client that goes away cancels the upstream request;
// an upstream that fails or falls silent mid-answer makes the proxy cut
// the client's connection instead of ending the answer cleanly, so a
// truncated answer cannot pass for a complete one. An answer without
// Content-Type reaches the client without one (none is sniffed).
//
// Timeouts (Options.Timeouts; every wait is bounded, each bound can be
// turned off):
//
//   - BodyRead (30s): the client's silence while it sends a request
//     body; BodyMinRate (64 KiB/s): the whole body must arrive within
//     BodyRead + size/BodyMinRate. A body that misses either gets 408.
//     The connection's read deadline follows the body as it arrives and
//     is cleared once the body is read.
//   - Dial (30s): connecting to the upstream, TLS included.
//   - UpstreamWrite (30s): the upstream's silence while it takes the body
//     (reads the transport spends waiting on the client do not count);
//     the request is cancelled and answered with 504.
//   - ResponseHeader (10m): the wait for the answer's headers once the
//     request is sent (a non-streamed answer starts when the model ends).
//   - Idle (5m): the upstream's silence mid-answer. It runs only while
//     the proxy waits on the upstream, never while it writes to a slow
//     client.
//   - ClientWrite (5m): one write of the answer to the client; a client
//     that takes nothing for that long has the answer cut and the
//     upstream request cancelled, and the log blames the client.
//
// The http.Server's own bounds (request headers, idle keep-alive,
// shutdown) are the caller's.
//
// Limits: a Messages body over MaxBody (32 MB, after decoding) gets 413.
// MaxBuffered (default 4×MaxBody) caps the request bytes buffered at once
// across all requests — bodies as received, decoded copies and room for
// the Rewriter's output, reserved before they are allocated and released
// when nothing reads them any more. A body that does not fit gets 529
// overloaded_error with Retry-After, at once; when only its decoded copy
// or rewrite does not fit, it is forwarded untouched (X-Ctxguard-Skipped:
// overloaded).
//
// Early answers: when the proxy answers before it has read the whole
// request body (413, 529, 401, an upstream that failed or answered
// early), it reads and discards the rest after the answer, up to 64 MiB
// or 10 s, so that a client that sends its whole body before reading
// (Python's http.client) receives the answer rather than a broken pipe.
// A client that sent Expect: 100-continue and was not asked for its body
// is answered without waiting for it.
//
// Access: with Options.AuthToken set, every request, /ctxguard/ paths
// included, must carry it in X-Ctxguard-Token (401 otherwise); only the
// health probes are served without it, and the local paths that
// Options.LocalAuth admits (a browser signed in to the dashboard, a
// signed blob link). That header is never forwarded upstream, nor
// logged.
//
// Errors: ctxguard's own failures (body over the limit, too slow or too
// big for the buffers, a wrong token, upstream unreachable or timing
// out) are answered in the error shape of the request's protocol through
// protocol.Write (application/json, X-Content-Type-Options: nosniff),
// with an error ID that also appears in the log line carrying the
// detail. Upstream answers, errors included, are never altered. The API
// key is never logged.
//
// A Proxy is safe for concurrent use.
package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"github.com/ctxguard/ctxguard/internal/auth"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
)

// DefaultUpstream is where requests go when Options.Upstream is nil.
const DefaultUpstream = "https://api.anthropic.com"

// DefaultMaxBody is the API's own request size limit (32 MB).
const DefaultMaxBody = 32 << 20

// origin is one upstream base URL.
type origin struct {
	url  *url.URL // without fragments; credentials kept
	name string   // for messages and logs, without credentials
}

func newOrigin(u *url.URL) (*origin, error) {
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("proxy: upstream %q: scheme must be http or https", u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("proxy: upstream %q has no host", u.Redacted())
	}
	c := &url.URL{Scheme: u.Scheme, User: u.User, Host: u.Host, Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery}
	return &origin{url: c, name: (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()}, nil
}

// validPrefix reports whether a route prefix is "/" followed by path
// segments of characters URLs never escape, without a trailing slash.
func validPrefix(p string) bool {
	if len(p) < 2 || p[0] != '/' || p[len(p)-1] == '/' || strings.Contains(p, "//") {
		return false
	}
	for i := 1; i < len(p); i++ {
		c := p[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '/') {
			return false
		}
	}
	return true
}

// route is a Route, resolved.
type route struct {
	prefix string
	up     *origin
}

// Proxy is the reverse proxy. It is an http.Handler.
type Proxy struct {
	def      *origin            // Options.Upstream
	families map[string]*origin // Options.Upstreams
	routes   []route
	protos   []protocol.Protocol
	maxBody  int64
	mem      *budget  // nil: no cap on buffered bytes
	t        Timeouts // resolved: 0 means none
	log      *slog.Logger
	rw       Rewriter
	extra    http.Handler
	record   func(*record.Exchange)
	dump     bool
	rt       http.RoundTripper

	keys      *auth.Keys // of Options.AuthToken; nil: no token
	localAuth func(*http.Request) bool
	signIn    string
}

// New returns a Proxy for opts.
func New(opts Options) (*Proxy, error) {
	up := opts.Upstream
	if up == nil {
		u, err := url.Parse(DefaultUpstream)
		if err != nil {
			return nil, err
		}
		up = u
	}
	def, err := newOrigin(up)
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		def:      def,
		families: map[string]*origin{},
		protos:   opts.Protocols,
		maxBody:  opts.MaxBody,
		log:      opts.Logger,
		rw:       opts.Rewriter,
		extra:    opts.Extra,
		record:   opts.Record,
		dump:     opts.DumpBodies,
		rt:       opts.Transport,
	}
	for fam, u := range opts.Upstreams {
		if p.families[fam], err = newOrigin(u); err != nil {
			return nil, err
		}
	}
	for _, r := range opts.Routes {
		if !validPrefix(r.Prefix) || r.Upstream == nil {
			return nil, fmt.Errorf("proxy: route %q: a prefix is /name[/name...] of letters, digits, '-', '_' and '.', with an upstream", r.Prefix)
		}
		u, err := newOrigin(r.Upstream)
		if err != nil {
			return nil, err
		}
		p.routes = append(p.routes, route{prefix: r.Prefix, up: u})
	}
	if p.maxBody <= 0 {
		p.maxBody = DefaultMaxBody
	}
	switch {
	case opts.MaxBuffered == 0:
		p.mem = &budget{max: 4 * p.maxBody}
	case opts.MaxBuffered > 0:
		p.mem = &budget{max: opts.MaxBuffered}
	}
	p.keys, p.localAuth, p.signIn = auth.New(opts.AuthToken), opts.LocalAuth, opts.SignIn
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	t, dt := opts.Timeouts, DefaultTimeouts()
	p.t = Timeouts{
		BodyRead:       pick(t.BodyRead, dt.BodyRead),
		BodyMinRate:    pick(t.BodyMinRate, dt.BodyMinRate),
		Dial:           pick(t.Dial, dt.Dial),
		UpstreamWrite:  pick(t.UpstreamWrite, dt.UpstreamWrite),
		ResponseHeader: pick(t.ResponseHeader, dt.ResponseHeader),
		Idle:           pick(t.Idle, dt.Idle),
		ClientWrite:    pick(t.ClientWrite, dt.ClientWrite),
	}
	if p.rt == nil {
		dial := p.t.Dial
		p.rt = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: dial, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout:   dial,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          256,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: p.t.ResponseHeader,
			ExpectContinueTimeout: time.Second,
			// The client's Accept-Encoding goes upstream as sent; the
			// answer must reach it undecoded.
			DisableCompression: true,
			WriteBufferSize:    64 << 10,
			ReadBufferSize:     64 << 10,
		}
	}
	return p, nil
}

// pick resolves one Timeouts field: 0 takes def, negative means none (0).
func pick[T ~int64](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// Close releases idle upstream connections.
func (p *Proxy) Close() {
	if t, ok := p.rt.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// Upstream returns the default upstream base URL without credentials.
func (p *Proxy) Upstream() string { return p.def.name }

// exchange is the state of one proxied request.
type exchange struct {
	start       time.Time
	proto       protocol.Protocol // the protocol that claimed it, or nil
	up          *origin           // where it goes
	route       string            // the named route's prefix, or ""
	path        string            // the path after a route's prefix
	escPath     string            // the same, as the client escaped it
	messages    bool              // went through the Rewriter path
	changed     bool              // the Rewriter changed the body
	inBytes     int64             // request body bytes from the client (-1 unknown)
	outBytes    int64             // request body bytes sent upstream (-1 unknown)
	status      int
	respBytes   int64
	wroteHeader bool
	read        time.Duration // from start until the body was read
	rewrite     time.Duration // decoding and rewriting
	firstByte   time.Duration // from start until the upstream's answer headers
	recovered   bool          // retried compacted after an overflow, successfully
	recovery    string        // why an overflow recovery failed, or ""
	skipped     string        // why the Rewriter did not see the body, or ""
	usage       *protocol.Usage
	outcome     Outcome
	errID       string      // the ID of the error rendered to the client
	body        *clientBody // the client's request body
	lease       *lease      // pooled body memory, freed when nothing reads it
	ended       bool        // the exchange dropped its lease reference
}

// end drops the exchange's own reference to its lease (once).
func (x *exchange) end() {
	if !x.ended {
		x.ended = true
		x.lease.drop()
	}
}

// ServeHTTP proxies one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := &exchange{start: time.Now(), inBytes: r.ContentLength, outBytes: r.ContentLength, lease: newLease(p.mem)}
	defer x.end() // also on a panic, so that no reservation outlives it
	rc := http.NewResponseController(w)
	local := isLocal(r.URL.Path)
	if !local {
		// Not for ctxguard's own endpoints, which answer without the
		// proxy's drain: net/http then discards an unread body itself
		// (with full duplex, a body left unread makes it panic when it
		// reads the connection's next request).
		_ = rc.EnableFullDuplex() // HTTP/2 is always full duplex and says so with an error
	}
	x.body = p.newClientBody(r, rc, x.start)
	defer x.body.end()
	if !local {
		p.dispatch(r, x)
	} else if len(p.protos) > 0 {
		x.proto = p.protos[0]
	}
	var err error
	if !isProbe(r.URL.Path) {
		err = p.authorize(r)
	}
	if err == errSignIn {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, p.signIn, http.StatusSeeOther)
		return
	}
	if err == nil && local {
		if p.extra != nil {
			p.extra.ServeHTTP(w, r)
			return
		}
		err = protocol.Errorf(http.StatusNotFound, protocol.NotFound, nil, "ctxguard: no such endpoint")
	}
	if err == nil && isUpgrade(r) {
		err = &protocol.Error{Status: http.StatusUpgradeRequired, Kind: protocol.InvalidRequest,
			Message: "ctxguard: WebSocket is not supported; use HTTP"}
	}
	if err == nil {
		err = p.serve(w, r, rc, x)
	}
	cut := false
	if err != nil {
		if !x.wroteHeader {
			p.writeError(w, r, x, err)
		} else {
			p.log.LogAttrs(r.Context(), slog.LevelWarn, "response cut", slog.String("path", r.URL.Path), slog.String("error", err.Error()))
			// The upstream failed mid-body: cut the connection rather than
			// end the response cleanly, so the client cannot mistake a
			// truncated answer for a complete one.
			cut = r.Context().Err() == nil
		}
	}
	if x.messages && p.record != nil {
		p.publish(r, x, err)
	} else {
		p.logExchange(r, x, err)
	}
	x.end() // buffered memory is free before a drain
	if cut {
		panic(http.ErrAbortHandler)
	}
	if x.body.settle() && r.Context().Err() == nil {
		p.drain(r, x.body)
	}
}

// isLocal reports whether path is one of ctxguard's own (Options.Extra):
// under /ctxguard/, /metrics, or a probe.
func isLocal(path string) bool {
	return strings.HasPrefix(path, "/ctxguard/") || path == "/metrics" || isProbe(path)
}

// isProbe reports whether path is a health probe (/healthz, /readyz):
// served without the auth token, since a load balancer's probe carries
// none and the answer tells nothing but up or down.
func isProbe(path string) bool { return path == "/healthz" || path == "/readyz" }

// dispatch finds the request's route, protocol and upstream.
func (p *Proxy) dispatch(r *http.Request, x *exchange) {
	x.path, x.escPath = r.URL.Path, r.URL.EscapedPath()
	for _, rt := range p.routes {
		if rest, ok := strings.CutPrefix(r.URL.Path, rt.prefix); ok && strings.HasPrefix(rest, "/") {
			// A prefix has no escapes (see New): the escaped path starts
			// with the same bytes.
			x.path, x.escPath, x.up, x.route = rest, x.escPath[len(rt.prefix):], rt.up, rt.prefix
			break
		}
	}
	x.proto = protocol.Pick(p.protos, r.Method, x.path, r.Header)
	if x.up == nil && x.proto != nil {
		x.up = p.families[x.proto.Family()]
	}
	if x.up == nil {
		x.up = p.def
	}
	if x.proto == nil && len(p.protos) > 0 {
		// Nothing claims it: it goes to the default upstream untouched,
		// and ctxguard's own errors take the first protocol's shape.
		x.proto = p.protos[0]
	}
}

// isUpgrade reports whether r asks to switch to WebSocket.
func isUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Upgrade") {
		if strings.Contains(strings.ToLower(v), "websocket") {
			return true
		}
	}
	return false
}

// writeError renders one of ctxguard's own errors in the request's
// protocol.
func (p *Proxy) writeError(w http.ResponseWriter, r *http.Request, x *exchange, err error) {
	ctx := r.Context()
	if x.body.timedOut() {
		// net/http cancels the request when a body read times out, but
		// the client is still there to read the 408.
		ctx = context.WithoutCancel(ctx)
	}
	e := protocol.Write(ctx, w, p.log, x.proto, err)
	x.status, x.errID = e.Status, e.ID
	if x.status == 0 {
		x.status = http.StatusInternalServerError
	}
}

func (p *Proxy) logExchange(r *http.Request, x *exchange, err error) {
	level := slog.LevelDebug
	if x.messages {
		level = slog.LevelInfo
	}
	if !p.log.Enabled(r.Context(), level) {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", x.status),
		slog.Duration("dur", time.Since(x.start)),
		slog.Int64("in_bytes", x.inBytes),
		slog.Int64("out_bytes", x.outBytes),
		slog.Int64("resp_bytes", x.respBytes),
	)
	if x.messages {
		attrs = append(attrs, slog.Bool("rewritten", x.changed), slog.Duration("rewrite", x.rewrite))
	}
	if x.proto != nil {
		attrs = append(attrs, slog.String("protocol", x.proto.Name()))
	}
	if x.usage != nil {
		attrs = append(attrs, slog.Int("input_tokens", x.usage.PromptTokens()), slog.Int("output_tokens", x.usage.Output))
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
		if x.errID != "" {
			attrs = append(attrs, slog.String("error_id", x.errID))
		}
	}
	p.log.LogAttrs(r.Context(), level, "proxy", attrs...)
}

// publish completes the exchange's record (the Rewriter's part, or a
// fresh one) with what the proxy saw and hands it to Options.Record.
func (p *Proxy) publish(r *http.Request, x *exchange, err error) {
	rec := x.outcome.Record
	switch {
	case x.skipped != "":
		rec = &record.Exchange{Outcome: record.Bypassed, Skipped: x.skipped} // the Rewriter never saw it
	case rec == nil:
		rec = &record.Exchange{Outcome: record.Unchanged}
	}
	rec.Start = x.start
	if rec.Protocol == "" && x.proto != nil {
		rec.Protocol = x.proto.Name()
	}
	rec.Route = strings.TrimPrefix(x.route, "/x/")
	rec.Path = x.path
	if rec.Client == "" {
		rec.Client = record.Client(r.Header.Get("User-Agent"))
	}
	rec.Read, rec.Rewrite, rec.FirstByte, rec.Total = x.read, x.rewrite, x.firstByte, time.Since(x.start)
	rec.Status, rec.Usage = x.status, x.usage
	rec.BytesIn, rec.BytesOut, rec.BytesResp = x.inBytes, x.outBytes, x.respBytes
	switch {
	case x.recovered:
		rec.Outcome = record.Recovered
	case x.recovery != "":
		rec.Outcome, rec.Reason = record.RecoveryFailed, x.recovery
	}
	if err != nil {
		rec.Error = err.Error()
		if x.errID != "" {
			// ctxguard answered with its own error: that is what the
			// client saw, whatever the rewrite did.
			rec.Outcome, rec.ErrorID = record.Refused, x.errID
		}
	}
	p.record(rec)
}

// rewritable reports whether r goes through the Rewriter: its protocol
// rewrites the endpoint and the body is JSON.
func rewritable(r *http.Request, x *exchange) bool {
	if x.proto == nil || !x.proto.Rewritable(r.Method, x.path) {
		return false
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

var (
	errIdle          = errors.New("upstream idle timeout")
	errUpstreamWrite = errors.New("upstream took no request body bytes")
)

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, x *exchange) error {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(context.Canceled)
	out := p.outRequest(ctx, r, x)

	var oc Outcome
	if rewritable(r, x) {
		x.messages = true
		if err := p.prepareMessages(r, out, x); err != nil {
			return err
		}
		oc = x.outcome
	}

	client := out.Body == io.ReadCloser(x.body)
	if client {
		x.body.hand()
	}
	res, err := p.roundTrip(out, client, cancel)
	x.firstByte = time.Since(x.start)
	if err != nil {
		return p.upstreamError(r, ctx, x, err)
	}
	if oc.Recover != nil && (res.StatusCode == http.StatusBadRequest || res.StatusCode == http.StatusRequestEntityTooLarge) {
		if or, ok := x.proto.(protocol.OverflowReader); ok {
			if retried := p.recoverOverflow(ctx, r, out, res, &oc, x, or, cancel); retried != res {
				res, x.firstByte = retried, time.Since(x.start)
			}
		}
	}
	defer res.Body.Close()
	return p.respond(ctx, w, r, rc, res, &oc, x, cancel)
}

// upstreamError classifies a RoundTrip failure.
func (p *Proxy) upstreamError(r *http.Request, ctx context.Context, x *exchange, err error) error {
	dropQuery(err)
	if e := x.body.timeoutError(); e != nil {
		return e
	}
	if errors.Is(context.Cause(ctx), errUpstreamWrite) {
		return &protocol.Error{Status: http.StatusGatewayTimeout, Kind: protocol.GatewayTimeout,
			Message: "ctxguard: upstream " + x.up.name + " did not take the request body",
			Err:     fmt.Errorf("it read nothing of the body for %v: %w", p.t.UpstreamWrite, err)}
	}
	if r.Context().Err() != nil {
		return &protocol.Error{Status: 499, Kind: protocol.Internal, Message: "ctxguard: client went away", Err: err}
	}
	var ne net.Error
	if errors.Is(context.Cause(ctx), errIdle) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return &protocol.Error{Status: http.StatusGatewayTimeout, Kind: protocol.GatewayTimeout,
			Message: "ctxguard: upstream " + x.up.name + " timed out", Err: err}
	}
	return &protocol.Error{Status: http.StatusBadGateway, Kind: protocol.Internal,
		Message: "ctxguard: upstream " + x.up.name + " unreachable", Err: err}
}

// dropQuery keeps a transport error from naming the request's query,
// which may hold a credential (the Gemini API's key parameter): the
// *url.Error net/http returns names the whole URL, and its text goes to
// the log and the exchange's record.
func dropQuery(err error) {
	var ue *url.Error
	if errors.As(err, &ue) {
		if i := strings.IndexByte(ue.URL, '?'); i >= 0 {
			ue.URL = ue.URL[:i]
		}
	}
}

// rewrite runs the Rewriter, failing open on a panic.
func (p *Proxy) rewrite(r *http.Request, x *exchange, body []byte) (oc Outcome) {
	if p.rw == nil {
		return Outcome{Body: body}
	}
	defer func() {
		if v := recover(); v != nil {
			id := protocol.NewErrorID()
			p.log.LogAttrs(r.Context(), slog.LevelError, "rewriter panic; forwarding the original body",
				slog.String("error_id", id), slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
			oc = Outcome{Body: body}
		}
	}()
	oc = p.rw.Rewrite(r.Context(), r, x.proto, body)
	if oc.Body == nil {
		oc.Body = body
	}
	return oc
}

// sameSlice reports whether a and b are the same bytes in memory.
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
