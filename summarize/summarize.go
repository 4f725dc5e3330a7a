// Package summarize is the model call ctxguard makes itself to write a
// compaction summary (pass.Summarizer): by default in the session's own
// protocol, to its own upstream, with a small model of its family and the
// credentials of the session's request; or to a configured endpoint.
//
// Every call is bounded: one attempt by Timeout, the retries (network
// errors, 429, 5xx) by Retries with a capped backoff, the calls in flight
// by Concurrency; the answer read by MaxAnswer. Credentials are used for
// the request only: a Client keeps none, and no error or log line holds a
// header value or the answer.
//
// A summarizer that is down is not paid for again on every compaction:
// each upstream and model has a circuit breaker (internal/breaker). A call
// that fails (after its retries), times out (an attempt past Timeout, the
// caller's deadline), or that a request stopped waiting for
// (pass.Job.Overdue) opens it: for BreakerBackoff, doubling with each
// failed probe up to BreakerMaxBackoff, calls to that upstream and model
// fail at once with pass.ErrBreakerOpen, and the calls in flight to it
// end (a hung summarizer holds no call slot); then one call is the probe,
// and its success closes the breaker. A call a request stopped waiting for
// goes on as the probe: a slow answer still serves, and closes it.
package summarize

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/internal/breaker"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/protocol"
)

// MaxAnswer caps the bytes of an answer read.
const MaxAnswer = 1 << 20

// maxBackoff caps the wait between attempts, Retry-After included.
const maxBackoff = 30 * time.Second

// ErrNone is returned in mode "none": there is no model to ask.
var ErrNone = errors.New("summarize: no summarizer (mode none)")

// The breakers' back-off: after the first failure, doubling with each
// failed probe, up to the cap.
const (
	BreakerBackoff    = 30 * time.Second
	BreakerMaxBackoff = 10 * time.Minute
)

// maxBreakers bounds the breakers a Client keeps. Their keys are the
// upstreams and the small models they map to, a handful; past the bound,
// closed ones are forgotten first.
const maxBreakers = 64

// errOverdue is what a call a request stopped waiting for reports to its
// breaker.
var errOverdue = errors.New("no answer within the time a request waits for a summary")

// Client implements pass.Summarizer. It is safe for concurrent use.
type Client struct {
	cfg       compact.SummarizerConfig
	protos    map[string]protocol.Protocol // by name
	upstreams map[string]*url.URL          // by protocol family
	endpoint  *url.URL
	key       string // the endpoint's key (endpoint mode)
	http      *http.Client
	log       *slog.Logger
	slots     chan struct{}
	// Sleep waits between attempts; tests replace it. It returns early
	// with ctx's error.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the breakers' clock; tests replace it before the first
	// call.
	Now func() time.Time

	mu       sync.Mutex
	breakers map[target]*breaker.Breaker
}

// target is where a call goes: an upstream's base URL and a model.
type target struct{ upstream, model string }

// New returns a Client for cfg. protos are the protocols a session may
// speak; upstreams their base URLs by protocol family (session mode).
// client may be nil (a default with no overall timeout: every attempt
// has its own). In endpoint mode the key is read from the environment
// now.
func New(cfg compact.SummarizerConfig, protos []protocol.Protocol, upstreams map[string]string, client *http.Client, log *slog.Logger) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if client == nil {
		client = &http.Client{}
	}
	c := &Client{cfg: cfg, protos: map[string]protocol.Protocol{}, upstreams: map[string]*url.URL{}, http: client, log: log,
		slots: make(chan struct{}, cfg.Concurrency), Sleep: sleep, Now: time.Now, breakers: map[target]*breaker.Breaker{}}
	for _, p := range protos {
		if _, ok := p.(protocol.Caller); ok {
			c.protos[p.Name()] = p
		}
	}
	for fam, raw := range upstreams {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("summarize: upstream %s: %w", fam, err)
		}
		c.upstreams[fam] = u
	}
	if cfg.Mode == "endpoint" {
		if c.protos[cfg.Protocol] == nil {
			return nil, fmt.Errorf("summarize: protocol %q cannot be called", cfg.Protocol)
		}
		u, err := url.Parse(cfg.Endpoint)
		if err != nil {
			return nil, err
		}
		c.endpoint = u
		if c.key = os.Getenv(cfg.APIKeyEnv); c.key == "" {
			return nil, fmt.Errorf("summarize: the environment variable %s (summarizer.api_key_env) is not set", cfg.APIKeyEnv)
		}
	}
	return c, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Summarize implements pass.Summarizer. While the breaker of the
