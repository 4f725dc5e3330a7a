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
	MaxTapUsage = 16 << 10
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
type UsageTap struct {
	r     tap.Router
	u     protocol.Usage
	found bool
}

// NewUsageTap returns a tap for an answer with the given Content-Type:
// text/event-stream is read as SSE, application/json (and +json types) as
// a JSON answer; anything else gives a tap that reads nothing.
func NewUsageTap(contentType string) *UsageTap {
	t := &UsageTap{r: tap.Router{Mode: tap.ModeOf(contentType)}}
	t.r.SSE = tap.SSE{Dispatch: t.event, MaxData: MaxTapLine}
	t.r.JSON = tap.Member{Key: "usage", Max: MaxTapUsage, Found: t.jsonUsage}
	return t
}

// Usage returns the usage read so far and whether any was found.
func (t *UsageTap) Usage() (protocol.Usage, bool) { return t.u, t.found }

// Write feeds the next bytes of the answer. It always returns len(p), nil.
func (t *UsageTap) Write(p []byte) (int, error) {
	return t.r.Write(p)
}

var usageKey = []byte(`"usage"`)

// event reads one chunk: only those that name usage are parsed.
func (t *UsageTap) event(_, data []byte) {
	if !bytes.Contains(data, usageKey) {
		return
	}
	root, err := jsonscan.Root(data)
	if err != nil || jsonscan.KindOf(data, root) != jsonscan.Object {
		return
	}
	us, err := jsonscan.Lookup(data, root, "usage")
	if err != nil || jsonscan.KindOf(data, us) != jsonscan.Object {
		return
	}
	if u, ok := ParseUsage(us.Bytes(data)); ok {
		t.u, t.found = u, true
	}
}

// jsonUsage takes a top-level "usage" of a JSON answer; the last one wins,
// as in encoding/json.
func (t *UsageTap) jsonUsage(val []byte) {
	if u, ok := ParseUsage(val); val != nil && ok {
		t.u, t.found = u, true
		return
	}
	t.u, t.found = protocol.Usage{}, false
}
