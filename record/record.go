// Package record defines the one record ctxguard keeps of every exchange
// it rewrites (a request to a model API and its answer), and the Bus its
// observers subscribe to.
//
// An Exchange is filled in two steps on the request's goroutine: the
// Rewriter fills what the rewrite decided (protocol, model, session,
// passes, token estimates, stubs), the proxy what the transport saw
// (durations, status, usage, bytes, recovery). Then it is published once,
// and from then on it is immutable: every observer (statistics, session
// statistics, the calibration, the log, Prometheus metrics, the
// dashboard) reads the same value, and nothing is counted anywhere else.
package record

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/ctxguard/ctxguard/protocol"
)

// Outcome is what happened to a request's body.
type Outcome string

const (
	// Rewritten: the body sent upstream differs from the client's.
	Rewritten Outcome = "rewritten"
	// Unchanged: the body went through the passes and came out as it
	// was (or it was a dry run: Skipped says SkipDryRun).
	Unchanged Outcome = "unchanged"
	// Bypassed: the body was not rewritten by design (Skipped says why:
	// the bypass header, invalid JSON, another shape, a client's own
	// compaction, buffers full).
	Bypassed Outcome = "bypassed"
	// FailedOpen: a pass failed and the client's body went upstream
	// untouched; ErrorID names the log line with the failure.
	FailedOpen Outcome = "failed_open"
	// Recovered: the upstream refused the request as too long,
	// ctxguard retried it compacted, and the retry succeeded (a 2xx
	// answer; the figures are the retry's).
	Recovered Outcome = "recovered"
	// RecoveryFailed: the upstream refused the request as too long, and
	// ctxguard's recovery did not get it through: the compacted retry
	// was refused too (the figures are the retry's, the client got the
	// retry's answer), could not be sent, or there was nothing smaller
	// to send (the client got the first answer). Reason says which.
	RecoveryFailed Outcome = "recovery_failed"
	// Refused: ctxguard answered the request itself with an error (a
	// body over the limit, too slow, an upstream unreachable or timing
	// out, a wrong token); ErrorID is the ID the client saw.
	Refused Outcome = "refused"
)

// Outcomes lists every Outcome, for labels and tables.
var Outcomes = []Outcome{Rewritten, Unchanged, Bypassed, FailedOpen, Recovered, RecoveryFailed, Refused}

// Why an edit event happened (Exchange.Cause).
const (
	// CauseThreshold: the history grew past a rule's trigger (clearing's
	// trigger, compaction's swap line) and the edit pays for the cache
	// write it costs.
	CauseThreshold = "threshold"
	// CauseCold: the request found its prompt cache expired, so the edit
	// cost no cache write (an edit that was due waited for it, or one
	// that would not pay at a warm cache was made).
	CauseCold = "cold"
	// CauseOverflow: the request would not have fitted the model's
	// window (its prompt above the window less the output reserve).
	CauseOverflow = "overflow"
	// CauseRecovery: the retry of a request the upstream refused as too
	// long.
	CauseRecovery = "recovery"
)

