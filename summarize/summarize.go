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
	"strconv"
	"strings"
	"time"

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
}

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
		slots: make(chan struct{}, cfg.Concurrency), Sleep: sleep}
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

// Summarize implements pass.Summarizer.
func (c *Client) Summarize(ctx context.Context, j *pass.Job) (pass.Summary, error) {
	if c.cfg.Mode == "none" {
		return pass.Summary{}, ErrNone
	}
	proto, base, h, err := c.target(j)
	if err != nil {
		return pass.Summary{}, err
	}
	caller := proto.(protocol.Caller)
	model := c.cfg.Model
	if model == "" {
		model = caller.SmallModel(j.Model)
	}
	path, body := caller.CallRequest(model, j.System, j.Input, j.MaxTokens)
	u := *base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	select {
	case c.slots <- struct{}{}:
		defer func() { <-c.slots }()
	case <-ctx.Done():
		return pass.Summary{}, ctx.Err()
	}
	var last error
	for attempt := 0; attempt <= c.cfg.Retries; attempt++ {
		if attempt > 0 {
			if err := c.Sleep(ctx, backoff(attempt, last)); err != nil {
				return pass.Summary{}, err
			}
		}
		text, usage, err := c.attempt(ctx, u.String(), h, body, caller)
		if err == nil {
			return pass.Summary{Text: text, Model: model, InputTokens: usage.PromptTokens(), OutputTokens: usage.Output}, nil
		}
		last = err
		var he *httpError
		var ae *answerError
		if ctx.Err() != nil || (errors.As(err, &he) && !he.retryable()) || errors.As(err, &ae) {
			break
		}
	}
	return pass.Summary{}, redact(fmt.Errorf("summarize: %s %s: %w", proto.Name(), model, last), h)
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

// target returns the protocol, base URL and headers of a job's call.
func (c *Client) target(j *pass.Job) (protocol.Protocol, *url.URL, http.Header, error) {
	h := http.Header{"Content-Type": {"application/json"}}
	if c.cfg.Mode == "endpoint" {
		p := c.protos[c.cfg.Protocol]
		if p.Family() == "anthropic" {
			h.Set("X-Api-Key", c.key)
			p.(protocol.Caller).CallHeader(h, nil)
		} else {
			h.Set("Authorization", "Bearer "+c.key)
		}
		return p, c.endpoint, h, nil
	}
	p := c.protos[j.Protocol]
	if p == nil {
		return nil, nil, nil, fmt.Errorf("summarize: the session's protocol %q cannot be called", j.Protocol)
	}
	base := c.upstreams[p.Family()]
	if base == nil {
		return nil, nil, nil, fmt.Errorf("summarize: no upstream for %s", p.Family())
	}
	p.(protocol.Caller).CallHeader(h, j.Header)
	return p, base, h, nil
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
		return "", protocol.Usage{}, errors.New(redactURL(err.Error(), u))
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

// redactURL keeps a transport error from naming credentials in the URL.
func redactURL(msg, u string) string {
	if p, err := url.Parse(u); err == nil && p.User != nil {
		msg = strings.ReplaceAll(msg, p.User.String(), "<redacted>")
	}
	return msg
}
