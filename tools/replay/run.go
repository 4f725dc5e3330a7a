package replay

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/ctxguard/ctxguard"
	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/gemini"
	"github.com/ctxguard/ctxguard/internal/cachelife"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tools/estimator"
	"github.com/ctxguard/ctxguard/tools/transcript"
	"github.com/ctxguard/ctxguard/tools/validate"
	"github.com/ctxguard/ctxguard/tools/validate/allow"
)

// Pipeline is what Run replays sessions through.
type Pipeline struct {
	// Passes names the pipeline's passes in order, for the report.
	Passes []string
	// New makes the rewriter for one session, whose requests are in
	// protocol proto, with the store it keeps removed content in (nil if
	// none). It is called once per session, in order, so each session
	// starts from nothing.
	New func(s *transcript.Session, proto protocol.Protocol) (DetailedRewriter, store.Store, error)
	// Check, if set, judges every rewritten request against its
	// original; a complaint counts the request invalid. It is given the
	// protocol of the session's requests.
	Check func(proto protocol.Protocol, orig, sent []byte) error
	// Protocols maps a session's format to the protocol its client
	// speaks; nil uses DefaultProtocols. New and Run both use it.
	Protocols Protocols
}

// Protocols maps transcript formats to the protocol their requests are
// rebuilt in and rewritten by.
type Protocols map[transcript.Format]protocol.Protocol

// As returns protocols that send every format's sessions as requests of
// proto (with transcript.BuildOptions.Protocol set to match).
func As(proto protocol.Protocol) Protocols {
	ps := Protocols{}
	for f := range DefaultProtocols() {
		ps[f] = proto
	}
	return ps
}

// DefaultProtocols returns the protocols of the formats transcript
// rebuilds: Anthropic Messages for Claude Code and SWE-agent sessions (the
// builder writes both as Claude Code requests), the Responses API for
// Codex rollouts, Gemini's generateContent for Gemini CLI sessions.
func DefaultProtocols() Protocols {
	return Protocols{
		transcript.ClaudeCode: anthropic.Protocol,
		transcript.SWEAgent:   anthropic.Protocol,
		transcript.Codex:      responses.Protocol,
		transcript.GeminiCLI:  gemini.Protocol,
	}
}

// For returns the protocol of a session (nil if none is known).
func (ps Protocols) For(s *transcript.Session) protocol.Protocol {
	if ps == nil {
		ps = DefaultProtocols()
	}
	return ps[s.Format]
}

// CheckRewrite judges a rewrite with the protocol's own validator: the
// Anthropic rules (validate.Rewrite with opt) or the Responses API's
// (responses.ValidateRewrite) or Chat Completions' (chat.ValidateRewrite)
// or Gemini's (gemini.ValidateRewrite); other protocols are not checked.
func CheckRewrite(opt validate.Options) func(proto protocol.Protocol, orig, sent []byte) error {
	return func(proto protocol.Protocol, orig, sent []byte) error {
		switch proto {
		case anthropic.Protocol:
			return validate.Rewrite(orig, sent, opt)
		case responses.Protocol:
			return responses.ValidateRewrite(orig, sent)
		case chat.Protocol:
			return chat.ValidateRewrite(orig, sent)
		}
		if proto != nil && proto.Name() == gemini.Protocol.Name() {
			// Bound to each session's model (protocol.PathBound), so
			// not equal to gemini.Protocol itself.
			return gemini.ValidateRewrite(orig, sent)
		}
		return nil
	}
}

// ValidateOptions are the changes the passes may make under the default
// configuration (ctxguard.Allowed), as validate.Rewrite checks them.
var ValidateOptions = allow.For(config.Defaults())