// Exchange is the record of one exchange. The JSON names are the log's
// and the dashboard's.
type Exchange struct {
	// Seq numbers the exchanges of a process from 1, in publishing order.
	Seq uint64 `json:"seq"`
	// Start is when the request arrived.
	Start time.Time `json:"start"`

	Protocol string `json:"protocol,omitempty"` // "anthropic", "responses", "chat", "gemini"
	Route    string `json:"route,omitempty"`    // a named route ("openrouter"), "" for the family's upstream
	Path     string `json:"path,omitempty"`     // the API path, after a route's prefix
	Client   string `json:"client,omitempty"`   // Client(User-Agent): "claude-code", "codex", ...
	Session  string `json:"session,omitempty"`  // the session key (package session)
	// Model is the model the request names; ModelID its registry entry
	// (canonical id); Family the bounded name metrics use.
	Model   string `json:"model,omitempty"`
	ModelID string `json:"model_id,omitempty"`
	Family  string `json:"family,omitempty"`
	// Window and MaxOutput are the model's limits the rewrite used.
	Window    int `json:"window,omitempty"`
	MaxOutput int `json:"max_output,omitempty"`

	Outcome Outcome `json:"outcome"`
	// Skipped says why a body was not rewritten ("bypass", "invalid
	// json", SkipDryRun, "overloaded", ...). In a dry run, Passes, Notes,
	// Event and Compaction describe the rewrite that was computed and not
	// sent, and WouldSend its size.
	Skipped string `json:"skipped,omitempty"`
	// ErrorID is the ID of the failure (a pass that failed open, or the
	// error answer the client saw); the log line with the detail has it.
	ErrorID string `json:"error_id,omitempty"`
	// Error is ctxguard's own error, for the log (never sent to a
	// client).
	Error string `json:"error,omitempty"`
	// Reason says why a recovery failed (outcome recovery_failed): what
	// the compacted retry got, or why there was none. It names figures
	// and statuses, never request content.
	Reason string `json:"reason,omitempty"`

	// Passes lists what each pass did, in pipeline order.
	Passes []Pass `json:"passes,omitempty"`
	// Notes are the passes' decisions, for debug logs (never request
	// content).
	Notes []string `json:"notes,omitempty"`
	// Event: history before the newest turn changed (an edit event: the
	// prompt cache is written again from there).
	Event bool `json:"event,omitempty"`
	// Cause says why the edit event happened (Event set): one of the
	// Cause* constants.
	Cause string `json:"cause,omitempty"`
	// Cold: the request arrived after its session's prompt cache had
	// expired (CacheTTL after the session's previous request), so the
	// upstream writes its whole prompt to the cache whatever ctxguard
	// sends. The engine decides it once per request and stores it.
	Cold bool `json:"cold,omitempty"`
	// CacheTTL is how long the provider keeps the request's cached
	// prompt, as the request was timed: its model's lifetime, or the
	// longer one the request asked for (Anthropic's cache_control
	// "ttl":"1h", OpenAI's prompt_cache_retention "24h"), which is read
	// only when the session's previous request came longer ago than the
	// model's lifetime (before, the request is warm either way). 0 when
	// the request was not parsed.
	CacheTTL time.Duration `json:"cache_ttl,omitempty"`
	// Compaction is the store key of the compaction this request carries
	// for the first time, or "".
	Compaction string `json:"compaction,omitempty"`
	// Stubs are the items of the body sent that ctxguard replaced with a
	// stub naming a blob, in body order.
	Stubs []Stub `json:"stubs,omitempty"`

	// TokensBefore and TokensAfter are ctxguard's estimates of the prompt
	// as the client sent it and as ctxguard sent it.
	TokensBefore int `json:"tokens_before"`
	TokensAfter  int `json:"tokens_after"`
	// TokensAdded is the part of TokensAfter ctxguard added on purpose
	// rather than in place of content: the API settings a rule needs
	// (the thinking binding's drop_block, about 17 tokens a request). It
	// is no loss of savings: Saved counts what the rules took out.
	TokensAdded int `json:"tokens_added,omitempty"`
	// WouldSend and WouldAdd are set in a dry run only (DryRun): the
	// estimate of the prompt ctxguard would have sent, and the part of it
	// it would have added on purpose. The client's body went, so
	// TokensAfter is TokensBefore.
	WouldSend int `json:"would_send,omitempty"`
	WouldAdd  int `json:"would_add,omitempty"`
	// CalibratedBefore and CalibratedAfter are the same in the API's
	// tokens: from the usage the API reported when there is one (After
	// is then the reported prompt, Before scaled by the same ratio), else
	// through the calibration learned so far.
	CalibratedBefore int `json:"calibrated_before"`
	CalibratedAfter  int `json:"calibrated_after"`

	// Durations. Read: the request body's arrival (from the request's
	// start). Rewrite: the time ctxguard added (decoding and rewriting).
	// FirstByte: from the request's start to the upstream's answer
	// headers. Total: the whole exchange.
	Read      time.Duration `json:"read_ns"`
	Rewrite   time.Duration `json:"rewrite_ns"`
	FirstByte time.Duration `json:"first_byte_ns"`
	Total     time.Duration `json:"total_ns"`

	// Status is the status the client got (0: none, the client left).
	Status int `json:"status"`
	// Usage is what the API reported for a 2xx answer, nil when it
	// reported none.
	Usage *protocol.Usage `json:"usage,omitempty"`

	// Bytes: the request body as received (decoded), as sent upstream,
	// and the answer's body as relayed.
	BytesIn   int64 `json:"bytes_in"`
	BytesOut  int64 `json:"bytes_out"`
	BytesResp int64 `json:"bytes_resp"`

	// Bodies holds the request bodies before and after, only when the
	// configuration asks for them (log.dump_bodies, dashboard.show_bodies).
	Bodies *Bodies `json:"-"`
}

