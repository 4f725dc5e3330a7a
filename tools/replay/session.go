// Package replay measures what ctxguard does to real sessions: it sends a
// session's request stream through a rewriter, in order, and compares what
// the upstream would receive with what the client sent, in tokens, in
// cache-aware cost, in edit events, in validity and in quote retention.
//
// The layers, bottom up:
//
//   - package tools/prompt: a request linearized in the order the API
//     reads it, the byte-prefix cost model and the breakpoint cache model.
//   - Session / Measure (this file): one session's stream through one
//     rewriter, measured request by request.
//   - quote.go: quote retention.
//   - price.go: money, from a per-model price table.
//   - Run (run.go): transcripts → request streams → the same pipeline the
//     proxy runs (a fresh Guard and store per session) → a Report.
//   - report.go, chart.go: the Report as a table, as JSON, as an SVG chart.
//
// The `ctxguard replay` command is a thin layer over Run.
package replay

import (
	pricing "github.com/ctxguard/ctxguard/dashboard/price"
	"github.com/ctxguard/ctxguard/tokens"
	"github.com/ctxguard/ctxguard/tools/prompt"

	"bytes"
	"fmt"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/store"
)

// Rewriter is what a replay sends each request through: the same code the
// proxy runs. It returns the body the upstream would receive.
type Rewriter func(body []byte) ([]byte, error)

// DetailedRewriter is a Rewriter that also says what each pass did. An
// error stops the session's replay; a pass failure the proxy would survive
// (fail open) is reported in Outcome.Failed instead.
// A request is rewritten at its time (Request.Time, zero when the
// transcript has none): a rewriter times the session's prompt cache by it.
type DetailedRewriter func(body []byte, at time.Time) (Outcome, error)

// Outcome is what a DetailedRewriter did to one request.
type Outcome struct {
	// Body is what the upstream would receive.
	Body []byte
	// Stages, if any, are the body as the pipeline left it after each
	// pass, in pipeline order; the last one's Body equals Body. The
	// tokens each pass saved are measured between consecutive stages
	// (the first against the original), so they add up to the request's
	// saving.
	Stages []Stage
	// Reported is set when the rewriter itself announced an edit event.
	Reported bool
	// Failed is a pass failure after which the original was forwarded.
	Failed error
	// Summary is the summarizer call of a compaction this request
	// carries for the first time, or nil.
	Summary *SummaryCall
	// Line is the overflow line the rewriter held the request to: its
	// model's window less its maximum output, in estimated tokens; 0 when
	// the rewriter does not say.
	Line int
	// Compaction is the compaction this request carries for the first
	// time, or nil: its summary's fact recall is measured (recall.go).
	Compaction *Compaction
}

// Compaction is what a compaction's record says: the summary message's
// text as sent, and how many messages it replaces, from the first user
// message on (earlier compactions included).
type Compaction struct {
	Text     string
	Messages int
}

// SummaryRecall is the fact recall of one compaction's summary.
type SummaryRecall struct {
	// Request is the index of the request that first carried it;
	// Messages the messages it replaced; Tokens the summary message's
	// estimate.
	Request  int `json:"request"`
	Messages int `json:"messages"`
	Tokens   int `json:"summary_tokens"`
	// Recall counts the replaced messages' facts and those the summary
	// kept, by kind; Missed lists the first few it did not keep.
	Recall Recall `json:"recall"`
	Missed Missed `json:"missed"`
}

// SummaryCall is what writing one compaction summary cost (or, for an
// extractive summary, what a model call would have cost).
type SummaryCall struct {
	Model   string // the summarizer's model
	In, Out int    // its input and output tokens
}

// Stage is the body after one pass of a pipeline.
type Stage struct {
	Name  string
	Edits int
	Body  []byte
}

// detailed adapts a plain Rewriter.
func (rw Rewriter) detailed() DetailedRewriter {
	return func(body []byte, _ time.Time) (Outcome, error) {
		sent, err := rw(body)
		return Outcome{Body: sent}, err
	}
}