// GuardPipeline returns the pipeline the proxy runs for cfg: per session a
// new ctxguard.Guard over a fresh store.Memory, each request through
// Guard.RewriteBody (the body path of the proxy) with no headers. cfg is
// validated as serve validates it; dry_run is ignored, since a replay
// shows what would be sent.
//
// Per-pass savings: for a pipeline of n passes the session also runs
// through Guards that stop after pass 1, 2, ..., n-1 (the same config with
// the later passes switched off; every decision is a function of the
// request alone, so these are exactly the bodies the full pipeline had
// after each pass). This costs a few more pipeline runs per request; the
// later passes are switched off through package pass's registry, so a
// pass it does not have leaves the per-pass split out.
func GuardPipeline(cfg config.Config) (Pipeline, error) {
	cfg.DryRun = false
	// A replay never calls a model: summaries are extractive.
	pass.Update(&cfg.Passes, func(c *compact.Config) { c.Summarizer.Mode = "none" })
	if err := cfg.Validate(); err != nil {
		return Pipeline{}, err
	}
	probe, stop, err := ctxguard.Compile(cfg, ctxguard.Deps{Blobs: &store.Blobs{Store: store.NewMemory()}})
	if err != nil {
		return Pipeline{}, err
	}
	passes := probe.Passes()
	stop()
	stageCfgs, staged := stageConfigs(cfg, passes)
	p := Pipeline{
		Passes: passes,
		Check:  CheckRewrite(allow.For(cfg)),
	}
	p.New = func(s *transcript.Session, proto protocol.Protocol) (DetailedRewriter, store.Store, error) {
		mem := store.NewMemory()
		// The engine times the session's prompt cache by the requests'
		// own times (a request without one keeps the last).
		clock := time.Now()
		g, err := ctxguard.New(cfg, ctxguard.WithStore(mem), ctxguard.WithClock(func() time.Time { return clock }))
		if err != nil {
			return nil, nil, err
		}
		var stages []*ctxguard.Guard
		if staged {
			for _, sc := range stageCfgs {
				sg, err := ctxguard.New(sc, ctxguard.WithStore(store.NewMemory()), ctxguard.WithClock(func() time.Time { return clock }))
				if err != nil {
					return nil, nil, err
				}
				stages = append(stages, sg)
			}
		}
		ctx := context.Background()
		rw := func(body []byte, at time.Time) (Outcome, error) {
			if !at.IsZero() {
				clock = at
			}
			res := g.RewriteBody(ctx, proto, nil, body)
			if res.Skipped != "" {
				return Outcome{}, fmt.Errorf("not rewritten: %s", res.Skipped)
			}
			out := Outcome{Body: res.Body, Reported: res.Event, Failed: res.Err}
			if w, mo := res.Model.Window, res.Model.MaxOutput; w > mo && mo > 0 {
				out.Line = w - mo
			}
			if res.Compaction != "" {
				rec, err := compact.ReadRecord(context.Background(), mem, res.Compaction)
				if err != nil {
					return Outcome{}, err
				}
				small := rec.Model
				if c, ok := proto.(protocol.Caller); ok {
					small = c.SmallModel(res.Model.ID)
				}
				out.Summary = &SummaryCall{Model: small, In: rec.InputTokens, Out: rec.OutputTokens}
				out.Compaction = &Compaction{Text: rec.Text, Messages: rec.Messages}
			}
			if res.Err != nil || !staged || len(passes) == 0 || len(res.Passes) != len(passes) {
				return out, nil
			}
			for i, sg := range stages {
				sr := sg.RewriteBody(ctx, proto, nil, body)
				if sr.Err != nil {
					return Outcome{}, fmt.Errorf("pipeline stopped after pass %s: %w", passes[i], sr.Err)
				}
				out.Stages = append(out.Stages, Stage{Name: passes[i], Edits: res.Passes[i].Edits, Body: sr.Body})
			}
			last := len(passes) - 1
			out.Stages = append(out.Stages, Stage{Name: passes[last], Edits: res.Passes[last].Edits, Body: res.Body})
			return out, nil
		}
		return rw, mem, nil
	}
	return p, nil
}