// Pass is what one pass did to one request.
type Pass struct {
	Name  string `json:"name"`
	Edits int    `json:"edits"`
	// Saved is the bytes the pass's edits removed, net of what they put
	// in place (a stub, a summary); negative when they added more.
	Saved int `json:"saved_bytes"`
	// Added is the bytes the API settings the pass required (the
	// thinking binding's drop_block) added to the body: on purpose, not
	// in place of content, and not counted in Saved (negative if a
	// setting replaced a longer value).
	Added int `json:"added_bytes,omitempty"`
}

// Stub is one item ctxguard replaced with a stub that names a blob.
type Stub struct {
	Blob  string `json:"blob"`  // the blob id (store.ValidID)
	Bytes int    `json:"bytes"` // the item's size as the client sent it
	// Sent is the stub's size as sent.
	Sent int `json:"sent"`
	// Head is the first StubHeadMax bytes of the stub as sent (a JSON
	// value), copied; Text decodes it when someone looks. ctxguard's
	// text, but a persisted result's preview holds a few lines of the
	// result.
	Head []byte `json:"-"`
}

// Text returns the stub's head as text (StubText).
func (s Stub) Text() string { return StubText(s.Head) }

// StubTextMax bounds Stub.Text; StubHeadMax bounds Stub.Head, leaving
// room for the escapes of a string literal; MaxStubs bounds the stubs one
// record keeps (the rest are counted in the passes' figures).
const (
	StubTextMax = 400
	StubHeadMax = StubTextMax * 3 / 2
	MaxStubs    = 2000
)

