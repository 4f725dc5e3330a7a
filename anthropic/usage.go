package anthropic

import (
	"bytes"
	"mime"
	"strconv"
	"strings"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
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
	MaxTapUsage = 16 << 10
)

type tapMode uint8

const (
	tapInert tapMode = iota
	tapSSE
	tapJSON
)

type eventKind uint8

const (
	evNone  eventKind = iota // no event: line yet
	evStart                  // message_start
	evDelta                  // message_delta
	evOther                  // anything else
)

// UsageTap reads token usage from a Messages response body as it streams
// past, without buffering the stream: from the message_start and
// message_delta events of an SSE stream, or from the top-level "usage"
// member of a JSON answer.
//
// Feed it the (decoded) response body in order with Write, in chunks of
// any size split anywhere, then call Usage. It never fails, never retains
// the slices it is given, and holds at most MaxTapLine bytes of SSE data or
// MaxTapUsage bytes of JSON at a time. A UsageTap is not safe for
// concurrent use.
type UsageTap struct {
	mode  tapMode
	u     Usage
	found bool

	// SSE state.
	line     []byte    // the current line, without its terminator
	lineSkip bool      // the current line is dropped (too long or irrelevant)
	lineN    int       // bytes of the current line seen so far
	afterCR  bool      // the last byte was '\r', so a '\n' next is part of it
	started  bool      // past the optional byte order mark
	event    eventKind // from the event's "event:" line
	data     []byte    // the event's data lines, joined with '\n'
	hasData  bool
	dataOver bool

	// JSON state.
	j jsonTap
}

// NewUsageTap returns a tap for a response with the given Content-Type:
// text/event-stream is read as SSE, application/json (and other +json
// types) as a JSON answer; anything else gives a tap that reads nothing.
func NewUsageTap(contentType string) *UsageTap {
	t := &UsageTap{}
	t.Reset(contentType)
	return t
}

// Reset makes t ready for a new response, keeping its buffers.
func (t *UsageTap) Reset(contentType string) {
	line, data := t.line[:0], t.data[:0]
	*t = UsageTap{line: line, data: data, j: jsonTap{key: t.j.key[:0], val: t.j.val[:0]}}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(contentType))
	}
	switch {
	case mt == "text/event-stream":
		t.mode = tapSSE
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		t.mode = tapJSON
	}
}

// Usage returns the usage read so far and whether any was found. For an
// SSE stream it is the message_start usage merged with every later
// message_delta usage; for a JSON answer, the last top-level "usage".
func (t *UsageTap) Usage() (Usage, bool) { return t.u, t.found }

// Write feeds the next bytes of the response body. It always returns
// len(p), nil, so it can sit behind an io.MultiWriter.
func (t *UsageTap) Write(p []byte) (int, error) {
	switch t.mode {
	case tapSSE:
		t.writeSSE(p)
	case tapJSON:
		t.writeJSON(p)
	}
	return len(p), nil
}

