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
	MaxTapUsage = 16 << 10
)

// UsageTap reads token usage from a Responses answer as it streams past:
// from the response of the response.completed event of an SSE stream
// (response.incomplete and response.failed carry usage too), or from the
// top-level "usage" of a JSON answer. Feed it the decoded body in order,
// split anywhere. It never fails and never retains what it is given. It
// is not safe for concurrent use.
type UsageTap struct {
	r     tap.Router
	u     protocol.Usage
	found bool
}

// NewUsageTap returns a tap for an answer with the given Content-Type:
// text/event-stream is read as SSE, application/json as a JSON answer,
// anything else not at all.
func NewUsageTap(contentType string) *UsageTap {
	t := &UsageTap{r: tap.Router{Mode: tap.ModeOf(contentType)}}
	t.r.SSE = tap.SSE{Want: wantEvent, Dispatch: t.event, MaxData: MaxTapEvent}
	t.r.JSON = tap.Member{Key: "usage", Max: MaxTapUsage, Found: t.jsonUsage}
	return t
}

// Usage returns the usage read so far and whether any was found.
func (t *UsageTap) Usage() (protocol.Usage, bool) { return t.u, t.found }

// Write feeds the next bytes of the answer. It always returns len(p), nil.
func (t *UsageTap) Write(p []byte) (int, error) {
	return t.r.Write(p)
}

// final reports whether an event type ends a response with its usage.
func final(name []byte) bool {
	switch string(name) {
	case "response.completed", "response.incomplete", "response.failed":
		return true
	}
	return false
}

// wantEvent: only the final events carry usage; the deltas and items
// before them are not buffered.
func wantEvent(name []byte) bool { return final(name) }

// event handles one SSE event: without an "event:" line the data's own
// "type" says what it is (Codex dispatches on it too).
func (t *UsageTap) event(name, data []byte) {
	root, err := jsonscan.Root(data)
	if err != nil || jsonscan.KindOf(data, root) != jsonscan.Object {
		return
	}
	if name == nil {
		typ, err := jsonscan.Lookup(data, root, "type")
		if err != nil || !final(jsonscan.Text(data, typ)) {
			return
		}
	}
	resp, err := jsonscan.Lookup(data, root, "response")
	if err != nil || jsonscan.KindOf(data, resp) != jsonscan.Object {
		return
	}
	us, err := jsonscan.Lookup(data, resp, "usage")
	if err != nil {
		return
	}
	if u, ok := ParseUsage(us.Bytes(data)); ok {
		t.u, t.found = u, true
	}
}

// jsonUsage takes a top-level "usage" of a JSON answer; the last wins.
func (t *UsageTap) jsonUsage(val []byte) {
	if u, ok := ParseUsage(val); ok {
		t.u, t.found = u, true
		return
	}
	t.u, t.found = protocol.Usage{}, false
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