// StubText returns the head of a stub as sent, repl (a JSON value: a
// string literal, or an array or object for a replaced content list), as
// text of at most StubTextMax bytes: a string literal is decoded (as far
// as its head goes; \uXXXX escapes of surrogate pairs become U+FFFD),
// anything else is returned as JSON. It reads at most about
// 2×StubTextMax bytes of repl, so it costs the same for any size.
func StubText(repl []byte) string {
	if len(repl) == 0 || repl[0] != '"' {
		return validHead(repl, StubTextMax)
	}
	var b strings.Builder
	for i := 1; i < len(repl) && b.Len() < StubTextMax; i++ {
		c := repl[i]
		if c == '"' {
			break
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(repl) {
			break
		}
		i++
		switch repl[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'b', 'f':
		case 'u':
			if i+4 >= len(repl) {
				i = len(repl)
				continue
			}
			r := rune(0)
			for _, h := range repl[i+1 : i+5] {
				r <<= 4
				switch {
				case h >= '0' && h <= '9':
					r |= rune(h - '0')
				case h >= 'a' && h <= 'f':
					r |= rune(h - 'a' + 10)
				case h >= 'A' && h <= 'F':
					r |= rune(h - 'A' + 10)
				}
			}
			if utf16.IsSurrogate(r) {
				r = utf8.RuneError
			}
			b.WriteRune(r)
			i += 4
		default:
			b.WriteByte(repl[i])
		}
	}
	return validHead([]byte(b.String()), StubTextMax)
}

// validHead returns at most n bytes of b as valid UTF-8, cut at a rune
// boundary, invalid bytes replaced with U+FFFD.
func validHead(b []byte, n int) string {
	v := strings.ToValidUTF8(string(b[:min(len(b), n)]), "\uFFFD")
	if len(v) <= n {
		return v
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return v[:cut]
}

// Bodies are a request's bodies, copied, for the dashboard's request page.
type Bodies struct {
	Before, After []byte
}

// SkipDryRun is Skipped in a dry run (configuration dry_run): the
// rewrite was computed, and the client's body went.
const SkipDryRun = "dry run"

// DryRun reports whether x is of a dry run (see SkipDryRun).
func (x *Exchange) DryRun() bool { return x.Skipped == SkipDryRun }

// Saved returns the estimated tokens ctxguard's rules took out of the
// prompt (net of the stubs and summaries put in their place): how much
// smaller the prompt got, plus what was added on purpose (TokensAdded),
// which is shown apart and never as a negative saving. 0 in a dry run,
// where nothing was taken out (see WouldSave).
func (x *Exchange) Saved() int { return x.TokensBefore - x.TokensAfter + x.TokensAdded }

// WouldSave returns, in a dry run, the tokens the rules would have taken
// out (as Saved counts them), and 0 otherwise.
func (x *Exchange) WouldSave() int {
	if !x.DryRun() || x.WouldSend == 0 {
		return 0
	}
	return x.TokensBefore - x.WouldSend + x.WouldAdd
}

// Applied returns the names of the passes that made edits.
func (x *Exchange) Applied() []string {
	var n []string
	for _, p := range x.Passes {
		if p.Edits > 0 {
			n = append(n, p.Name)
		}
	}
	return n
}

// Observer receives every published Exchange. Observe runs on the
// request's goroutine after the answer reached the client: it must be
// quick, must not block, must not modify x, and may keep x (it is never
// modified again).
type Observer interface {
	Observe(x *Exchange)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(*Exchange)

// Observe calls f.
func (f ObserverFunc) Observe(x *Exchange) { f(x) }

// Bus hands every published Exchange to its observers, in the order they
// subscribed. The zero Bus has none. A Bus is safe for concurrent use;
// observers may subscribe at any time.
type Bus struct {
	mu  sync.Mutex
	obs atomic.Pointer[[]*subscription]
	seq atomic.Uint64
}

// subscription is one Subscribe call (observers need not be comparable).
type subscription struct{ o Observer }

// Subscribe adds o. It returns a func that removes it.
func (b *Bus) Subscribe(o Observer) (cancel func()) {
	s := &subscription{o}
	b.update(func(cur []*subscription) []*subscription { return append(cur[:len(cur):len(cur)], s) })
	return func() {
		b.update(func(cur []*subscription) []*subscription {
			var keep []*subscription
			for _, v := range cur {
				if v != s {
					keep = append(keep, v)
				}
			}
			return keep
		})
	}
}

// update replaces the observer list with f of it (copy on write).
func (b *Bus) update(f func([]*subscription) []*subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var cur []*subscription
	if p := b.obs.Load(); p != nil {
		cur = *p
	}
	next := f(cur)
	b.obs.Store(&next)
}

// Publish numbers x (Seq) and hands it to every observer. x must not be
// modified afterwards.
func (b *Bus) Publish(x *Exchange) {
	x.Seq = b.seq.Add(1)
	p := b.obs.Load()
	if p == nil {
		return
	}
	for _, s := range *p {
		s.o.Observe(x)
	}
}

// Client names the client that sent a request from its User-Agent, in a
// small fixed set: "claude-code", "codex", "opencode", "gemini-cli",
// "anthropic-sdk", "openai-sdk", "curl", "other", or "" when there is
// none.
func Client(userAgent string) string {
	ua := strings.ToLower(userAgent)
	switch {
	case ua == "":
		return ""
	case strings.HasPrefix(ua, "claude-cli/") || strings.Contains(ua, "claude-code"):
		return "claude-code"
	case strings.HasPrefix(ua, "codex") || strings.Contains(ua, "codex_cli") || strings.Contains(ua, "codex-"):
		return "codex"
	case strings.Contains(ua, "opencode"):
		return "opencode"
	case strings.Contains(ua, "geminicli") || strings.Contains(ua, "gemini-cli"):
		return "gemini-cli"
	case strings.HasPrefix(ua, "anthropic/"):
		return "anthropic-sdk"
	case strings.HasPrefix(ua, "openai/"):
		return "openai-sdk"
	case strings.HasPrefix(ua, "curl/"):
		return "curl"
	}
	return "other"
}
