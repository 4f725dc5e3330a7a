// Package protocol is the seam between ctxguard's engine and the model
// APIs it speaks. A Protocol is one API's wire format (Anthropic Messages,
// OpenAI Responses, OpenAI Chat Completions): which requests it rewrites,
// how their bodies parse into a conversation (and the next request of a
// session, incrementally), how usage is read from its answers, how errors
// are written in its shape, and how what passes ask for is rendered in
// its bytes (conversation.Dialect).
//
// The proxy, the pipeline and the passes know only this package and
// package conversation; the protocol packages (anthropic, openai/...)
// implement it. A dependency test keeps it that way.
package protocol

import (
	"errors"
	"hash/maphash"
	"net/http"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
)

// Protocol is one model API's wire format. Implementations are stateless
// values, safe for concurrent use.
type Protocol interface {
	// Name is the protocol's short name ("anthropic", "responses",
	// "chat"), used in logs, headers and metrics.
	Name() string
	// Family names the API the protocol belongs to ("anthropic",
	// "openai"): requests of one family go to the same upstream.
	Family() string
	// Claim says how strongly a request belongs to the protocol, from its
	// method, path (after any route prefix) and headers; the proxy
	// dispatches on the strongest claim.
	Claim(method, path string, h http.Header) Claim
	// Rewritable reports whether a request with this method and path
	// carries a body the protocol parses and ctxguard rewrites (given a
	// JSON content type).
	Rewritable(method, path string) bool

	// Parse locates the parts of a request body in one scan. The result
	// aliases body. It fails with an error wrapping ErrShape for valid
	// JSON of another shape.
	Parse(body []byte) (*conversation.Conversation, error)
	// ParseAfter is Parse for a body that repeats the start of an earlier
	// body whose parse is prev: the first stable messages of prev are
	// taken over without scanning them again. The result equals Parse's.
	ParseAfter(body []byte, prev *conversation.Conversation, stable int) (*conversation.Conversation, error)
	// Stable returns how many leading messages of prev lie wholly within
	// the bytes body shares with prev.Body, so ParseAfter may reuse them.
	Stable(prev *conversation.Conversation, body []byte) int

	// QuickKey hashes, with seed, what every request of one conversation
	// starts with, from a quick scan of the start of body: the system
	// prompt when it comes before the message list, and the messages up
	// to and including the first user message, by their text, so that a
	// client's re-encoding of them does not change the key. Its cost does
	// not grow with the history. Conversations that start alike may share
	// a key. ok is false when body does not look like a request of the
	// protocol (Parse then says what is wrong). It is how the engine finds
	// the memory of a session whose requests carry no session header.
	QuickKey(seed maphash.Seed, body []byte) (sum uint64, ok bool)
	// Features returns what the engine reads of a request besides its
	// conversation, as the API and its clients express it: h is the
	// request's header, c its body's parse.
	Features(h http.Header, c *conversation.Conversation) Features

	// NewUsageTap returns a tap that reads the usage of an answer with
	// the given Content-Type as it streams past.
	NewUsageTap(contentType string) UsageTap
	// AppendError appends the body of an error answer in the protocol's
	// shape, with a client-safe message and an error ID.
	AppendError(dst []byte, kind Kind, message, id string) []byte
}

// Features are what a request asks for, or is, beyond its messages.
type Features struct {
	// Betas are the values of the header that turns on beta features of
	// the API (Anthropic's anthropic-beta), each a comma-separated list:
	// some change the model's window (model.Registry.LookupRequest).
	Betas []string
	// ClientCompaction is set when the request is the client's own
	// compaction of its history (Claude Code's /compact and
	// auto-compact): it goes upstream as it came.
	ClientCompaction bool
}

// Claim is how strongly a request belongs to a protocol.
type Claim uint8

const (
	// No: the request is not the protocol's.
	No Claim = iota
	// Maybe: nothing says it is another's (a header of the protocol's
	// API, a path the API shares with others).
	Maybe
	// Yes: a path only the protocol serves.
	Yes
)

// UsageTap reads the token usage of an answer streamed past it. Write
// always returns len(p), nil, never retains p, and buffers a bounded
// amount. A tap is used by one goroutine.
type UsageTap interface {
	Write(p []byte) (int, error)
	// Usage returns what was read so far, and whether anything was.
	Usage() (Usage, bool)
}

// Usage is the token usage an API reported for one answer, in one
// vocabulary for every protocol.
type Usage struct {
	Input      int // input tokens neither read from nor written to the cache
	CacheRead  int // input tokens read from the prompt cache
	CacheWrite int // input tokens written to the prompt cache (Anthropic)
	Output     int // output tokens, reasoning included
}

