package anthropic

import (
	"strconv"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/internal/tap"
)

// Usage is the token usage the API reports for one Messages response.
type Usage struct {
	InputTokens              int // uncached input tokens
	CacheCreationInputTokens int // input tokens written to the prompt cache
	CacheReadInputTokens     int // input tokens read from the prompt cache
	OutputTokens             int
}

// PromptTokens reports the size of the prompt in tokens: uncached, cache
// written and cache read input tokens together.
func (u Usage) PromptTokens() int {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

// ParseUsage reads a usage object (the value of a "usage" member). Fields
// that are absent, null or not integers are left as they are in u, so a
// message_delta's usage can be merged over a message_start's, as the API
// documents (message_delta counts are cumulative). It reports whether raw
// was an object.
func ParseUsage(u *Usage, raw []byte) bool {
	root, err := jsonscan.Root(raw)
	if err != nil || jsonscan.KindOf(raw, root) != jsonscan.Object {
		return false
	}
	it := jsonscan.Members(raw, root)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		var dst *int
		switch {
		case jsonscan.KeyIs(raw, k, "input_tokens"):
			dst = &u.InputTokens
		case jsonscan.KeyIs(raw, k, "cache_creation_input_tokens"):
			dst = &u.CacheCreationInputTokens
		case jsonscan.KeyIs(raw, k, "cache_read_input_tokens"):
			dst = &u.CacheReadInputTokens
		case jsonscan.KeyIs(raw, k, "output_tokens"):
			dst = &u.OutputTokens
		default:
			continue
		}
		if jsonscan.KindOf(raw, v) != jsonscan.Number {
			continue
		}
		if n, err := strconv.Atoi(string(v.Bytes(raw))); err == nil {
			*dst = n
		}
	}
	return it.Err() == nil
}

// Bounds on what a UsageTap holds at once.
const (
	// MaxTapLine is the longest SSE line (and the most data of one event)
	// the tap buffers. Longer lines are skipped; message_start and
	// message_delta events are a few hundred bytes.
	MaxTapLine = 64 << 10
	// MaxTapUsage is the largest JSON "usage" value the tap buffers.
	MaxTapUsage = tap.MaxUsage
)

// UsageTap reads token usage from a Messages response body as it streams
// past, without buffering the stream: from the message_start and
// message_delta events of an SSE stream, or from the top-level "usage"
// member of a JSON answer.
//
// Feed it the (decoded) response body in order with Write, in chunks of
// any size split anywhere, then call Usage: for an SSE stream it is the
// message_start usage merged with every later message_delta usage; for a
// JSON answer, the last top-level "usage". Reset readies it for another
// response, keeping its buffers. It never fails, never retains the slices
// it is given, and holds at most MaxTapLine bytes of SSE data or
// MaxTapUsage bytes of JSON at a time. A UsageTap is not safe for
// concurrent use.
type UsageTap struct{ tap.UsageTap[Usage] }

// NewUsageTap returns a tap for a response with the given Content-Type:
// text/event-stream is read as SSE, application/json (and other +json
// types) as a JSON answer; anything else gives a tap that reads nothing.
func NewUsageTap(contentType string) *UsageTap {
	t := new(UsageTap)
	tap.Setup(&t.UsageTap, contentType, &usageOf)
	return t
}

// usageOf is where Messages answers carry their usage.
var usageOf = tap.Usage[Usage]{Want: wantEvent, Event: event, MaxEvent: MaxTapLine, JSON: jsonUsage}

// wantEvent: only message_start and message_delta carry usage.
func wantEvent(name []byte) bool {
	return string(name) == "message_start" || string(name) == "message_delta"
}

// event reads one SSE event's data into u.
func event(name, data []byte, u *Usage) bool {
	root, err := jsonscan.Root(data)
	if err != nil || jsonscan.KindOf(data, root) != jsonscan.Object {
		return false
	}
	start := string(name) == "message_start"
	if name == nil {
		// No event: line; the data's "type" says what it is.
		typ, err := jsonscan.Lookup(data, root, "type")
		switch {
		case err != nil:
			return false
		case jsonscan.StringIs(data, typ, "message_start"):
			start = true
		case jsonscan.StringIs(data, typ, "message_delta"):
		default:
			return false
		}
	}
	obj := root
	if start {
		msg, err := jsonscan.Lookup(data, root, "message")
		if err != nil || jsonscan.KindOf(data, msg) != jsonscan.Object {
			return false
		}
		obj = msg
	}
	us, err := jsonscan.Lookup(data, obj, "usage")
	if err != nil || jsonscan.KindOf(data, us) != jsonscan.Object {
		return false
	}
	if start {
		*u = Usage{}
	}
	return ParseUsage(u, us.Bytes(data))
}

// jsonUsage reads a top-level "usage" value of a JSON answer.
func jsonUsage(val []byte) (Usage, bool) {
	var u Usage
	ok := ParseUsage(&u, val)
	return u, ok
}
