package transcript

import (
	"github.com/ctxguard/ctxguard/internal/jsonscan"

	"fmt"
	"strconv"
	"strings"
	"time"
)

// BuildOptions shape the requests a Builder makes.
type BuildOptions struct {
	// Profile supplies system prompt, tools and settings; nil uses
	// DefaultProfile().
	Profile *Profile
	// Model, if set, is sent in every request. Otherwise each request
	// names the model of the assistant message it produced (the session's
	// model if that has none), and Profile.Model when that is not a Claude
	// model.
	Model string
	// Protocol is the API the requests are written for: ProtoAnthropic
	// (Claude Code's requests), ProtoResponses or ProtoChat (see
	// oaiRenderer), ProtoGemini (see geminiRenderer); "" is a session's
	// native one: Responses for Codex rollouts, Gemini for Gemini CLI
	// sessions, Anthropic for the rest. Codex rollouts can be written as
	// Responses or Gemini requests (see codexGemini), Gemini CLI sessions
	// only as Gemini requests.
	Protocol string
}

// Request is one rebuilt request of a session.
type Request struct {
	// Index is k: the request produced the session's k-th assistant
	// message (0-based).
	Index int
	// Message is the index in Session.Messages of that assistant message
	// (-1 for a Codex session, whose answer is Session.Codex.Items
	// [End:Out] of its turn).
	Message int
	// First is the index in Session.Messages of the first message the
	// request holds (the start of its history).
	First int
	// Body is the request body, shaped as Claude Code sends it (Codex
	// sessions: as Codex CLI sends a POST /v1/responses body).
	Body []byte
	// Usage is the usage the API reported for the answer, nil if unknown.
	Usage *Usage
	Model string
	// Path is the URL path of a request whose API names the model there
	// (Gemini: /v1beta/models/{Model}:streamGenerateContent, sent with
	// ?alt=sse as the Gemini CLI sends it); "" for the other protocols.
	Path string
	// Time is when the client sent the request, as the transcript
	// recorded it: the timestamp of the first record of the answer
	// (Claude Code's assistant message, Codex's first output item), which
	// follows the request by the model's latency; zero when unrecorded.
	// A replay prices the prompt cache by it (the gaps between requests).
	Time time.Time
	// Reset is set on the first request of a history that restarted
	// after a compaction: it does not extend the previous request.
	Reset bool
	// Stable is the length of the prefix of Body that the next request of
	// the same history repeats byte for byte (when it names the same
	// model). Past it comes the message
	// that carries the moving cache marker, which the next request re-sends
	// without it (and as a plain string if it is a single text block).
	Stable int
}

// Builder rebuilds the requests of one session. It is not safe for
// concurrent use.
type Builder struct {
	s        *Session
	p        Profile
	model    string
	tail     []byte // from `],"system":` to the end
	sysMsg   []byte // the role:"system" message, nil if none
	reminder []byte // the reminder text block, nil if none
	asst     []int  // indices of assistant messages
	start    []int  // per message: index of the first message of its history
	cache    [][]byte
	cacheR   [][]byte          // the first message of a history, with the reminder
	cx       *codexBuilder     // a Codex session's requests, nil otherwise
	cxg      *codexGemini      // a Codex session's requests as Gemini's, nil otherwise
	gcli     *geminiCLIBuilder // a Gemini CLI session's requests, nil otherwise
	oai      *oaiRenderer      // an OpenAI rendering of the session, nil otherwise
	gem      *geminiRenderer   // a Gemini rendering of the session, nil otherwise
}