// job's upstream and model is open, it fails at once with an error
// matching pass.ErrBreakerOpen.
func (c *Client) Summarize(ctx context.Context, j *pass.Job) (pass.Summary, error) {
	if c.cfg.Mode == "none" {
		return pass.Summary{}, ErrNone
	}
	proto, base, h, model, err := c.target(j)
	if err != nil {
		return pass.Summary{}, err
	}
	caller := proto.(protocol.Caller)
	path, body := caller.CallRequest(model, j.System, j.Input, j.MaxTokens)
	u := *base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	tg := target{upstreamName(base), model}
	br := c.breaker(tg)
	call, ok := br.Allow()
	if !ok {
		return pass.Summary{}, openError(tg, br)
	}
	select {
	case c.slots <- struct{}{}:
		defer func() { <-c.slots }()
	case <-ctx.Done():
		call.Release()
		return pass.Summary{}, ctx.Err()
	case <-call.Done():
		call.Release()
		return pass.Summary{}, openError(tg, br)
	}
	// The call ends when the breaker opens under it (another call
	// failed), unless it is the probe; a request that stopped waiting
	// for it makes it the probe.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		overdue := j.Overdue
		for {
			select {
			case <-stop:
				return
			case <-call.Done():
				cancel(breaker.ErrOpen)
				return
			case <-overdue:
				overdue = nil
				if call.Stall(errOverdue) {
					c.opened(tg, br, errOverdue)
				}
			}
		}
	}()
	text, usage, err := c.attempts(cctx, u.String(), h, body, caller)
	close(stop)
	watch.Wait()
	switch {
	case err == nil:
		probe := call.Probe()
		call.Success()
		if probe {
			c.log.Info("summarize: the summarizer answers again", "upstream", tg.upstream, "model", model)
		}
		return pass.Summary{Text: text, Model: model, InputTokens: usage.PromptTokens(), OutputTokens: usage.Output}, nil
	case errors.Is(context.Cause(cctx), breaker.ErrOpen):
		call.Release()
		return pass.Summary{}, openError(tg, br)
	}
	err = redact(fmt.Errorf("summarize: %s %s: %w", proto.Name(), model, err), h)
	if errors.Is(ctx.Err(), context.Canceled) {
		call.Release() // the caller gave up: no verdict
	} else if call.Failure(err) {
		c.opened(tg, br, err)
	}
	return pass.Summary{}, err
}

// attempts makes the call, retrying what may pass (a network error, 429,
// 5xx) up to Retries times; a timeout is not retried.
func (c *Client) attempts(ctx context.Context, u string, h http.Header, body []byte, caller protocol.Caller) (string, protocol.Usage, error) {
	var last error
	for attempt := 0; attempt <= c.cfg.Retries; attempt++ {
		if attempt > 0 {
			if err := c.Sleep(ctx, backoff(attempt, last)); err != nil {
				return "", protocol.Usage{}, errors.Join(last, err)
			}
		}
		text, usage, err := c.attempt(ctx, u, h, body, caller)
		if err == nil {
			return text, usage, nil
		}
		last = err
		var he *httpError
		var ae *answerError
		if ctx.Err() != nil || (errors.As(err, &he) && !he.retryable()) || errors.As(err, &ae) || timedOut(err) {
			break
		}
	}
	return "", protocol.Usage{}, last
}

