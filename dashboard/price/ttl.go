package price

import (
	"bytes"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Time-aware cost. A provider keeps a cached prompt prefix for a while
// after its last use (model.Info.CacheTTL): a request that comes later
// finds it gone and writes its whole prompt again. A request may ask for
// the provider's extended lifetime (ExtendedCache); at Anthropic the
// writes of such a request cost more (Price.Extended).

// ExtendedCache reports whether a request body asks for its provider's
// extended prompt-cache lifetime: an Anthropic Messages body with a
// cache_control marker whose "ttl" is "1h" (on the body itself, or on a
// block of system, tools or a message's content), or an OpenAI body
// (Responses or Chat Completions) whose top-level prompt_cache_retention
// is "24h". A body that is not a JSON object asks for nothing.
//
// The whole request is then timed (and, at Anthropic, its writes priced)
// with the extended lifetime, although a request that mixes lifetimes
// keeps only the prefix up to its last 1-hour marker that long: clients
// that ask for the hour mark their whole stable prefix with it.
func ExtendedCache(body []byte) bool {
	long := bytes.Contains(body, []byte(`"ttl"`))
	retain := bytes.Contains(body, []byte(`"prompt_cache_retention"`))
	if !long && !retain {
		return false
	}
	root, err := jsonscan.Root(body)
	if err != nil || jsonscan.KindOf(body, root) != jsonscan.Object {
		return false
	}
	if retain {
		if v, err := jsonscan.Lookup(body, root, "prompt_cache_retention"); err == nil && jsonscan.StringIs(body, v, "24h") {
			return true
		}
	}
	if !long {
		return false
	}
	if hourMarked(body, root) {
		return true
	}
	blocks := func(arr jsonscan.Span) bool {
		it := jsonscan.Elements(body, arr)
		for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
			if jsonscan.KindOf(body, v) == jsonscan.Object && hourMarked(body, v) {
				return true
			}
		}
		return false
	}
	for _, key := range []string{"system", "tools"} {
		if v, err := jsonscan.Lookup(body, root, key); err == nil && blocks(v) {
			return true
		}
	}
	msgs, err := jsonscan.Lookup(body, root, "messages")
	if err != nil {
		return false
	}
	it := jsonscan.Elements(body, msgs)
	for m, ok := it.NextElement(); ok; m, ok = it.NextElement() {
		if jsonscan.KindOf(body, m) != jsonscan.Object {
			continue
		}
		if c, err := jsonscan.Lookup(body, m, "content"); err == nil && blocks(c) {
			return true
		}
	}
	return false
}

// hourMarked reports whether the object at obj has a cache_control
// member whose ttl is "1h".
func hourMarked(body []byte, obj jsonscan.Span) bool {
	cc, err := jsonscan.Lookup(body, obj, "cache_control")
	if err != nil || jsonscan.KindOf(body, cc) != jsonscan.Object {
		return false
	}
	ttl, err := jsonscan.Lookup(body, cc, "ttl")
	return err == nil && jsonscan.StringIs(body, ttl, "1h")
}

// Extended returns the prices of a request that asked for the extended
// cache lifetime: at a provider with a cache-write premium (CacheWrite
// above Input: Anthropic) a write then costs twice the input price
// (platform.claude.com/docs/en/build-with-claude/prompt-caching, "1h
// cache write tokens are 2 times the base input tokens price"), in the
// long-prompt rates too; without a premium (OpenAI's extended retention)
// nothing changes.
func (p Price) Extended() Price {
	if p.CacheWrite > p.Input {
		p.CacheWrite = 2 * p.Input
	}
	if l := p.Long; l != nil && l.CacheWrite > l.Input {
		c := *l
		c.CacheWrite = 2 * c.Input
		p.Long = &c
	}
	return p
}