// RequestStat is the measurement of one request.
type RequestStat struct {
	// Model is the model the request named (Request.Model).
	Model                  string
	OrigBytes, SentBytes   int
	OrigTokens, SentTokens int
	// Cost in base-input-token units: shared prefix with the previous
	// request at the cache read price, the rest at the write price
	// (Options.Cache: Anthropic 0.1x and 1.25x).
	OrigCost, SentCost float64
	// The same where the cache hits only at cache_control breakpoints
	// with a 20-block lookback.
	OrigBPCost, SentBPCost float64
	// The tokens each cost model bills as cache reads (the rest are cache
	// writes), for pricing at a model's own rates.
	OrigRead, SentRead     int
	OrigBPRead, SentBPRead int
	// The costs and reads above are time-aware when Options.Expiry is
	// set (a prefix the cache dropped is written again); the Blind
	// figures are the prefix model's with a cache that never expires and
	// 5-minute write prices, as replay measured before it knew time
	// (replay --cache-ttl never gives them as the main figures).
	OrigBlindCost, SentBlindCost float64
	OrigBlindRead, SentBlindRead int
	// Cold: the request came longer after the previous one than its
	// cache lifetime (Options.Expiry), so it found every prefix gone,
	// original and rewritten alike. Extended: it asked for the
	// provider's extended lifetime, and its writes are priced as such.
	Cold, Extended bool
	// Event: the sent history is not a prefix extension of the previous
	// sent request.
	Event bool
	// Reported: the rewriter announced an edit event (Outcome.Reported).
	Reported bool
	// Invalid holds the validator's complaint, if any.
	Invalid error
	// Failed is a pass failure the rewriter survived by sending the
	// original (fail open).
	Failed error
	// Passes are the tokens each pass saved (from Outcome.Stages).
	Passes []PassTokens
	// Quotes is the quote retention of the answer this request produced
	// (see quote.go); zero when the stream carries no answers.
	Quotes QuoteStats
	// Summary is the compaction summary this request carried first
	// (Outcome.Summary); SummaryCost what it cost in base-input-token
	// units of the request's model, already in SentCost and SentBPCost.
	Summary     *SummaryCall
	SummaryCost float64
	// OverLine and OrigOverLine: the sent and the original request's
	// estimate is above Options.Line.
	OverLine, OrigOverLine bool
	// Line is the rewriter's overflow line for the request (Outcome.Line).
	Line int
	// Recall is the fact recall of the compaction this request carried
	// first (Outcome.Compaction), or nil.
	Recall *SummaryRecall
}

// PassTokens is what one pass did: edits made and prompt tokens saved
// (negative if it added tokens).
type PassTokens struct {
	Name  string `json:"name"`
	Edits int    `json:"edits"`
	Saved int    `json:"saved_tokens"`
}

// SessionStat is the measurement of one session.
type SessionStat struct {
	Name     string
	Requests []RequestStat
	// OrigEvents counts breaks in the original stream itself: requests
	// whose history is not an extension of the previous one (a client
	// compaction, a rewind). Rewritten-stream events are judged against
	// it.
	OrigEvents int
	// Lost lists the first few quotes that were neither in the request
	// that produced them nor retrievable (at most MaxLostExamples).
	Lost []LostQuote
}

// Totals sums a session's requests.
type Totals struct {
	Requests               int
	OrigTokens, SentTokens int
	PeakOrig, PeakSent     int
	OrigCost, SentCost     float64
	OrigBPCost, SentBPCost float64
	// Time-blind costs (RequestStat's Blind fields) and the requests
	// that found the cache cold.
	OrigBlindCost, SentBlindCost float64
	Cold                         int
	ColdEvents                   int // edit events at cold requests
	Events, Invalid              int
	OrigEvents                   int // breaks in the original stream (should be 0)
	Reported                     int // events the rewriter announced
	Failed                       int // requests forwarded unchanged after a pass failed
	Summaries                    int // compactions (requests carrying a new summary)
	SummaryIn, SummaryOut        int // the summarizer's tokens
	OverLine, OrigOverLine       int // requests above Options.Line, sent and original
	Quotes                       QuoteStats
	// Recall sums the fact recall of the compactions' summaries;
	// Recalled counts the compactions measured.
	Recall   Recall
	Recalled int
	// Passes sums PassTokens by pass name, in order of first appearance.
	Passes []PassTokens
}

// Totals sums the session's requests.
func (s *SessionStat) Totals() Totals {
	var t Totals
	for _, r := range s.Requests {
		t.add(r)
	}
	t.OrigEvents = s.OrigEvents
	return t
}