// PromptTokens is the size of the prompt: every input token, cached or
// not.
func (u Usage) PromptTokens() int { return u.Input + u.CacheRead + u.CacheWrite }

// AppendList adds values to the comma-separated list header name (such
// as anthropic-beta), keeping one header line as the client sent it and
// skipping values it already holds.
func AppendList(h http.Header, name string, values ...string) {
	if len(values) == 0 {
		return
	}
	name = http.CanonicalHeaderKey(name)
	have := map[string]bool{}
	for _, v := range h[name] {
		for f := range strings.SplitSeq(v, ",") {
			have[strings.TrimSpace(f)] = true
		}
	}
	var add []string
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v != "" && !have[v] {
			have[v] = true
			add = append(add, v)
		}
	}
	if len(add) == 0 {
		return
	}
	vs := h[name]
	if len(vs) == 0 {
		h[name] = []string{strings.Join(add, ",")}
		return
	}
	last := vs[len(vs)-1]
	sep := ","
	if strings.TrimSpace(last) == "" {
		sep = ""
	}
	h[name] = append(vs[:len(vs)-1:len(vs)-1], last+sep+strings.Join(add, ","))
}

// ErrShape is wrapped by Parse errors for bodies that are valid JSON but
// not a request of the protocol's shape (no messages array, say). Such
// bodies are forwarded untouched.
var ErrShape = errors.New("not a request of the protocol's shape")

// Pick returns the protocol among protos that claims a request most
// strongly (the first on a tie), or nil when none claims it. A protocol
// that reads part of a request from its path (PathBound) is returned as
// its ForPath(path).
func Pick(protos []Protocol, method, path string, h http.Header) Protocol {
	var best Protocol
	claim := No
	for _, p := range protos {
		if c := p.Claim(method, path, h); c > claim {
			best, claim = p, c
		}
	}
	if pb, ok := best.(PathBound); ok {
		best = pb.ForPath(path)
	}
	return best
}

// PathBound is implemented by protocols whose requests name in their URL
// path what other APIs put in the body: Gemini's model and whether the
// answer streams (/v1beta/models/{model}:streamGenerateContent). ForPath
// returns the protocol for one request's path (after any route prefix):
// the same API, with the same Name and Family, whose Parse sets
// Conversation.Model and Stream from the path where the body does not
// say. Pick applies it; a caller that rewrites bodies without Pick (a
// replay) calls it itself. It is a value, safe for concurrent use.
type PathBound interface {
	ForPath(path string) Protocol
}

// Overflow is what an upstream's context-overflow error says: the size of
// the prompt it refused and the model's limit, in tokens, each 0 when the
// message does not state it.
type Overflow struct{ Tokens, Limit int }

// OverflowReader is implemented by protocols whose context-overflow errors
// ctxguard recognizes, so that it can compact the request and retry it
// once (overflow recovery).
type OverflowReader interface {
	// Overflow reports whether an error answer (its status and the start
	// of its body) says the prompt did not fit the model's window:
	// Anthropic's 400 "prompt is too long: N tokens > M maximum" and 413
	// request_too_large, OpenAI's context_length_exceeded.
	Overflow(status int, body []byte) (Overflow, bool)
}

// Caller is implemented by protocols in which ctxguard can make a model
// call of its own (the compaction summarizer).
type Caller interface {
	// CallRequest returns the path (from the API's root, such as
	// "/v1/messages") and the body of a non-streamed request asking model
	// for an answer of at most maxTokens tokens to the instructions
	// system and the user text.
	CallRequest(model, system, user string, maxTokens int) (path string, body []byte)
	// CallAnswer returns the text and the usage of a 2xx answer to
	// CallRequest, or an error naming what is wrong with it.
	CallAnswer(body []byte) (string, Usage, error)
	// SmallModel returns the small, cheap model of the family of model
	// (claude-haiku-4-5 for Claude models, a mini model for OpenAI's).
	SmallModel(model string) string
	// CallHeader copies into dst what a call needs from the header h of
	// the session's own request to be authorized and understood: its
	// credentials, API version and organization. Nothing else is taken.
	// With h nil it sets what a call needs besides credentials (the API
	// version).
	CallHeader(dst, h http.Header)
	// CallKey sets in dst the credentials of a call made with the API key
	// key, in the header the API takes them in (x-api-key, or
	// Authorization: Bearer).
	CallKey(dst http.Header, key string)
}