// stageConfigs returns, for passes p1..pn, the configs running p1..pk for
// k = 1..n-1, or false if a pass is not one it can switch off (a pass
// the registry does not have: pass.Sections.Switch).
func stageConfigs(cfg config.Config, passes []string) ([]config.Config, bool) {
	for _, p := range passes {
		if probe := cfg.Passes; probe.Switch(p, false) != nil {
			return nil, false
		}
	}
	var out []config.Config
	for k := 1; k < len(passes); k++ {
		c := cfg
		for _, p := range passes[k:] {
			c.Passes.Switch(p, false)
		}
		out = append(out, c)
	}
	return out, true
}

// Off returns cfg with every rule switched off: the pipeline forwards
// every body untouched, the baseline a replay must show as ratio 1.
func Off(cfg config.Config) config.Config {
	for _, m := range pass.Modules() {
		cfg.Passes.Switch(m.Name, false)
	}
	return cfg
}

// summaryCost prices a summarizer call in base-input-token units of
// reqModel: its input at the small model's input price and its output at
// its output price (SummaryOutputWeight times the input price when the
// table has none), over reqModel's input price.
func summaryCost(call SummaryCall, reqModel string, prices PriceTable) float64 {
	small, _, ok1 := prices.Lookup(call.Model)
	big, _, ok2 := prices.Lookup(reqModel)
	if !ok1 || !ok2 || big.Input <= 0 {
		return float64(call.In) + SummaryOutputWeight*float64(call.Out)
	}
	return (float64(call.In)*small.Input + float64(call.Out)*small.OutputPrice()) / big.Input
}

// RunOptions configure Run.
type RunOptions struct {
	// Window and Line, if positive, are the window the replay set and
	// its overflow line, which requests are checked against
	// (Options.Line).
	Window, Line int
	// Pipeline is what every session is replayed through.
	Pipeline Pipeline
	// Build shapes the rebuilt requests (system prompt, tools, model);
	// the zero value uses transcript.DefaultProfile.
	Build transcript.BuildOptions
	// Prices prices the requests; nil uses DefaultPrices.
	Prices PriceTable
	// CacheTTL is how long the prompt cache keeps a prefix after its
	// last use, against the requests' times (Options.Expiry): 0 the
	// lifetime of each request's provider and model, extended when the
	// request asks (model.Info.CacheTTL, cachelife.Extended); a positive
	// duration that lifetime for every request; NeverExpires the
	// time-blind model.
	CacheTTL time.Duration
	// Progress, if set, is called after every request with the number of
	// requests replayed so far and in all.
	Progress func(done, total int)
}

