// Package clearing is ctxguard's history pass: it clears old tool results (and
// optionally old tool inputs and thinking) in rare, large, sticky batches,
// so a session's requests stay small while the prompt cache keeps hitting.
//
// Every decision is a deterministic, monotone function of the request's own
// history (see plan.go): the pass replays the requests the client sent
// before this one, and clears a region only at an "edit event", when the
// request is over the trigger and at least clear_at_least tokens can be
// freed at once. Between events the rewritten request N+1 starts with the
// rewritten request N byte for byte, and a fresh process with an empty
// store rewrites every request identically. Cleared content is kept in the
// store and each stub says where.
package clearing

import (
	"errors"
	"fmt"
	"hash/fnv"
	"path"
	"slices"
	"strings"
	"unsafe"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/splice"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

// Config is the clearing pass's configuration (YAML key `clear`).
type Config struct {
	// Enabled switches the pass on.
	Enabled bool `yaml:"enabled"`
	// Trigger: a conversation larger than this may fire an event
	// (tokens, or a fraction of the model's window). It counts the
	// messages only, not the system prompt and tool schemas, so a client
	// that changes those mid-session (an MCP server added, a date in the
	// system prompt) never changes how the history was cleared.
	Trigger model.Amount `yaml:"trigger"`
	// KeepTokens: the newest tool output (results and clearable inputs)
	// of at least this many tokens is never cleared.
	KeepTokens model.Amount `yaml:"keep_tokens"`
	// KeepUses: the newest this-many tool calls are never cleared.
	KeepUses int `yaml:"keep_uses"`
	// ClearAtLeast: an event must free at least this many tokens, so
	// the prompt cache is invalidated rarely and for a large gain.
	ClearAtLeast model.Amount `yaml:"clear_at_least"`
	// Payback: an event must repay what it costs the prompt cache (a
	// cache write of everything after its first change, instead of a
	// cache read) through the reads it saves within this many requests,
	// and within as many requests as the session has made so far, so
	// clearing never makes a session cost more than going direct. 0
	// turns the rule off.
	Payback int `yaml:"payback"`
	// Tools lists globs (path.Match) of tools whose results may be
	// cleared; ExcludeTools wins over it.
	Tools        []string `yaml:"tools"`
	ExcludeTools []string `yaml:"exclude_tools"`
	// ClearInputs lists globs of tools whose large tool_use inputs are
	// cleared with their results (Write and Edit carry whole files).
	ClearInputs []string `yaml:"clear_inputs"`
	// MinTokens: items smaller than this are left alone; a stub would
	// save too little.
	MinTokens int `yaml:"min_tokens"`
	// Thinking removes thinking blocks an event invalidates: those of
	// assistant messages before the latest one at the event.
	Thinking bool `yaml:"thinking"`
	// CacheMarker places one cache_control marker (when the request has
	// fewer than 4) on the last block before the cleared boundary, so
	// the prefix before the next event stays cached.
	CacheMarker bool `yaml:"cache_marker"`
	// Reads keeps the files an agent read for longer than the rest of
	// its tool output: it quotes them back (an edit quotes the lines it
	// replaces) long after it read them.
	Reads Reads `yaml:"reads"`
	// Trim drops whole cleared tool rounds instead of leaving stubs
	// (Antigravity's tool-round trimming).
	Trim Trim `yaml:"trim"`
	// Cold times events by the prompt cache's clock.
	Cold Cold `yaml:"cold"`
}

// Cold configures edit events at cold requests: those that arrive after
// the session's prompt cache expired (pipeline.Env.Cold), which the
// upstream writes to the cache whole whatever ctxguard sends. An edit made
// there costs no cache write, so:
//
//   - a cold request above the trigger gets an event whenever it frees
//     at least ClearAtLeast, payback or not;
//   - an event that is due at a warm request (it passes every rule) but
//     not urgent (the request below Urgent) waits for a cold one, for at
//     most MaxWait requests, and no longer than the reads it would have
//     saved meanwhile cost what it would cost now (the rewritten tokens'
//     cache write less their read: waiting never costs more than twice
//     the best choice in hindsight). Then it happens anyway.
//
// Whether a request was cold is decided once, when it arrives, and
// stored; replays of the history read it back, so events stay where they
// happened.
type Cold struct {
	Enabled bool `yaml:"enabled"`
	// ClearAtLeast: an event at a cold request frees at least this much
	// (tokens, or a fraction of the model's window).
	ClearAtLeast model.Amount `yaml:"clear_at_least"`
	// MaxWait bounds the requests a due event waits for a cold one; 0:
	// none waits.
	MaxWait int `yaml:"max_wait"`
	// Urgent: a request at least this large (tokens, or a fraction of
	// the model's window) never waits.
	Urgent model.Amount `yaml:"urgent"`
}

// Reads configures how long file reads stay. A read is the result of a
// call to one of Tools; the same call made again (the same tool with the
// same input) supersedes it, since its answer is the newer text of the
// file. An event keeps the reads it would clear while they are among the
// newest reads, not superseded and still sent, whose tokens add up to at
// most KeepTokens (counted from the newest read back, whether or not
// the newest are past the clear boundary); the others are cleared as
// usual. A read kept at one event may be cleared at a later one, when
// newer reads have filled the budget or a re-read superseded it; a
// cleared read is never sent again.
type Reads struct {
	// Tools lists globs (path.Match) of the tools whose results are file
	// reads (results of tools that are not cleared at all, by Tools and
	// ExcludeTools of Config, need no rule).
	Tools []string `yaml:"tools"`
	// Commands lists the shell commands that print files (a program and
	// its leading flags: "cat", "sed -n"): a call of any tool whose input
	// holds a command ("command" or "cmd", a string or an argv array such
	// as ["bash", "-lc", "..."]) that is one of them, after any leading
	// "cd DIR &&", is a read. A command that also does something else
	// (;, &&, ||, a redirection, a substitution) is not; a pipe is (it
	// filters the file's text).
	Commands []string `yaml:"commands"`
	// KeepTokens bounds the reads kept (tokens, or a fraction of the
	// model's window); 0 keeps none past the clear boundary.
	KeepTokens model.Amount `yaml:"keep_tokens"`
	// MaxShare caps KeepTokens (a fraction of the model's window, or
	// tokens; 0: no cap). In a small window the newest reads would crowd
	// the newest history that compaction keeps and make it compact more
	// often.
	MaxShare model.Amount `yaml:"max_share"`
}

// Defaults returns the clearing configuration ctxguard ships with. The
// figures come from replaying the real Claude Code and Codex sessions in
// the project's data (see docs/results.md): they cut tokens and cache-aware
// cost together while every stub still says where its content went. What
// agents quote back long after reading it is file text (an edit quotes
// the lines it replaces), so beyond the newest two tool calls only the
// newest file reads stay.
func Defaults() Config {
	return Config{
		Enabled:      true,
		Trigger:      model.Tokens(8_000),
		KeepTokens:   model.Tokens(0),
		KeepUses:     2,
		ClearAtLeast: model.Tokens(6_000),
		Payback:      10,
		Tools:        []string{"*"},
		ClearInputs:  []string{"*"},
		MinTokens:    30,
		Thinking:     true,
		CacheMarker:  true,
		Reads: Reads{
			Tools:      []string{"Read", "read", "read_file"},
			Commands:   []string{"cat", "head", "tail", "nl", "sed -n", "bat"},
			KeepTokens: model.Tokens(10_000),
			MaxShare:   model.Fraction(0.08),
		},
		Trim: Trim{Enabled: true, KeepRounds: 5},
		Cold: Cold{Enabled: true, ClearAtLeast: model.Tokens(6_000), MaxWait: 10, Urgent: model.Fraction(0.5)},
	}
}

// Validate reports every problem in c, joined, or nil.
func (c Config) Validate() error {
	var errs []error
	for name, a := range map[string]model.Amount{"trigger": c.Trigger, "keep_tokens": c.KeepTokens, "clear_at_least": c.ClearAtLeast, "reads.keep_tokens": c.Reads.KeepTokens, "reads.max_share": c.Reads.MaxShare, "cold.clear_at_least": c.Cold.ClearAtLeast, "cold.urgent": c.Cold.Urgent} {
		if err := a.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	for name, v := range map[string]int{"keep_uses": c.KeepUses, "payback": c.Payback, "min_tokens": c.MinTokens, "trim.keep_rounds": c.Trim.KeepRounds, "cold.max_wait": c.Cold.MaxWait} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s: %d is negative", name, v))
		}
	}
	for _, list := range [][]string{c.Tools, c.ExcludeTools, c.ClearInputs, c.Reads.Tools} {
		for _, g := range list {
			if _, err := path.Match(g, ""); err != nil {
				errs = append(errs, fmt.Errorf("bad tool glob %q: %w", g, err))
			}
		}
	}
	for _, cmd := range c.Reads.Commands {
		if cmd == "" || strings.TrimSpace(cmd) != cmd {
			errs = append(errs, fmt.Errorf("reads.commands: %q is empty or has surrounding space", cmd))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// Trim configures tool-round trimming. A tool round is an assistant
// message that calls tools and the user message that answers it. With
// trimming on, the rounds an event clears are dropped whole instead of
// being left as stubs: each run of them becomes one assistant message
// holding their text blocks (text that shared a message with a dropped
// call is kept) and one user message with a note naming the blob that
// holds the dropped messages. A run never spans two events, so a later
// event never rewrites an earlier run. The newest KeepRounds rounds are
// never dropped.
type Trim struct {
	Enabled    bool `yaml:"enabled"`
	KeepRounds int  `yaml:"keep_rounds"`
}

// budget is the read budget in a window of w tokens.
func (r Reads) budget(w int) int {
	b := r.KeepTokens.Resolve(w)
	if !r.MaxShare.IsZero() {
		b = min(b, r.MaxShare.Resolve(w))
	}
	return b
}

// Pass is the compiled clearing pass. It is safe for concurrent use.
type Pass struct {
	cfg   Config
	blobs *store.Blobs
	memo  memo // rendered stubs, so a repeat costs one hash
	tools toolRules
}

// New compiles cfg. blobs receives every cleared item.
func New(cfg Config, blobs *store.Blobs) (*Pass, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("clear: %w", err)
	}
	if blobs == nil {
		return nil, fmt.Errorf("clear: no blob store")
	}
	p := &Pass{cfg: cfg, blobs: blobs}
	p.tools.decide = func(name string) toolRule {
		excl := match(cfg.ExcludeTools, name)
		res := match(cfg.Tools, name) && !excl
		return toolRule{result: res, input: match(cfg.ClearInputs, name) && !excl, read: res && match(cfg.Reads.Tools, name)}
	}
	return p, nil
}

// limits resolves the configured amounts for the request's model.
func (p *Pass) limits(env *pipeline.Env) limits {
	w := model.DefaultWindow
	var write, read int
	var cold []int
	if env != nil {
		if env.Window > 0 {
			w = env.Window
		}
		write, read = env.CacheWrite, env.CacheRead
		if p.cfg.Cold.Enabled {
			cold = env.Cold
			if cold == nil {
				cold = []int{} // timed, with no cold request yet
			}
		}
	}
	lim := limits{
		trigger:      p.cfg.Trigger.Resolve(w),
		keepTokens:   p.cfg.KeepTokens.Resolve(w),
		keepUses:     p.cfg.KeepUses,
		clearAtLeast: p.cfg.ClearAtLeast.Resolve(w),
		payback:      p.cfg.Payback,
		write:        write,
		read:         read,
		readTokens:   p.cfg.Reads.budget(w),
		cold:         cold,
	}
	if cold != nil {
		lim.coldAtLeast = p.cfg.Cold.ClearAtLeast.Resolve(w)
		lim.maxWait = p.cfg.Cold.MaxWait
		lim.urgent = p.cfg.Cold.Urgent.Resolve(w)
	}
	return lim
}

// Name implements pipeline.Pass.
func (p *Pass) Name() string { return "clear" }

func match(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// Stub sizes used for planning. They are fixed, not measured, so the plan
// does not depend on blob ids or paths.
const (
	stubTokens  = 25
	blockTokens = 4 // per-block framing the plan counts
	// messageFrame and blockFrame approximate the rest of the JSON
	// around a message and a block (keys, type names, quotes), measured
	// on generated sessions of every protocol (TestFrame).
	messageFrame = 6
	blockFrame   = 10
)

type itemKind uint8

const (
	kindResult itemKind = iota + 1
	kindInput
)

// item is a clearable tool result or tool input.
type item struct {
	msg, blk int
	kind     itemKind
}

// memoKey names what the pass keeps in a session's memory.
const memoKey = "clear/analysis"

// analysis is what the pass measured of a request.
type analysis struct {
	costs []msgCost
	items []item
	reads []read // the items that are file reads (Config.Reads)
	base  int
}

// Footprint implements pipeline.Footprinter.
func (a *analysis) Footprint() int {
	return cap(a.costs)*int(unsafe.Sizeof(msgCost{})) + cap(a.items)*int(unsafe.Sizeof(item{})) + cap(a.reads)*int(unsafe.Sizeof(read{}))
}

func (p *Pass) analyze(r *pipeline.Request) (*analysis, error) {
	c := r.Conv
	a := &analysis{costs: make([]msgCost, len(c.Messages))}
	est := func(sp conversation.Span) (int, error) {
		b, err := r.Current(sp)
		return tokens.Estimate(b), err
	}
	var err error
	// What the previous request of the session measured of the messages
	// it shares with this one still holds (pipeline.Request.Stable): a
	// message's costs depend on the message alone.
	from := 0
	if prev, ok := r.Memo[memoKey].(*analysis); ok && r.Stable > 0 && r.Stable <= len(prev.costs) {
		from = r.Stable
		a.reuse(prev, from)
	}
	if r.Memo != nil {
		defer func() { r.Memo[memoKey] = a }()
	}
	for mi := from; mi < len(c.Messages); mi++ {
		m := &c.Messages[mi]
		mc := &a.costs[mi]
		mc.assistant = m.Role == conversation.RoleAssistant
		mc.frame = messageFrame
		for bi := range m.Blocks {
			b := &m.Blocks[bi]
			mc.frame += blockFrame + tokens.Estimate(c.Bytes(b.ID)) + tokens.Estimate(c.Bytes(b.Name))
			var t int
			switch b.Kind {
			case conversation.Text:
				// The text only: the same whether the client sent a block
				// (with or without its moving marker) or a plain string.
				t, err = est(b.Text)
			case conversation.Thinking, conversation.RedactedThinking:
				// The signature is not billed as text.
				t, err = est(b.Span)
				if p.cfg.Thinking && mc.assistant {
					mc.think += t + blockTokens
				}
			case conversation.ToolCall:
				t, err = est(b.Input)
				mc.uses++
				if err != nil {
					break
				}
				if body, in, ok := p.clearsInput(c, b, t); ok {
					if after, big := inputAfter(body, in); big {
						mc.clearable += t
						mc.stubbed += after + blockTokens
						a.items = append(a.items, item{mi, bi, kindInput})
						mc.tok += t + blockTokens
						continue
					}
				}
			case conversation.ToolResult:
				t, err = resultTokens(r, b)
				if err == nil && p.clearsResult(c, b, t) {
					mc.clearable += t
					mc.stubbed += stubTokens + blockTokens
					if p.tools.of(c, b).read || p.readsCommand(c, b) {
						a.reads = append(a.reads, read{item: len(a.items), msg: mi, tok: t, saved: t - stubTokens, key: callKey(c, b)})
					}
					a.items = append(a.items, item{mi, bi, kindResult})
					mc.tok += t + blockTokens
					continue
				}
			default:
				// Image, document and unknown blocks by their bytes, as
				// they are without the client's moving cache marker.
				if b.CacheControl.IsZero() || r.Edited(b.Span) {
					t, err = est(b.Span)
				} else {
					t = tokens.Estimate(without(c.Body, b.Span, []conversation.Span{b.CacheControl}))
				}
			}
			if err != nil {
				return nil, err
			}
			mc.tok += t + blockTokens
			mc.stubbed += t + blockTokens
		}
	}
	return a, nil
}

func (p *Pass) clearsResult(c *conversation.Conversation, b *conversation.Block, t int) bool {
	if t < p.cfg.MinTokens || b.Call[0] < 0 {
		return false
	}
	return p.tools.of(c, b).result
}

// readsCommand reports whether tool result b answers a shell command
// that prints a file (Reads.Commands).
func (p *Pass) readsCommand(c *conversation.Conversation, b *conversation.Block) bool {
	if len(p.cfg.Reads.Commands) == 0 {
		return false
	}
	body, in := c.Input(&c.Messages[b.Call[0]].Blocks[b.Call[1]])
	if in.IsZero() || jsonscan.KindOf(body, in) != jsonscan.Object {
		return false
	}
	cmd := shellCommand(body, in)
	if cmd == "" {
		return false
	}
	return printsFile(cmd, p.cfg.Reads.Commands)
}

// shellCommand returns the command a tool input object holds: its
// "command" or "cmd" member, a string, or an argv array (the script of
// ["bash", "-lc", script], else the words joined by spaces); "" if none.
func shellCommand(body []byte, in conversation.Span) string {
	for _, key := range []string{"command", "cmd"} {
		v, err := jsonscan.Lookup(body, in, key)
		if err != nil {
			continue
		}
		switch jsonscan.KindOf(body, v) {
		case jsonscan.String:
			s, _ := jsonscan.Unquote(v.Bytes(body))
			return s
		case jsonscan.Array:
			var words []string
			it := jsonscan.Elements(body, v)
			for e, ok := it.NextElement(); ok; e, ok = it.NextElement() {
				w, err := jsonscan.Unquote(e.Bytes(body))
				if err != nil {
					return ""
				}
				words = append(words, w)
			}
			if len(words) == 3 && (words[1] == "-lc" || words[1] == "-c") {
				return words[2]
			}
			return strings.Join(words, " ")
		}
	}
	return ""
}

// printsFile reports whether shell command cmd is one of the programs
// (with their leading flags) in progs, after any leading "cd DIR &&",
// and does nothing else: no command list (;, &&, ||), no redirection,
// no substitution. A pipe is allowed: it filters the file's text.
func printsFile(cmd string, progs []string) bool {
	cmd = strings.TrimSpace(cmd)
	for strings.HasPrefix(cmd, "cd ") {
		i := strings.Index(cmd, "&&")
		if i < 0 {
			return false
		}
		cmd = strings.TrimSpace(cmd[i+2:])
	}
	if strings.ContainsAny(cmd, ";><`\n") || strings.Contains(cmd, "&&") || strings.Contains(cmd, "||") || strings.Contains(cmd, "$(") {
		return false
	}
	for _, p := range progs {
		if rest, ok := strings.CutPrefix(cmd, p); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			return true
		}
	}
	return false
}

// callKey identifies the call tool result b answers by its tool's name
// and its input as sent: the same call made again has the same key. It
// is a fixed function of those bytes (FNV-1a), the same in every process.
func callKey(c *conversation.Conversation, b *conversation.Block) uint64 {
	call := &c.Messages[b.Call[0]].Blocks[b.Call[1]]
	h := fnv.New64a()
	h.Write(c.Bytes(call.Name))
	h.Write([]byte{0})
	h.Write(c.Bytes(call.Input))
	return h.Sum64()
}

// clearsInput reports whether tool call b's input (of t tokens) is one
// to clear, and returns it as Conversation.Input does, so that it is
// decoded once: an input sent in a string (OpenAI's arguments) costs a
// decode and a validation.
func (p *Pass) clearsInput(c *conversation.Conversation, b *conversation.Block, t int) ([]byte, conversation.Span, bool) {
	if t < p.cfg.MinTokens || !p.tools.of(c, b).input {
		return nil, conversation.Span{}, false
	}
	body, in := c.Input(b)
	if k := jsonscan.KindOf(body, in); k != jsonscan.Object && (k != jsonscan.String || b.InputEncoded) {
		return nil, conversation.Span{}, false // an input is an object, or free-form text (a custom tool's)
	}
	return body, in, true
}

// Run implements pipeline.Pass.
func (p *Pass) Run(r *pipeline.Request) ([]splice.Edit, error) {
	if !p.cfg.Enabled || len(r.Conv.Messages) == 0 || r.Conv.Continued {
		// A continued conversation (the history is the server's) holds
		// only new turns: there is no history to clear.
		return nil, nil
	}
	a, err := p.analyze(r)
	if err != nil {
		return nil, err
	}
	pn, pl := p.plan(a, r.Env)
	r.Sizes = newSizes(pn, pl, a.costs)
	if n := len(pl.events); n > 0 && pl.events[n-1].at == len(r.Conv.Messages) {
		r.Note("edit-event")
	}
	out, err := p.edits(r, a, pl)
	if err != nil {
		return nil, err
	}
	if r.Env != nil && r.Env.Binding {
		// Every request of a binding model, from the first on, asks it to
		// drop rather than reject a thinking block whose prefix ctxguard
		// changed, so the setting itself never changes mid-session (a
		// change of thinking settings would invalidate the cached
		// messages).
		r.Require(conversation.DropInvalidThinking)
	}
	return out, nil
}

// plan replays the history a describes under the limits for env.
func (p *Pass) plan(a *analysis, env *pipeline.Env) (*planner, plan) {
	pn := newPlanner(a.base, a.costs)
	pn.reads = a.reads
	return pn, pn.run(a.costs, p.limits(env))
}

// without returns the bytes of sp with the given members (key through
// value, in order) removed, each with the comma that joined it to its
// neighbour: the bytes a client sends when it leaves those members out.
func without(body []byte, sp conversation.Span, members []conversation.Span) []byte {
	out := make([]byte, 0, sp.Len())
	at := sp.Start
	for _, m := range members {
		start, end := m.Start, m.End
		// Take the comma before the member if there is one, else the one
		// after it.
		i := start - 1
		for i > at && isSpace(body[i]) {
			i--
		}
		if body[i] == ',' {
			start = i
		} else {
			j := end
			for j < sp.End && isSpace(body[j]) {
				j++
			}
			if j < sp.End && body[j] == ',' {
				end = j + 1
			}
		}
		out = append(out, body[at:start]...)
		at = end
	}
	return append(out, body[at:sp.End]...)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// reuse copies into a what prev, the analysis of the session's previous
// request, measured of the messages before from, which the two share.
func (a *analysis) reuse(prev *analysis, from int) {
	copy(a.costs, prev.costs[:from])
	for _, it := range prev.items {
		if it.msg >= from {
			break
		}
		a.items = append(a.items, it)
	}
	for _, rd := range prev.reads {
		if rd.msg >= from {
			break
		}
		a.reads = append(a.reads, rd)
	}
}

// resultTokens estimates the content of tool result b as it is now,
// without the cache markers inside it: they move between requests and
// must not change the plan.
func resultTokens(r *pipeline.Request, b *conversation.Block) (int, error) {
	var marks []conversation.Span
	for _, pt := range b.Parts {
		if !pt.CacheControl.IsZero() {
			marks = append(marks, pt.CacheControl)
		}
	}
	cur, err := r.Current(b.Content)
	switch {
	case err != nil:
		return 0, err
	case len(marks) == 0 || r.Edited(b.Content):
		return tokens.Estimate(cur), nil // rewritten by an earlier pass: markers are its own
	}
	return tokens.Estimate(without(r.Conv.Body, b.Content, marks)), nil
}
