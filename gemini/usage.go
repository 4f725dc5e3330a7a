package gemini

import (
	"bytes"
	"strconv"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/internal/tap"
	"github.com/ctxguard/ctxguard/protocol"
)

// MaxTapEvent bounds the data of one SSE event a UsageTap buffers: a
// chunk of a streamed answer is small; a longer one (a large function
// call's args) is skipped, and the usage is read from the next.
const MaxTapEvent = 64 << 10

// ParseUsage reads a usageMetadata object in protocol terms:
// promptTokenCount (which counts the cached tokens too) less
// cachedContentTokenCount, plus toolUsePromptTokenCount, is Input;
// cachedContentTokenCount is CacheRead; candidatesTokenCount plus
// thoughtsTokenCount is Output. It reports whether raw was an object.
func ParseUsage(raw []byte) (protocol.Usage, bool) {
	var u protocol.Usage
	root, err := jsonscan.Root(raw)
	if err != nil || jsonscan.KindOf(raw, root) != jsonscan.Object {
		return u, false
	}
	num := func(v jsonscan.Span) int {
		if jsonscan.KindOf(raw, v) != jsonscan.Number {
			return 0
		}
		n, err := strconv.Atoi(string(v.Bytes(raw)))
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	var prompt, cached, tool, out, thoughts int
	it := jsonscan.Members(raw, root)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		switch {
		case jsonscan.KeyIs(raw, k, "promptTokenCount"):
			prompt = num(v)
		case jsonscan.KeyIs(raw, k, "cachedContentTokenCount"):
			cached = num(v)
		case jsonscan.KeyIs(raw, k, "toolUsePromptTokenCount"):
			tool = num(v)
		case jsonscan.KeyIs(raw, k, "candidatesTokenCount"):
			out = num(v)
		case jsonscan.KeyIs(raw, k, "thoughtsTokenCount"):
			thoughts = num(v)
		}
	}
	if it.Err() != nil {
		return protocol.Usage{}, false
	}
	cached = min(cached, prompt)
	return protocol.Usage{Input: prompt - cached + tool, CacheRead: cached, Output: out + thoughts}, true
}

// UsageTap reads token usage from a Gemini answer as it streams past:
// the usageMetadata of the last chunk that has one, in an SSE stream
// (?alt=sse: "data: {...}" events), a JSON array stream (the default of
// streamGenerateContent: "[{...},\r\n{...}]") or a single JSON answer
// (generateContent). It holds at most MaxTapEvent bytes of an event or
// tap.MaxUsage bytes of a usageMetadata value at a time, never fails and
// never retains what it is given. It is not safe for concurrent use.
type UsageTap struct {
	mode  tap.Mode
	sse   tap.SSE
	elem  tap.Member // the usageMetadata of the current object
	u     protocol.Usage
	found bool

	// The JSON array stream: which element the bytes belong to.
	started bool // past the leading white space
	array   bool // the answer is an array of objects
	depth   int  // open containers, the array included
	inStr   bool
	esc     bool
}

// NewUsageTap returns a tap for an answer with the given Content-Type:
// text/event-stream is read as SSE, application/json (and +json types)
// as a JSON object or array of objects; anything else gives a tap that
// reads nothing.
func NewUsageTap(contentType string) *UsageTap {
	t := &UsageTap{mode: tap.ModeOf(contentType)}
	t.sse = tap.SSE{MaxData: MaxTapEvent, Dispatch: t.event}
	t.elem = tap.Member{Key: "usageMetadata", Max: tap.MaxUsage, Found: t.usage}
	return t
}

// Usage returns the usage read so far and whether any was found.
func (t *UsageTap) Usage() (protocol.Usage, bool) { return t.u, t.found }

var usageKey = []byte(`"usageMetadata"`)

// event reads one SSE event: a GenerateContentResponse chunk.
func (t *UsageTap) event(_, data []byte) {
	if !bytes.Contains(data, usageKey) {
		return
	}
	root, err := jsonscan.Root(data)
	if err != nil || jsonscan.KindOf(data, root) != jsonscan.Object {
		return
	}
	if v, err := jsonscan.Lookup(data, root, "usageMetadata"); err == nil {
		t.usage(v.Bytes(data))
	}
}

// usage takes the value of a usageMetadata member (nil: too long).
func (t *UsageTap) usage(val []byte) {
	if u, ok := ParseUsage(val); val != nil && ok {
		t.u, t.found = u, true
	}
}

// Write feeds the next bytes of the answer. It always returns len(p), nil.
func (t *UsageTap) Write(p []byte) (int, error) {
	switch t.mode {
	case tap.EventMode:
		t.sse.Write(p)
	case tap.JSONMode:
		t.json(p)
	}
	return len(p), nil
}

// json feeds a JSON answer: an object goes to the member reader as it
// is; in an array, each element object goes to it from its '{' to its
// '}', the reader made new for each.
func (t *UsageTap) json(p []byte) {
	if !t.started {
		i := 0
		for i < len(p) && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n') {
			i++
		}
		if i == len(p) {
			return
		}
		t.started, t.array = true, p[i] == '['
		if !t.array {
			t.elem.Write(p[i:])
			return
		}
		t.depth, p = 1, p[i+1:]
	}
	if !t.array {
		t.elem.Write(p)
		return
	}
	start := -1 // where the bytes of the current element begin in p
	if t.depth > 1 {
		start = 0
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if t.inStr {
			switch {
			case t.esc:
				t.esc = false
			case c == '\\':
				t.esc = true
			case c == '"':
				t.inStr = false
			}
			continue
		}
		switch c {
		case '"':
			t.inStr = true
		case '{', '[':
			if t.depth == 1 {
				t.elem.Reset()
				start = i
			}
			t.depth++
		case '}', ']':
			t.depth--
			if t.depth == 1 && start >= 0 {
				t.elem.Write(p[start : i+1])
				start = -1
			}
			if t.depth <= 0 {
				t.mode = tap.Inert // the array ended
				return
			}
		}
	}
	if start >= 0 {
		t.elem.Write(p[start:])
	}
}