// Run replays sessions, in order, and reports on them. Each session's
// requests are rebuilt as its client sent them (transcript.Builder: request
// k holds everything before assistant message k, from the last compaction
// on, with the profile's system prompt and tools), sent through a rewriter
// made for that session alone, and measured (Measure). A session that
// cannot be replayed is reported with its error; Run itself fails only
// for a missing pipeline.
//
// The estimator's accuracy against the usage the transcripts recorded
// (estimator.Accuracy, before and after calibration) is part of the report.
func Run(sessions []*transcript.Session, opt RunOptions) (*Report, error) {
	if opt.Pipeline.New == nil {
		return nil, fmt.Errorf("replay: no pipeline")
	}
	prices := opt.Prices
	if prices == nil {
		prices = DefaultPrices()
	}
	total := 0
	for _, s := range sessions {
		total += s.Requests()
	}
	rep := &Report{Version: ReportVersion, Passes: slices.Clone(opt.Pipeline.Passes), Requests: total, Window: opt.Window, Line: opt.Line,
		CacheTTL: FormatCacheTTL(opt.CacheTTL)}
	if rep.Passes == nil {
		rep.Passes = []string{}
	}
	files := map[string]bool{}
	done, base := 0, 0
	unpriced := map[string]bool{}
	used := PriceTable{}
	acc := estimator.Accuracy(sessions, estimator.AccuracyOptions{})
	for _, s := range sessions {
		files[s.Path] = true
		sr := newSessionReport(s)
		stream, usage, err := sessionStream(s, opt.Build)
		switch {
		case err == nil && len(stream) > 0:
			sr.Model = model.Canonical(stream[0].Model)
		case opt.Build.Model != "":
			sr.Model = model.Canonical(opt.Build.Model)
		}
		proto := opt.Pipeline.Protocols.For(s)
		if err == nil && proto == nil {
			err = fmt.Errorf("no protocol for %s sessions", s.Format)
		}
		if pb, ok := proto.(protocol.PathBound); ok && err == nil && len(stream) > 0 {
			// The API names the model in the URL (Gemini): the session's
			// requests go to the path of its first request's model.
			proto = pb.ForPath(stream[0].Path)
		}
		if err == nil {
			sr.Protocol = proto.Name()
			var rw DetailedRewriter
			var st store.Store
			rw, st, err = opt.Pipeline.New(s, proto)
			if err == nil {
				var check func(orig, sent []byte) error
				if c := opt.Pipeline.Check; c != nil {
					check = func(orig, sent []byte) error { return c(proto, orig, sent) }
				}
				var stat *SessionStat
				stat, err = Measure(sr.ID, stream, rw, Options{
					Check:    check,
					Protocol: proto,
					Cache:    cacheModel(proto, sr.Model, prices),
					Line:     opt.Line,
					Expiry:   expiry(opt.CacheTTL),
					SummaryCost: func(call SummaryCall, reqModel string) float64 {
						return summaryCost(call, reqModel, prices)
					},
					Store: st,
					Progress: func() {
						done++
						if opt.Progress != nil {
							opt.Progress(done, total)
						}
					},
				})
				if stat != nil {
					sr.fill(stat, stream, usage, prices, unpriced, used)
				}
			}
		}
		if err != nil {
			sr.Error = err.Error()
		}
		// Requests of a session that stopped early still count as done.
		base += s.Requests()
		done = base
		if opt.Progress != nil {
			opt.Progress(done, total)
		}
		sr.Estimator = sessionEstimate(acc, s.ID)
		rep.Sessions = append(rep.Sessions, sr)
	}
	rep.Files = len(files)
	rep.finish(acc, unpriced, used)
	return rep, nil
}

// sessionStream rebuilds a session's requests with what Measure needs for
// pricing and quote retention, and the usage the API reported for each.
func sessionStream(s *transcript.Session, opt transcript.BuildOptions) ([]Request, []*transcript.Usage, error) {
	b, err := transcript.NewBuilder(s, opt)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Request, 0, b.Len())
	usage := make([]*transcript.Usage, 0, b.Len())
	for k := 0; k < b.Len(); k++ {
		r, err := b.Request(k)
		if err != nil {
			return nil, nil, err
		}
		req := Request{Body: r.Body, Reset: r.Reset, Model: r.Model, Time: r.Time, Path: r.Path}
		switch {
		case r.Message >= 0:
			req.Answer = s.AppendJSON(nil, r.Message)
		case s.Codex != nil && r.Index < len(s.Codex.Turns):
			t := s.Codex.Turns[r.Index]
			req.Answer = codexAnswer(s.Codex.Items[t.End:t.Out])
		case s.Gemini != nil && r.Index < len(s.Gemini.Turns):
			if end := s.Gemini.Turns[r.Index].End; end < len(s.Gemini.Messages) && s.Gemini.Messages[end].Role == "model" {
				req.Answer = geminiAnswer(s.Gemini.Messages[end].Parts)
			}
		}
		out = append(out, req)
		usage = append(usage, r.Usage)
	}
	return out, usage, nil
}