// writeSSE splits p into lines (terminated by CRLF, LF or CR, as the SSE
// specification allows) and feeds them to the event parser.
func (t *UsageTap) writeSSE(p []byte) {
	for len(p) > 0 {
		if t.afterCR {
			t.afterCR = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		if !t.started {
			// Strip a leading UTF-8 byte order mark, even split across writes.
			bom := "\xef\xbb\xbf"
			n := min(len(p), len(bom)-t.lineN)
			if string(p[:n]) == bom[t.lineN:t.lineN+n] {
				t.lineN += n
				p = p[n:]
				if t.lineN == len(bom) {
					t.started, t.lineN = true, 0
				}
				continue
			}
			// Not a BOM: replay what was taken as one.
			t.started = true
			prefix := bom[:t.lineN]
			t.lineN = 0
			t.lineBytes([]byte(prefix))
			continue
		}
		nl := bytes.IndexByte(p, '\n')
		seg := p
		if nl >= 0 {
			seg = p[:nl]
		}
		if cr := bytes.IndexByte(seg, '\r'); cr >= 0 {
			t.lineBytes(seg[:cr])
			t.endLine()
			t.afterCR = true
			p = p[cr+1:]
			continue
		}
		t.lineBytes(seg)
		if nl < 0 {
			return
		}
		t.endLine()
		p = p[nl+1:]
	}
}

// lineBytes adds b to the current line.
func (t *UsageTap) lineBytes(b []byte) {
	if len(b) == 0 {
		return
	}
	if t.lineN == 0 && t.event == evOther && b[0] == 'd' {
		// A data line of an event that carries no usage.
		t.lineSkip = true
	}
	t.lineN += len(b)
	if t.lineSkip {
		return
	}
	if t.lineN > MaxTapLine {
		t.lineSkip = true
		head := t.line
		if len(head) < 4 {
			head = append(head, b[:min(len(b), 4-len(head))]...)
		}
		if bytes.HasPrefix(head, []byte("data")) {
			t.dataOver = true // the event's data is incomplete: drop it
		}
		t.line = t.line[:0]
		return
	}
	t.line = append(t.line, b...)
}

// endLine processes the current line.
func (t *UsageTap) endLine() {
	line, skipped := t.line, t.lineSkip
	t.line, t.lineSkip, t.lineN = t.line[:0], false, 0
	if skipped {
		return
	}
	if len(line) == 0 {
		t.dispatch()
		return
	}
	if line[0] == ':' {
		return // comment
	}
	field, value := line, []byte(nil)
	if c := bytes.IndexByte(line, ':'); c >= 0 {
		field, value = line[:c], line[c+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) {
	case "event":
		switch string(value) {
		case "message_start":
			t.event = evStart
		case "message_delta":
			t.event = evDelta
		default:
			t.event = evOther
		}
	case "data":
		if t.dataOver {
			return
		}
		if t.hasData {
			t.data = append(t.data, '\n')
		}
		t.hasData = true
		if len(t.data)+len(value) > MaxTapLine {
			t.dataOver = true
			t.data = t.data[:0]
			return
		}
		t.data = append(t.data, value...)
	}
}

// dispatch handles the end of one event.
func (t *UsageTap) dispatch() {
	ev, data, ok := t.event, t.data, t.hasData && !t.dataOver
	t.event, t.data, t.hasData, t.dataOver = evNone, t.data[:0], false, false
	if !ok || ev == evOther {
		return
	}
	root, err := jsonscan.Root(data)
	if err != nil || jsonscan.KindOf(data, root) != jsonscan.Object {
		return
	}
	if ev == evNone {
		// No event: line; the data's "type" says what it is.
		typ, err := jsonscan.Lookup(data, root, "type")
		switch {
		case err != nil:
			return
		case jsonscan.StringIs(data, typ, "message_start"):
			ev = evStart
		case jsonscan.StringIs(data, typ, "message_delta"):
			ev = evDelta
		default:
			return
		}
	}
	obj := root
	if ev == evStart {
		msg, err := jsonscan.Lookup(data, root, "message")
		if err != nil || jsonscan.KindOf(data, msg) != jsonscan.Object {
			return
		}
		obj = msg
	}
	us, err := jsonscan.Lookup(data, obj, "usage")
	if err != nil || jsonscan.KindOf(data, us) != jsonscan.Object {
		return
	}
	if ev == evStart {
		t.u = Usage{}
	}
	if ParseUsage(&t.u, us.Bytes(data)) {
		t.found = true
	}
}

// jsonTap finds the top-level "usage" member of a JSON object streamed in
// pieces, with constant state apart from the bounded key and value it
// captures.
type jsonTap struct {
	state  uint8 // jsBegin ...
	depth  int   // open containers
	inStr  bool
	esc    bool   // inside a string, the last byte was an unescaped '\\'
	keyStr bool   // the open string is a top-level key being captured
	key    []byte // the top-level key being read, quotes included (bounded)
	keyBig bool
	want   bool   // the current top-level member is "usage"
	capt   bool   // capturing the current top-level value into val
	val    []byte // the captured value (bounded)
	valBig bool
}

const (
	jsBegin   uint8 = iota // before the top-level '{'
	jsKey                  // at depth 1, expecting a key (or '}')
	jsColon                // after a key, expecting ':'
	jsValue                // inside a top-level member's value
	jsDone                 // after the top-level object, or not an object
	maxTapKey = 64
)

func (t *UsageTap) writeJSON(p []byte) {
	j := &t.j
	for len(p) > 0 && j.state != jsDone {
		if j.inStr {
			n, closed := j.scanString(p)
			if j.keyStr {
				j.addKey(p[:n])
			} else if j.capt {
				j.addVal(p[:n])
			}
			p = p[n:]
			if closed {
				j.inStr = false
				if j.keyStr {
					j.keyStr = false
					j.want = len(j.key) <= maxTapKey && !j.keyBig && jsonscan.Valid(j.key) && jsonscan.KeyIs(j.key, jsonscan.Span{Start: 0, End: len(j.key)}, "usage")
					j.state = jsColon
				}
			}
			continue
		}
		c := p[0]
		switch j.state {
		case jsBegin:
			switch c {
			case ' ', '\t', '\n', '\r':
			case '{':
				j.depth, j.state = 1, jsKey
			default:
				j.state = jsDone
			}
			p = p[1:]
			continue
		case jsKey:
			switch c {
			case '"':
				j.inStr, j.keyStr = true, true
				j.key, j.keyBig = append(j.key[:0], c), false
			case '}':
				j.state = jsDone
			}
			p = p[1:]
			continue
		case jsColon:
			if c == ':' {
				j.state = jsValue
				j.capt = j.want
				j.val, j.valBig = j.val[:0], false
			}
			p = p[1:]
			continue
		}
		// jsValue: track nesting until the member ends at depth 1.
		switch c {
		case '"':
			j.inStr = true
		case '{', '[':
			j.depth++
		case '}', ']':
			j.depth--
		case ',':
			if j.depth == 1 {
				t.endMember()
				j.state = jsKey
				p = p[1:]
				continue
			}
		}
		if j.depth == 0 {
			t.endMember()
			j.state = jsDone
			return
		}
		if j.capt {
			j.addVal(p[:1])
		}
		p = p[1:]
	}
}

// scanString consumes string bytes from p up to and including the closing
// quote. It reports how many bytes it consumed and whether the string
// closed.
func (j *jsonTap) scanString(p []byte) (int, bool) {
	i := 0
	for i < len(p) {
		if j.esc {
			j.esc = false
			i++
			continue
		}
		rest := p[i:]
		q := bytes.IndexByte(rest, '"')
		lim := rest
		if q >= 0 {
			lim = rest[:q]
		}
		if b := bytes.IndexByte(lim, '\\'); b >= 0 {
			i += b + 1
			j.esc = true
			continue
		}
		if q < 0 {
			return len(p), false
		}
		return i + q + 1, true
	}
	return i, false
}

func (j *jsonTap) addKey(b []byte) {
	if len(j.key)+len(b) > maxTapKey {
		j.keyBig = true
		return
	}
	j.key = append(j.key, b...)
}

func (j *jsonTap) addVal(b []byte) {
	if j.valBig {
		return
	}
	if len(j.val)+len(b) > MaxTapUsage {
		j.valBig = true
		j.val = j.val[:0]
		return
	}
	j.val = append(j.val, b...)
}

// endMember finishes a top-level member: if it was "usage", its captured
// value replaces what an earlier "usage" gave, as the last duplicate key
// wins in encoding/json.
func (t *UsageTap) endMember() {
	j := &t.j
	if !j.want {
		return
	}
	j.want, j.capt = false, false
	var u Usage
	if !j.valBig && ParseUsage(&u, j.val) {
		t.u, t.found = u, true
		return
	}
	t.u, t.found = Usage{}, false
}