func (t *Totals) add(r RequestStat) {
	t.Requests++
	t.OrigTokens += r.OrigTokens
	t.SentTokens += r.SentTokens
	t.PeakOrig = max(t.PeakOrig, r.OrigTokens)
	t.PeakSent = max(t.PeakSent, r.SentTokens)
	t.OrigCost += r.OrigCost
	t.SentCost += r.SentCost
	t.OrigBPCost += r.OrigBPCost
	t.SentBPCost += r.SentBPCost
	t.OrigBlindCost += r.OrigBlindCost
	t.SentBlindCost += r.SentBlindCost
	if r.Cold {
		t.Cold++
		if r.Event {
			t.ColdEvents++
		}
	}
	if r.Event {
		t.Events++
	}
	if r.Invalid != nil {
		t.Invalid++
	}
	if r.Reported {
		t.Reported++
	}
	if r.Failed != nil {
		t.Failed++
	}
	if r.Summary != nil {
		t.Summaries++
		t.SummaryIn += r.Summary.In
		t.SummaryOut += r.Summary.Out
	}
	if r.OverLine {
		t.OverLine++
	}
	if r.OrigOverLine {
		t.OrigOverLine++
	}
	t.Quotes.Add(r.Quotes)
	if r.Recall != nil {
		t.Recall.Add(r.Recall.Recall)
		t.Recalled++
	}
	t.addPasses(r.Passes)
}

func (t *Totals) addPasses(ps []PassTokens) {
next:
	for _, p := range ps {
		for i := range t.Passes {
			if t.Passes[i].Name == p.Name {
				t.Passes[i].Edits += p.Edits
				t.Passes[i].Saved += p.Saved
				continue next
			}
		}
		t.Passes = append(t.Passes, p)
	}
}

// Merge adds another total into t.
func (t *Totals) Merge(o Totals) {
	t.Requests += o.Requests
	t.OrigTokens += o.OrigTokens
	t.SentTokens += o.SentTokens
	t.PeakOrig = max(t.PeakOrig, o.PeakOrig)
	t.PeakSent = max(t.PeakSent, o.PeakSent)
	t.OrigCost += o.OrigCost
	t.SentCost += o.SentCost
	t.OrigBPCost += o.OrigBPCost
	t.SentBPCost += o.SentBPCost
	t.OrigBlindCost += o.OrigBlindCost
	t.SentBlindCost += o.SentBlindCost
	t.Cold += o.Cold
	t.ColdEvents += o.ColdEvents
	t.Events += o.Events
	t.Invalid += o.Invalid
	t.OrigEvents += o.OrigEvents
	t.Reported += o.Reported
	t.Failed += o.Failed
	t.Summaries += o.Summaries
	t.SummaryIn += o.SummaryIn
	t.SummaryOut += o.SummaryOut
	t.OverLine += o.OverLine
	t.OrigOverLine += o.OrigOverLine
	t.Quotes.Add(o.Quotes)
	t.Recall.Add(o.Recall)
	t.Recalled += o.Recalled
	t.addPasses(o.Passes)
}

// Ratio returns a/b, or 1 when both are zero.
func Ratio(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return 1
		}
		return 0
	}
	return a / b
}

// Options tune a session run.
type Options struct {
	// Check, if set, judges every rewritten request against its original
	// (validate.Rewrite with the options the pipeline needs).
	Check func(orig, sent []byte) error
	// Store is where the rewriter keeps removed content. Quote retention
	// counts a quote whose line is gone from the request but held by a
	// blob the request names as retrievable; with no store, as lost.
	Store store.Store
	// Progress, if set, is called after each request.
	Progress func()
	// Protocol parses the stream's bodies; nil is the Anthropic Messages
	// API.
	Protocol protocol.Protocol
	// Cache is the cost model; the zero value is Anthropic's.
	Cache CacheModel
	// Line, if positive, is the overflow line (window − max output):
	// requests estimated above it are counted (RequestStat.OverLine).
	Line int
	// Expiry, if set, makes the cost time-aware: it returns how long the
	// provider keeps req's cached prefix after its last use, and whether
	// req asked for the extended lifetime (priced at
	// CacheModel.ExtendedWrite). A request more than ttl after the
	// previous one reads nothing from the cache; the breakpoint model's
	// entries expire one by one. Requests without a time (Request.Time)
	// never find the cache cold. Nil: the cache never expires.
	Expiry func(req Request) (ttl time.Duration, extended bool)
	// SummaryCost prices a summarizer call in base-input-token units of
	// the request's model; nil counts an input token as one unit and an
	// output token as SummaryOutputWeight.
	SummaryCost func(call SummaryCall, model string) float64
}