// NewBuilder prepares the requests of s, which must not change while the
// Builder is in use. It fails only for an invalid profile.
func NewBuilder(s *Session, opt BuildOptions) (*Builder, error) {
	p := DefaultProfile()
	if opt.Profile != nil {
		p = *opt.Profile
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	b := &Builder{s: s, p: p, model: opt.Model}
	if s.Codex != nil {
		switch opt.Protocol {
		case "", ProtoResponses:
			b.cx = newCodexBuilder(s, &b.p, opt.Model)
		case ProtoGemini:
			b.cxg = newCodexGemini(s, &b.p, opt.Model)
		default:
			return nil, fmt.Errorf("transcript: a Codex session cannot be written as %s requests", opt.Protocol)
		}
		return b, nil
	}
	if s.Gemini != nil {
		if opt.Protocol != "" && opt.Protocol != ProtoGemini {
			return nil, fmt.Errorf("transcript: a Gemini CLI session cannot be written as %s requests", opt.Protocol)
		}
		b.gcli = newGeminiCLIBuilder(s, &b.p, opt.Model)
		return b, nil
	}
	if s.System != "" {
		b.p.System[2] = s.System
	}
	b.tail = b.buildTail()
	if p.SystemMessage != "" {
		b.sysMsg = append([]byte(`{"role":"system","content":`), quote(p.SystemMessage)...)
		b.sysMsg = append(b.sysMsg, '}')
	}
	if p.Reminder != "" {
		b.reminder = textBlock(quote(p.Reminder)).Raw
	}
	b.start = make([]int, len(s.Messages))
	st := 0
	for i := range s.Messages {
		if s.Messages[i].Reset {
			st = i
		}
		b.start[i] = st
		if s.Messages[i].Role == Assistant {
			b.asst = append(b.asst, i)
		}
	}
	b.cache = make([][]byte, len(s.Messages))
	b.cacheR = make([][]byte, len(s.Messages))
	switch opt.Protocol {
	case "", ProtoAnthropic:
	case ProtoGemini:
		var err error
		if b.gem, err = newGeminiRenderer(b); err != nil {
			return nil, err
		}
	default:
		var err error
		if b.oai, err = newOAIRenderer(b, opt.Protocol); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Len returns the number of requests: one per assistant message.
func (b *Builder) Len() int {
	if b.cx != nil {
		return len(b.cx.cx.Turns)
	}
	if b.cxg != nil {
		return len(b.cxg.cx.Turns)
	}
	if b.gcli != nil {
		return len(b.gcli.gs.Turns)
	}
	return len(b.asst)
}

// Request builds request k (0 <= k < Len()): the history before the k-th
// assistant message (from the last compaction boundary on), shaped as
// Claude Code sends it (see build for the layout). Requests can be built
// in any order; the same k always gives the same bytes.
func (b *Builder) Request(k int) (*Request, error) {
	if k < 0 || k >= b.Len() {
		return nil, fmt.Errorf("transcript: request %d out of range [0, %d)", k, b.Len())
	}
	if b.cx != nil {
		return b.cx.request(k), nil
	}
	if b.cxg != nil {
		return b.cxg.request(k), nil
	}
	if b.gcli != nil {
		return b.gcli.request(k), nil
	}
	if b.oai != nil {
		return b.oai.request(k, b.p.MaxTokens), nil
	}
	if b.gem != nil {
		return b.gem.request(k), nil
	}
	ai := b.asst[k]
	first := b.start[ai]
	r := &Request{Index: k, Message: ai, First: first, Usage: b.s.Messages[ai].Usage, Model: b.modelFor(ai), Time: b.s.Messages[ai].Time}
	r.Reset = k > 0 && b.start[b.asst[k-1]] != first
	r.Body, r.Stable = b.build(first, ai, r.Model, true)
	return r, nil
}

// modelFor picks the model of request producing message ai.
func (b *Builder) modelFor(ai int) string {
	if b.model != "" {
		return b.model
	}
	m := b.s.Messages[ai].Model
	if m == "" {
		m = b.s.Model
	}
	if !strings.HasPrefix(strings.ToLower(m), "claude") {
		m = b.p.Model
	}
	return m
}

// build writes the body for messages [first, end). The layout follows
// Claude Code 2.1.197 (anthropic/testdata/claude-code-2.1.197-first.json):
// top-level keys model, messages, system, tools, metadata, max_tokens,
// thinking, context_management, output_config, stream; three system text
// blocks with cache_control on the second and third; the system message
// at Profile.SystemMessageIndex; and the third marker on the last block of
// the last user or assistant message. With marked false the request is
// written as the client re-sends it one turn later (no moving marker).
func (b *Builder) build(first, end int, model string, marked bool) ([]byte, int) {
	n := end - first
	size := len(b.tail) + len(model) + 32 + len(b.sysMsg)
	for i := first; i < end; i++ {
		size += len(b.rendered(i, first)) + 1
	}
	body := make([]byte, 0, size+64)
	body = append(body, `{"model":`...)
	body = jsonscan.AppendQuote(body, model)
	body = append(body, `,"messages":[`...)
	stable := -1
	slot := 0
	put := func(msg []byte) {
		if slot > 0 {
			body = append(body, ',')
		}
		body = append(body, msg...)
		slot++
	}
	for i := first; i < end; i++ {
		if b.sysMsg != nil && slot == b.p.SystemMessageIndex {
			put(b.sysMsg)
		}
		if marked && i == end-1 {
			if slot > 0 {
				stable = len(body) + 1
			} else {
				stable = len(body)
			}
			put(b.renderMarked(i, first))
			continue
		}
		put(b.rendered(i, first))
	}
	if b.sysMsg != nil && slot <= b.p.SystemMessageIndex {
		put(b.sysMsg)
	}
	if n == 0 || stable < 0 {
		stable = len(body)
	}
	body = append(body, b.tail...)
	return body, stable
}

// rendered returns message i as sent when it does not carry the marker.
func (b *Builder) rendered(i, first int) []byte {
	withReminder := i == first && b.reminder != nil && b.s.Messages[i].Role == User
	c := b.cache
	if withReminder {
		c = b.cacheR
	}
	if c[i] == nil {
		c[i] = b.appendMessage(nil, i, withReminder, false)
	}
	return c[i]
}

func (b *Builder) renderMarked(i, first int) []byte {
	withReminder := i == first && b.reminder != nil && b.s.Messages[i].Role == User
	return b.appendMessage(nil, i, withReminder, true)
}

// appendMessage writes {"role":...,"content":...}. A user message whose
// only block is a plain text block is sent as a string content unless it
// carries the marker; a marked message is always an array whose last
// block ends with the cache_control member.
func (b *Builder) appendMessage(dst []byte, i int, withReminder, marked bool) []byte {
	m := &b.s.Messages[i]
	dst = append(dst, `{"role":`...)
	dst = jsonscan.AppendQuote(dst, string(m.Role))
	dst = append(dst, `,"content":`...)
	if !marked && !withReminder && m.Role == User && len(m.Blocks) == 1 && m.Blocks[0].plain != nil {
		dst = append(dst, m.Blocks[0].plain...)
		return append(dst, '}')
	}
	dst = append(dst, '[')
	nb := len(m.Blocks)
	if withReminder {
		dst = append(dst, b.reminder...)
		if nb > 0 {
			dst = append(dst, ',')
		}
	}
	for j, blk := range m.Blocks {
		if j > 0 {
			dst = append(dst, ',')
		}
		if marked && j == nb-1 {
			dst = appendMarked(dst, blk.Raw)
		} else {
			dst = append(dst, blk.Raw...)
		}
	}
	return append(dst, ']', '}')
}

// AppendJSON appends message i of the session as a request carries it
// when it is not the message with the moving cache marker (a single plain
// text block of a user message as a string, no reminder block).
func (s *Session) AppendJSON(dst []byte, i int) []byte {
	b := Builder{s: s}
	return b.appendMessage(dst, i, false, false)
}

// buildTail writes everything after the messages array.
func (b *Builder) buildTail() []byte {
	p := &b.p
	t := []byte(`],"system":[`)
	nsys := 0
	for i, text := range p.System {
		if text == "" {
			continue
		}
		if nsys > 0 {
			t = append(t, ',')
		}
		nsys++
		t = append(t, `{"type":"text","text":`...)
		t = jsonscan.AppendQuote(t, text)
		if i > 0 {
			t = append(t, `,"cache_control":{"type":"ephemeral"}`...)
		}
		t = append(t, '}')
	}
	t = append(t, ']')
	if len(p.Tools) > 0 {
		t = append(t, `,"tools":`...)
		t = appendCompact(t, p.Tools)
	}
	uid := []byte(`{"device_id":`)
	uid = jsonscan.AppendQuote(uid, p.DeviceID)
	uid = append(uid, `,"account_uuid":"","session_id":`...)
	uid = jsonscan.AppendQuote(uid, b.s.ClientSessionID)
	uid = append(uid, '}')
	t = append(t, `,"metadata":{"user_id":`...)
	t = jsonscan.AppendQuote(t, string(uid))
	t = append(t, `},"max_tokens":`...)
	t = strconv.AppendInt(t, int64(p.MaxTokens), 10)
	t = append(t, `,"thinking":{"type":"adaptive"},"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}`...)
	if p.Effort != "" {
		t = append(t, `,"output_config":{"effort":`...)
		t = jsonscan.AppendQuote(t, p.Effort)
		t = append(t, '}')
	}
	return append(t, `,"stream":true}`...)
}
