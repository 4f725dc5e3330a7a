package responses

import (
	"strconv"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/internal/tap"
	"github.com/ctxguard/ctxguard/protocol"
)

// Bounds on what a UsageTap holds at once.
const (
	// MaxTapEvent is the most data of one SSE event the tap buffers. The
	// response.completed event repeats the whole response, output items
	// (encrypted reasoning included) and all; an event over the bound
	// is skipped and its usage lost.
	MaxTapEvent = 1 << 20
	// MaxTapUsage is the largest JSON "usage" value the tap buffers.
	MaxTapUsage = tap.MaxUsage
)

// UsageTap reads token usage from a Responses answer as it streams past:
// from the response of the response.completed event of an SSE stream
// (response.incomplete and response.failed carry usage too), or from the
// top-level "usage" of a JSON answer. Feed it the decoded body in order,
// split anywhere. It never fails and never retains what it is given. It
// is not safe for concurrent use.
type UsageTap struct{ tap.UsageTap[protocol.Usage] }

// NewUsageTap returns a tap for an answer with the given Content-Type:
// text/event-stream is read as SSE, application/json as a JSON answer,
// anything else not at all.
func NewUsageTap(contentType string) *UsageTap {
	t := new(UsageTap)
	tap.Setup(&t.UsageTap, contentType, &usageOf)
	return t
}

// usageOf is where Responses answers carry their usage: only the final
// events do, so the deltas and items before them are not buffered.
var usageOf = tap.Usage[protocol.Usage]{Want: final, Event: event, MaxEvent: MaxTapEvent, JSON: ParseUsage}

// final reports whether an event type ends a response with its usage.
func final(name []byte) bool {
	switch string(name) {
	case "response.completed", "response.incomplete", "response.failed":
		return true
	}
	return false
}

// event reads one SSE event: without an "event:" line the data's own
// "type" says what it is (Codex dispatches on it too).
func event(name, data []byte, u *protocol.Usage) bool {
	root, err := jsonscan.Root(data)
	if err != nil || jsonscan.KindOf(data, root) != jsonscan.Object {
		return false
	}
	if name == nil {
		typ, err := jsonscan.Lookup(data, root, "type")
		if err != nil || !final(jsonscan.Text(data, typ)) {
			return false
		}
	}
	resp, err := jsonscan.Lookup(data, root, "response")
	if err != nil || jsonscan.KindOf(data, resp) != jsonscan.Object {
		return false
	}
	us, err := jsonscan.Lookup(data, resp, "usage")
	if err != nil {
		return false
	}
	got, ok := ParseUsage(us.Bytes(data))
	if ok {
		*u = got
	}
	return ok
}

// ParseUsage reads a Responses usage object:
//
//	{"input_tokens":N,"input_tokens_details":{"cached_tokens":C},"output_tokens":M,...}
//
// Input is input_tokens less the cached ones (which are CacheRead),
// Output is output_tokens (reasoning included). It reports false when raw
// is not an object.
func ParseUsage(raw []byte) (protocol.Usage, bool) {
	var u protocol.Usage
	root, err := jsonscan.Root(raw)
	if err != nil || jsonscan.KindOf(raw, root) != jsonscan.Object {
		return u, false
	}
	var input, cached int
	it := jsonscan.Members(raw, root)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		switch {
		case jsonscan.KeyIs(raw, k, "input_tokens"):
			input = number(raw, v)
		case jsonscan.KeyIs(raw, k, "output_tokens"):
			u.Output = number(raw, v)
		case jsonscan.KeyIs(raw, k, "input_tokens_details"):
			cached = 0
			if jsonscan.KindOf(raw, v) == jsonscan.Object {
				if c, err := jsonscan.Lookup(raw, v, "cached_tokens"); err == nil {
					cached = number(raw, c)
				}
			}
		}
	}
	if it.Err() != nil {
		return protocol.Usage{}, false
	}
	cached = min(cached, input)
	u.Input, u.CacheRead = input-cached, cached
	return u, true
}

// number returns the non-negative integer at v, or 0.
func number(b []byte, v span) int {
	if jsonscan.KindOf(b, v) != jsonscan.Number {
		return 0
	}
	n, err := strconv.Atoi(string(v.Bytes(b)))
	if err != nil || n < 0 {
		return 0
	}
	return n
}