// SummaryOutputWeight is what an output token costs in input tokens when
// no price says (the list prices of the small models are 5x to 8x).
const SummaryOutputWeight = pricing.SummaryOutputWeight

// CacheModel is how a provider bills a prompt's cached prefix, in
// multiples of the model's base input price.
type CacheModel struct {
	// Read and Write are what a cache read and an uncached token cost;
	// ExtendedWrite what an uncached token costs in a request that asked
	// for the extended cache lifetime (0: Write).
	Read, Write, ExtendedWrite float64
	// Automatic is set for providers that cache every prefix by
	// themselves (OpenAI): there are no breakpoints, so the breakpoint
	// model bills what the prefix model bills.
	Automatic bool
}

// AnthropicCache is Anthropic's prompt caching: reads 0.1x, writes (the
// 5-minute cache Claude Code uses) 1.25x, 1-hour writes 2x, hits only at
// breakpoints.
var AnthropicCache = CacheModel{Read: prompt.CacheRead, Write: prompt.CacheWrite, ExtendedWrite: 2}

// OpenAICache is OpenAI's prompt caching for a model whose cached input
// costs read times its input price: automatic, no write premium.
func OpenAICache(read float64) CacheModel { return CacheModel{Read: read, Write: 1, Automatic: true} }

// Request is one request of a session's stream.
type Request struct {
	Body []byte
	// Reset marks a request whose history restarted (the client
	// compacted): it is not compared with the one before.
	Reset bool
	// Model is the model the request names, for pricing; optional.
	Model string
	// Path is the URL path the request goes to when its API names things
	// there (transcript.Request.Path); "" otherwise.
	Path string
	// Time is when the client sent the request (transcript.Request.Time);
	// zero when unknown.
	Time time.Time
	// Answer is the assistant message this request produced, as JSON
	// ({"role":"assistant","content":...}); optional. When set, quote
	// retention is measured.
	Answer []byte
}

// Session sends stream (a session's requests, oldest first) through rw and
// measures every request.
func Session(name string, stream []Request, rw Rewriter, opt Options) (*SessionStat, error) {
	return Measure(name, stream, rw.detailed(), opt)
}