// timedOut reports whether an attempt's error says it waited too long.
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// breaker returns the breaker of t, creating it.
func (c *Client) breaker(t target) *breaker.Breaker {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.breakers[t]; b != nil {
		return b
	}
	if len(c.breakers) >= maxBreakers {
		for k, b := range c.breakers {
			if b.Status().State == breaker.Closed {
				delete(c.breakers, k)
			}
		}
		if len(c.breakers) >= maxBreakers {
			t = target{upstream: "(others)"}
			if b := c.breakers[t]; b != nil {
				return b
			}
		}
	}
	b := breaker.New(breaker.Options{Now: c.Now, Backoff: BreakerBackoff, MaxBackoff: BreakerMaxBackoff})
	c.breakers[t] = b
	return b
}

// opened logs that t's breaker opened.
func (c *Client) opened(t target, br *breaker.Breaker, err error) {
	st := br.Status()
	wait := "until its probe ends"
	if st.State == breaker.Open {
		wait = "for " + st.Until.Sub(c.Now()).Round(time.Second).String()
	}
	c.log.Warn("summarize: the summarizer failed; summaries are extractive "+wait+", then one call probes it",
		"upstream", t.upstream, "model", t.model, "fails", st.Fails, "err", err)
}

// openError is the error of a call t's open breaker refused.
func openError(t target, br *breaker.Breaker) error {
	st := br.Status()
	if st.State == breaker.Open {
		return fmt.Errorf("summarize: %s %s failed %d times in a row (%v); no call until %s: %w",
			t.upstream, t.model, st.Fails, st.Err, st.Until.UTC().Format(time.RFC3339), pass.ErrBreakerOpen)
	}
	return fmt.Errorf("summarize: %s %s failed (%v); a probe call is under way: %w", t.upstream, t.model, st.Err, pass.ErrBreakerOpen)
}

// Allows implements pass.Breaker: whether a call for j would be made
// now, and whether it would be the probe of a breaker that opened; with
// count, a refusal counts as a call refused.
func (c *Client) Allows(j *pass.Job, count bool) (ok, probe bool) {
	if c.cfg.Mode == "none" {
		return false, false
	}
	_, base, _, model, err := c.target(j)
	if err != nil {
		return true, false // Summarize says what is wrong
	}
	br := c.breaker(target{upstreamName(base), model})
	if ok, probe = br.Check(); !ok && count {
		br.Refuse()
	}
	return ok, probe
}

// BreakerStatus is the state of the breaker of one upstream and model.
type BreakerStatus struct {
	Upstream string // its base URL, without credentials
	Model    string
	breaker.Status
}

// Breakers returns the state of every breaker, by upstream and model.
func (c *Client) Breakers() []BreakerStatus {
	c.mu.Lock()
	out := make([]BreakerStatus, 0, len(c.breakers))
	for t, b := range c.breakers {
		out = append(out, BreakerStatus{Upstream: t.upstream, Model: t.model, Status: b.Status()})
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b BreakerStatus) int {
		return strings.Compare(a.Upstream+" "+a.Model, b.Upstream+" "+b.Model)
	})
	return out
}

// redact keeps the credentials a call sent out of its error, should an
// API echo them back in its message.
func redact(err error, h http.Header) error {
	msg := err.Error()
	changed := false
	for _, k := range []string{"X-Api-Key", "Authorization", "Openai-Organization", "Openai-Project", "Chatgpt-Account-Id"} {
		for _, v := range h.Values(k) {
			v = strings.TrimSpace(strings.TrimPrefix(v, "Bearer "))
			if len(v) >= 8 && strings.Contains(msg, v) {
				msg, changed = strings.ReplaceAll(msg, v, "<redacted>"), true
			}
		}
	}
	if !changed {
		return err
	}
	return errors.New(msg)
}

