// Package digest replaces one large tool result with a small model's
// summary of it that answers the tool call's own request (Claude Code's
// WebFetch layer: the page is read by a small model, and the agent sees
// the answer). It is opt-in: a summary loses detail the agent may need,
// so only results of listed tools over a size go, and the original is
// kept as a blob the summary names.
//
// Like every edit, it is sticky. A result is judged once, on the request
// where it is new (in the last message): the summarizer is called then,
// and the request waits for it up to Wait. The outcome is a store record
// under a hash of the call's tool, input and result: the summary, or "keep
// the original" when the summarizer failed or was late. Every later
// request, in this process or another on the same store, reads the record
// and sends the same bytes; a result whose record is gone is left alone.
package digest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/internal/stub"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/splice"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

// Config is the pass's configuration (YAML key `digest`).
type Config struct {
	// Enabled switches the pass on. Off by default.
	Enabled bool `yaml:"enabled"`
	// Tools lists globs (path.Match) of the tools whose results may be
	// summarized. Default: the web fetchers of Claude Code, Codex and
	// opencode.
	Tools []string `yaml:"tools"`
	// MinTokens: only results at least this large are summarized.
	// Default 10000.
	MinTokens int `yaml:"min_tokens"`
	// MaxTokens bounds the summary. Default 2000.
	MaxTokens int `yaml:"max_tokens"`
	// Wait is how long the request that brings a result waits for its
	// summary; a later summary is not used. Default 30s.
	Wait time.Duration `yaml:"wait"`
}

// Defaults returns the pass's shipped configuration (off).
func Defaults() Config {
	return Config{Tools: []string{"WebFetch", "web_fetch", "webfetch", "fetch"}, MinTokens: 10_000, MaxTokens: 2_000, Wait: 30 * time.Second}
}

// Validate reports every problem in c, joined, or nil.
func (c Config) Validate() error {
	var errs []error
	for _, g := range c.Tools {
		if _, err := path.Match(g, ""); err != nil {
			errs = append(errs, fmt.Errorf("bad tool glob %q: %w", g, err))
		}
	}
	if c.MinTokens < 0 || c.MaxTokens <= 0 {
		errs = append(errs, fmt.Errorf("min_tokens (%d) must not be negative and max_tokens (%d) must be positive", c.MinTokens, c.MaxTokens))
	}
	if c.Wait < 0 {
		errs = append(errs, fmt.Errorf("wait: %v is negative", c.Wait))
	}
	return errors.Join(errs...)
}

// Pass is the compiled pass. It is safe for concurrent use.
type Pass struct {
	cfg   Config
	blobs *store.Blobs
	sum   pass.Summarizer
	log   *slog.Logger

	records store.Decisions[*record] // judged results, decided once
}

// record is a judged result: the text that replaces it, or Keep.
type record struct {
	Text string `json:"text,omitempty"`
	Blob string `json:"blob,omitempty"`
	Keep bool   `json:"keep,omitempty"` // the summarizer failed or was late: the original stays
}

// New compiles cfg. sum writes the summaries; with none the pass does
// nothing.
func New(cfg Config, blobs *store.Blobs, sum pass.Summarizer, log *slog.Logger) (*Pass, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("digest: %w", err)
	}
	if blobs == nil {
		return nil, errors.New("digest: no blob store")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pass{cfg: cfg, blobs: blobs, sum: sum, log: log}
	p.records = store.Decisions[*record]{Store: blobs.Store, Refresh: store.RefreshInterval(blobs.TTL), Now: blobs.Now,
		Encode: func(r *record) ([]byte, error) { return json.Marshal(r) },
		Decode: func(b []byte) (*record, error) {
			var r record
			if err := json.Unmarshal(b, &r); err != nil || (!r.Keep && r.Text == "") {
				return nil, errors.New("digest: a stored record does not decode")
			}
			return &r, nil
		}}
	return p, nil
}

// Name implements pipeline.Pass.
func (p *Pass) Name() string { return "digest" }

// PerMessage implements pipeline.PerMessage: a result's edit depends on
// the result (and its call) and the store alone.
func (p *Pass) PerMessage() {}