// Measure is Session for a rewriter that reports its passes: on top of
// Session's figures it attributes the tokens saved to each pass and
// records announced events and fail-open failures.
func Measure(name string, stream []Request, rw DetailedRewriter, opt Options) (*SessionStat, error) {
	st := &SessionStat{Name: name}
	var prevOrig, prevSent *prompt.Prompt
	var bpOrig, bpSent prompt.BreakpointCache
	var prevTime time.Time
	quotes := newQuoteTracker(opt.Store)
	proto := opt.Protocol
	if proto == nil {
		proto = anthropic.Protocol
	}
	cm := opt.Cache
	if cm == (CacheModel{}) {
		cm = AnthropicCache
	}
	parse := func(body []byte) (*prompt.Prompt, error) {
		c, err := proto.Parse(body)
		if err != nil {
			return nil, err
		}
		return prompt.FromConversation(c), nil
	}
	for i, req := range stream {
		body := req.Body
		if req.Reset {
			prevOrig, prevSent = nil, nil
		}
		out, err := rw(body, req.Time)
		if err != nil {
			return st, fmt.Errorf("%s request %d: %w", name, i, err)
		}
		sent := out.Body
		co, err := proto.Parse(body)
		if err != nil {
			return st, fmt.Errorf("%s request %d: original: %w", name, i, err)
		}
		po := prompt.FromConversation(co)
		ps, cs := po, co
		if !bytes.Equal(sent, body) {
			if cs, err = proto.Parse(sent); err != nil {
				return st, fmt.Errorf("%s request %d: rewritten: %w", name, i, err)
			}
			ps = prompt.FromConversation(cs)
		}
		var ttl time.Duration
		var ext bool
		if opt.Expiry != nil {
			ttl, ext = opt.Expiry(req)
		}
		blindO, blindS := prompt.PrefixRead(prevOrig, po), prompt.PrefixRead(prevSent, ps)
		r := RequestStat{
			Model:     req.Model,
			OrigBytes: len(body), SentBytes: len(sent),
			OrigTokens: po.Tokens(), SentTokens: ps.Tokens(),
			OrigRead: blindO, SentRead: blindS, OrigBlindRead: blindO, SentBlindRead: blindS,
			OrigBPRead: bpOrig.ReadAt(po, req.Time, ttl), SentBPRead: bpSent.ReadAt(ps, req.Time, ttl),
			Reported: out.Reported, Failed: out.Failed, Line: out.Line, Extended: ext,
		}
		if prevOrig != nil && ttl > 0 && !req.Time.IsZero() && !prevTime.IsZero() && req.Time.Sub(prevTime) > ttl {
			r.Cold = true
			r.OrigRead, r.SentRead = 0, 0
		}
		if cm.Automatic {
			r.OrigBPRead, r.SentBPRead = r.OrigRead, r.SentRead
		}
		write := cm.Write
		if ext && cm.ExtendedWrite > 0 {
			write = cm.ExtendedWrite
		}
		price := func(p *prompt.Prompt, read int) float64 { return prompt.PricedAt(p, read, cm.Read, write) }
		r.OrigCost, r.SentCost = price(po, r.OrigRead), price(ps, r.SentRead)
		r.OrigBPCost, r.SentBPCost = price(po, r.OrigBPRead), price(ps, r.SentBPRead)
		r.OrigBlindCost = prompt.PricedAt(po, blindO, cm.Read, cm.Write)
		r.SentBlindCost = prompt.PricedAt(ps, blindS, cm.Read, cm.Write)
		if out.Summary != nil {
			r.Summary = out.Summary
			r.SummaryCost = float64(out.Summary.In) + SummaryOutputWeight*float64(out.Summary.Out)
			if opt.SummaryCost != nil {
				r.SummaryCost = opt.SummaryCost(*out.Summary, req.Model)
			}
			r.SentCost += r.SummaryCost
			r.SentBPCost += r.SummaryCost
			r.SentBlindCost += r.SummaryCost
		}
		if opt.Line > 0 {
			r.OverLine, r.OrigOverLine = tokens.Estimate(sent) > opt.Line, tokens.Estimate(body) > opt.Line
		}
		if prevSent != nil {
			_, ext := prompt.Shared(prevSent, ps)
			r.Event = !ext
			if _, ext := prompt.Shared(prevOrig, po); !ext {
				st.OrigEvents++
			}
		}
		if len(out.Stages) > 0 {
			if r.Passes, err = stageSavings(po, body, out.Stages, parse); err != nil {
				return st, fmt.Errorf("%s request %d: %w", name, i, err)
			}
		}
		if opt.Check != nil {
			r.Invalid = opt.Check(body, sent)
		}
		if c := out.Compaction; c != nil {
			r.Recall = summaryRecall(i, co, *c)
		}
		if req.Answer != nil {
			quotes.observe(co, req.Reset || i == 0)
			var lost []string
			r.Quotes, lost = quotes.check(req.Answer, sent, func() int { return compactionEnd(co, cs) })
			for _, l := range lost {
				if len(st.Lost) < MaxLostExamples {
					st.Lost = append(st.Lost, LostQuote{Request: i, Line: clip(l, lostLineMax)})
				}
			}
		}
		st.Requests = append(st.Requests, r)
		prevOrig, prevSent = po, ps
		if !req.Time.IsZero() {
			prevTime = req.Time
		}
		if opt.Progress != nil {
			opt.Progress()
		}
	}
	return st, nil
}

// stageSavings measures the tokens each stage saved against the one
// before it (the first against the original).
func stageSavings(po *prompt.Prompt, body []byte, stages []Stage, parse func([]byte) (*prompt.Prompt, error)) ([]PassTokens, error) {
	out := make([]PassTokens, len(stages))
	prevBody, prevTok := body, po.Tokens()
	for i, s := range stages {
		tok := prevTok
		if !bytes.Equal(s.Body, prevBody) {
			p, err := parse(s.Body)
			if err != nil {
				return nil, fmt.Errorf("after pass %s: %w", s.Name, err)
			}
			tok = p.Tokens()
		}
		out[i] = PassTokens{Name: s.Name, Edits: s.Edits, Saved: prevTok - tok}
		prevBody, prevTok = s.Body, tok
	}
	return out, nil
}