// target returns the protocol, base URL, headers and model of a job's
// call.
func (c *Client) target(j *pass.Job) (protocol.Protocol, *url.URL, http.Header, string, error) {
	h := http.Header{"Content-Type": {"application/json"}}
	if c.cfg.Mode == "endpoint" {
		p := c.protos[c.cfg.Protocol]
		caller := p.(protocol.Caller)
		caller.CallHeader(h, nil)
		caller.CallKey(h, c.key)
		return p, c.endpoint, h, c.cfg.Model, nil
	}
	p := c.protos[j.Protocol]
	if p == nil {
		return nil, nil, nil, "", fmt.Errorf("summarize: the session's protocol %q cannot be called", j.Protocol)
	}
	base := c.upstreams[p.Family()]
	if base == nil {
		return nil, nil, nil, "", fmt.Errorf("summarize: no upstream for %s", p.Family())
	}
	p.(protocol.Caller).CallHeader(h, j.Header)
	model := c.cfg.Model
	if model == "" {
		model = p.(protocol.Caller).SmallModel(j.Model)
	}
	return p, base, h, model, nil
}

// httpError is an answer that is not a 2xx.
type httpError struct {
	status     int
	retryAfter time.Duration
	msg        string // a short, safe excerpt of the API's error message
}

func (e *httpError) Error() string {
	if e.msg != "" {
		return fmt.Sprintf("status %d: %s", e.status, e.msg)
	}
	return fmt.Sprintf("status %d", e.status)
}

func (e *httpError) retryable() bool {
	return e.status == http.StatusTooManyRequests || e.status >= 500
}

// attempt makes one call.
func (c *Client) attempt(ctx context.Context, u string, h http.Header, body []byte, caller protocol.Caller) (string, protocol.Usage, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return "", protocol.Usage{}, err
	}
	req.Header = h.Clone()
	res, err := c.http.Do(req)
	if err != nil {
		return "", protocol.Usage{}, &transportError{redactURL(err.Error(), u), timedOut(err)}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, MaxAnswer+1))
	if err != nil {
		return "", protocol.Usage{}, fmt.Errorf("reading the answer: %w", err)
	}
	if res.StatusCode/100 != 2 {
		he := &httpError{status: res.StatusCode, msg: apiMessage(b)}
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s >= 0 {
			he.retryAfter = time.Duration(s) * time.Second
		}
		return "", protocol.Usage{}, he
	}
	if len(b) > MaxAnswer {
		return "", protocol.Usage{}, fmt.Errorf("the answer is over %d bytes", MaxAnswer)
	}
	text, usage, err := caller.CallAnswer(b)
	if err != nil {
		return "", usage, &answerError{err}
	}
	return text, usage, nil
}

// transportError is a call that got no answer, its message without the
// URL's credentials.
type transportError struct {
	msg     string
	timeout bool
}

func (e *transportError) Error() string { return e.msg }

// Timeout reports whether the call waited too long.
func (e *transportError) Timeout() bool { return e.timeout }

// answerError is a 2xx answer that says nothing usable: asking again
// would not help.
type answerError struct{ error }

func (e *answerError) Unwrap() error { return e.error }

// backoff is the wait before attempt n (1, 2, ...): the answer's
// Retry-After, else 1s, 2s, 4s..., capped.
func backoff(n int, last error) time.Duration {
	var he *httpError
	if errors.As(last, &he) && he.retryAfter > 0 {
		return min(he.retryAfter, maxBackoff)
	}
	return min(time.Second<<(n-1), maxBackoff)
}

// apiMessage returns a short excerpt of an API error's message: the
// "message" of its error object, at most 200 bytes, for logs.
func apiMessage(b []byte) string {
	const key = `"message":"`
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		return ""
	}
	rest := b[i+len(key):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		end = len(rest)
	}
	return strings.ToValidUTF8(string(rest[:min(end, 200)]), "?")
}

// upstreamName names an upstream's base URL, without credentials.
func upstreamName(u *url.URL) string {
	v := *u
	v.User = nil
	return v.String()
}

// redactURL keeps a transport error from naming credentials in the URL.
func redactURL(msg, u string) string {
	if p, err := url.Parse(u); err == nil && p.User != nil {
		msg = strings.ReplaceAll(msg, p.User.String(), "<redacted>")
	}
	return msg
}
