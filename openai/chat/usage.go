package chat

import (
	"bytes"
	"strconv"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/internal/tap"
	"github.com/ctxguard/ctxguard/protocol"
)

// Bounds on what a UsageTap holds at once: the longest SSE data it
// buffers (longer chunks, such as a large tool call's arguments, are
// skipped; the usage chunk is a few hundred bytes) and the largest JSON
// "usage" value.
const (
	MaxTapLine  = 64 << 10
	MaxTapUsage = tap.MaxUsage
)

// ParseUsage reads a Chat Completions usage object (the value of a
// "usage" member) in protocol terms: prompt_tokens less the cached ones
// is Input, prompt_tokens_details.cached_tokens (or DeepSeek's
// prompt_cache_hit_tokens) is CacheRead, completion_tokens is Output. It
// reports whether raw was an object.
func ParseUsage(raw []byte) (protocol.Usage, bool) {
	var u protocol.Usage
	root, err := jsonscan.Root(raw)
	if err != nil || jsonscan.KindOf(raw, root) != jsonscan.Object {
		return u, false
	}
	num := func(v jsonscan.Span) (int, bool) {
		if jsonscan.KindOf(raw, v) != jsonscan.Number {
			return 0, false
		}
		n, err := strconv.Atoi(string(v.Bytes(raw)))
		return n, err == nil
	}
	var prompt, cached, hit int
	var hasCached, hasHit bool
	it := jsonscan.Members(raw, root)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		switch {
		case jsonscan.KeyIs(raw, k, "prompt_tokens"):
			prompt, _ = num(v)
		case jsonscan.KeyIs(raw, k, "completion_tokens"):
			u.Output, _ = num(v)
		case jsonscan.KeyIs(raw, k, "prompt_cache_hit_tokens"):
			hit, hasHit = num(v)
		case jsonscan.KeyIs(raw, k, "prompt_tokens_details"):
			if jsonscan.KindOf(raw, v) == jsonscan.Object {
				if c, err := jsonscan.Lookup(raw, v, "cached_tokens"); err == nil {
					cached, hasCached = num(c)
				}
			}
		}
	}
	if it.Err() != nil {
		return protocol.Usage{}, false
	}
	if !hasCached && hasHit {
		cached = hit
	}
	cached = min(max(cached, 0), max(prompt, 0))
	u.CacheRead, u.Input = cached, max(prompt-cached, 0)
	return u, true
}

// UsageTap reads token usage from a Chat Completions answer as it streams
// past: from the last chunk of an SSE stream whose "usage" is not null
// (the chunk stream_options.include_usage asks for, before data: [DONE]),
// or from the top-level "usage" of a JSON answer. Feed it the decoded
// body in chunks of any size with Write; it never fails and never retains
// what it is given. It is not safe for concurrent use.
type UsageTap struct{ tap.UsageTap[protocol.Usage] }

// NewUsageTap returns a tap for an answer with the given Content-Type:
// text/event-stream is read as SSE, application/json (and +json types) as
// a JSON answer; anything else gives a tap that reads nothing.
func NewUsageTap(contentType string) *UsageTap {
	t := new(UsageTap)
	tap.Setup(&t.UsageTap, contentType, &usageOf)
	return t
}

// usageOf is where Chat Completions answers carry their usage: every
// chunk may (only those that name usage are parsed).
var usageOf = tap.Usage[protocol.Usage]{Event: event, MaxEvent: MaxTapLine, JSON: ParseUsage}

var usageKey = []byte(`"usage"`)

// event reads one chunk.
func event(_, data []byte, u *protocol.Usage) bool {
	if !bytes.Contains(data, usageKey) {
		return false
	}
	root, err := jsonscan.Root(data)
	if err != nil || jsonscan.KindOf(data, root) != jsonscan.Object {
		return false
	}
	us, err := jsonscan.Lookup(data, root, "usage")
	if err != nil || jsonscan.KindOf(data, us) != jsonscan.Object {
		return false
	}
	got, ok := ParseUsage(us.Bytes(data))
	if ok {
		*u = got
	}
	return ok
}