// cacheModel picks the cost model of a session by its protocol's family:
// OpenAI's and Gemini's automatic (implicit) caching with no write
// premium, reads at the model's cached-input price over its input price
// (0.1x, the GPT-5 family's and Gemini 2.5 and later's, when the price
// table does not know the model); Anthropic's otherwise.
func cacheModel(proto protocol.Protocol, modelID string, prices PriceTable) CacheModel {
	if f := proto.Family(); f != "openai" && f != gemini.Family {
		return AnthropicCache
	}
	read := 0.1
	if p, _, ok := prices.Lookup(modelID); ok && p.Input > 0 {
		read = p.CacheRead / p.Input
	}
	return OpenAICache(read)
}

// NeverExpires is the RunOptions.CacheTTL of the time-blind model.
const NeverExpires time.Duration = -1

// ParseCacheTTL reads replay's --cache-ttl: "provider" (or "") for each
// provider's and request's own lifetime (0), "never" for the time-blind
// model (NeverExpires), or a positive Go duration ("5m", "1h").
func ParseCacheTTL(s string) (time.Duration, error) {
	switch s {
	case "", "provider":
		return 0, nil
	case "never":
		return NeverExpires, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("cache TTL %q: want provider, never or a positive duration such as 5m", s)
	}
	return d, nil
}

// FormatCacheTTL is the inverse of ParseCacheTTL.
func FormatCacheTTL(d time.Duration) string {
	switch {
	case d == 0:
		return "provider"
	case d < 0:
		return "never"
	}
	return d.String()
}

// expiry is Options.Expiry for a RunOptions.CacheTTL.
func expiry(ttl time.Duration) func(Request) (time.Duration, bool) {
	if ttl < 0 {
		return nil
	}
	return func(r Request) (time.Duration, bool) {
		ext := cachelife.Extended(r.Body)
		if ttl > 0 {
			return ttl, ext
		}
		return model.Lookup(r.Model).CacheTTL(ext), ext
	}
}

// newSessionReport fills what the transcript says about a session.
func newSessionReport(s *transcript.Session) SessionReport {
	return SessionReport{
		ID:         s.ID,
		Name:       displayName(s),
		Path:       s.Path,
		File:       filepath.Base(s.Path),
		Format:     s.Format.String(),
		Model:      model.Canonical(s.Model),
		Sidechain:  s.Sidechain,
		Parent:     s.Parent,
		Load:       loadStats(s.Stats),
		PerRequest: []RequestReport{},
	}
}

// displayName is a short name for tables and charts: the first 8
// characters of a Claude Code session id, "agent-<id>" for a subagent,
// the file name for SWE-agent.
func displayName(s *transcript.Session) string {
	if s.Sidechain {
		if i := lastIndex(s.ID, "/agent-"); i >= 0 {
			return s.ID[i+1:]
		}
	}
	if len(s.ID) > 8 && s.Format == transcript.ClaudeCode {
		return s.ID[:8]
	}
	return s.ID
}

func lastIndex(s, sub string) int {
	for i := len(s) - len(sub); i >= 0; i-- {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// WithWindow returns cfg with every model's window set to window and its
// maximum output to min(the model's, maxOutput) (maxOutput 0: window/8),
// for a replay that asks how ctxguard keeps sessions inside a small
// window. It returns the overflow line too: window − max output.
func WithWindow(cfg config.Config, window, maxOutput int) (config.Config, int) {
	if maxOutput <= 0 {
		maxOutput = window / 8
	}
	lim := func(out int) model.Limits {
		if out <= 0 || out > maxOutput {
			out = maxOutput
		}
		return model.Limits{Window: window, MaxOutput: out, LongWindow: window}
	}
	cfg.Models.Default = lim(maxOutput)
	cfg.Models.Overrides = map[string]model.Limits{}
	for _, in := range model.Default().Models() {
		cfg.Models.Overrides[in.ID] = lim(in.MaxOutput)
	}
	return cfg, window - maxOutput
}
