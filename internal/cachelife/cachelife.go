// Package cachelife reads, from a request body, how long the request asks
// its provider to keep its prompt cache: Anthropic's cache_control
// "ttl":"1h" and OpenAI's prompt_cache_retention "24h". The lifetimes
// themselves are in the model registry (model.Info.CacheTTL).
package cachelife

import (
	"bytes"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Extended reports whether a request body asks for its provider's
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
func Extended(body []byte) bool {
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