// Run implements pipeline.Pass.
func (p *Pass) Run(r *pipeline.Request) ([]splice.Edit, error) {
	c := r.Conv
	if !p.cfg.Enabled || p.sum == nil || len(c.Messages) == 0 {
		return nil, nil
	}
	var out []splice.Edit
	last := len(c.Messages) - 1
	for mi := r.From; mi < len(c.Messages); mi++ {
		m := &c.Messages[mi]
		for bi := range m.Blocks {
			b := &m.Blocks[bi]
			if b.Kind != conversation.ToolResult || b.Call[0] < 0 || b.IsError || !p.listed(c.ToolName(b)) {
				continue
			}
			cur, err := r.Current(b.Content)
			if err != nil {
				return nil, err
			}
			if tokens.Estimate(cur) < p.cfg.MinTokens {
				continue
			}
			call := &c.Messages[b.Call[0]].Blocks[b.Call[1]]
			key := p.key(c, call, cur)
			rec, err := p.get(r.Context(), key)
			if err != nil {
				return nil, err
			}
			if rec == nil && mi == last {
				rec = p.judge(r, key, c, b, call)
			}
			if rec == nil || rec.Keep {
				continue
			}
			out = append(out, splice.Edit{Span: b.Content, Repl: jsonscan.AppendQuote(nil, rec.Text), Blob: rec.Blob})
		}
	}
	return out, nil
}

func (p *Pass) listed(name string) bool {
	for _, g := range p.cfg.Tools {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// key names a result: its tool, its call's input and its content.
func (p *Pass) key(c *conversation.Conversation, call *conversation.Block, content []byte) string {
	h := sha256.New()
	h.Write(c.Bytes(call.Name))
	h.Write([]byte{0})
	h.Write(c.Bytes(call.Input))
	h.Write([]byte{0})
	h.Write(content)
	return "digest/" + hex.EncodeToString(h.Sum(nil)[:16])
}

// judge summarizes a new result, waiting up to Wait, and records the
// outcome (the first record written wins).
func (p *Pass) judge(r *pipeline.Request, key string, c *conversation.Conversation, b, call *conversation.Block) *record {
	text, err := c.ResultText(b)
	if err != nil {
		return nil
	}
	in := call.Input
	input := c.Bytes(in)
	if body, sp := c.Input(call); sp.Len() > 0 {
		input = sp.Bytes(body)
	}
	env := r.Env
	if env == nil {
		env = &pipeline.Env{}
	}
	job := &pass.Job{
		Protocol:  env.Protocol,
		Model:     c.Model,
		Header:    env.Header,
		System:    fmt.Sprintf(systemPrompt, p.cfg.MaxTokens),
		Input:     "Tool: " + c.ToolName(b) + "\nArguments: " + string(input) + "\n\n<output>\n" + string(text) + "\n</output>",
		MaxTokens: p.cfg.MaxTokens,
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.cfg.Wait)
	defer cancel()
	sum, err := p.sum.Summarize(ctx, job)
	job.Header = nil
	rec := &record{Keep: true}
	if err == nil && strings.TrimSpace(sum.Text) != "" {
		k, kerr := p.blobs.Keep(r.Context(), text)
		if kerr == nil {
			rec = &record{Blob: k.ID, Text: fmt.Sprintf("[ctxguard had a small model read this %s result (%s chars) and answer the call's request; the full result is in blob %s: %s]\n\n%s",
				c.ToolName(b), stub.Size(k.Chars), p.blobs.Name(k.ID), p.blobs.Howto(), strings.TrimSpace(sum.Text))}
		}
	} else if errors.Is(err, pass.ErrBreakerOpen) {
		p.log.Debug("digest: the summarizer's breaker is open; the result stays whole", "tool", c.ToolName(b), "err", err)
	} else {
		p.log.Warn("digest: no summary in time; the result stays whole", "tool", c.ToolName(b), "err", err)
	}
	if ctx.Err() != nil && r.Ctx != nil && r.Ctx.Err() != nil {
		return nil // the client went away: decide next time
	}
	got, err := p.records.Decide(r.Context(), key, rec)
	if err != nil {
		return nil
	}
	return got
}

const systemPrompt = `You read the output of a tool an AI coding agent called, and answer for the agent. The tool's arguments say what the agent wanted (a prompt, a question, a query): answer exactly that, using only the output. Keep every fact, number, name, URL, code snippet and error message the agent may need, verbatim where it matters. Say so if the output does not answer it. Keep it under about %d tokens. Answer with the answer only.`

// get returns the record under key, nil when there is none.
func (p *Pass) get(ctx context.Context, key string) (*record, error) {
	r, ok, err := p.records.Get(ctx, key)
	if err != nil || !ok {
		return nil, err
	}
	return r, nil
}
