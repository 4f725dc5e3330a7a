// Package tap reads what ctxguard needs (token usage) from model API
// answers as they stream past, without buffering them: SSE splits a
// Server-Sent Events stream into events, Member finds one top-level member
// of a JSON object. Both take the stream in pieces of any size, split
// anywhere, never fail, never retain the slices they are given, and hold a
// bounded number of bytes. Neither is safe for concurrent use. UsageTap
// is the frame of every protocol's usage tap: the protocol says which
// events and which JSON member carry its usage (Usage), the tap does the
// rest.
package tap

import (
	"bytes"
	"mime"
	"strings"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Mode is how an answer's body is read.
type Mode uint8

const (
	Inert     Mode = iota // neither: nothing is read
	EventMode             // text/event-stream
	JSONMode              // application/json and +json types
)

// ModeOf returns how to read an answer with the given Content-Type.
func ModeOf(contentType string) Mode {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(contentType))
	}
	switch {
	case mt == "text/event-stream":
		return EventMode
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return JSONMode
	}
	return Inert
}

// Router sends an answer's bytes to the reader its Content-Type calls for
// (Mode): SSE for an event stream, JSON for a JSON answer, nowhere for
// anything else. Every UsageTap is one.
type Router struct {
	Mode Mode
	SSE  SSE
	JSON Member
}

// Write feeds the next bytes of the answer. It always returns len(p), nil,
// so it can sit behind an io.MultiWriter.
func (r *Router) Write(p []byte) (int, error) {
	switch r.Mode {
	case EventMode:
		r.SSE.Write(p)
	case JSONMode:
		r.JSON.Write(p)
	}
	return len(p), nil
}

// SSE splits a Server-Sent Events stream into events, as the
// specification parses it: lines end with CRLF, LF or CR; a leading byte
// order mark is dropped; "event:" names the event, "data:" lines are
// joined with '\n', a blank line ends the event, ':' lines are comments.
type SSE struct {
	// Want is called with each "event:" line's value and says whether
	// the event's data is needed: the data lines of an unwanted event are
	// skipped without being buffered. Nil wants every event.
	Want func(name []byte) bool
	// Dispatch is called at the end of every event that has data, was
	// wanted, and whose data fit in MaxData: with its name (nil without
	// an "event:" line) and data. The slices are valid during the call.
	Dispatch func(name, data []byte)
	// MaxData bounds a line, and the data of an event, that are buffered;
	// longer ones are dropped. 0 means 64 KiB.
	MaxData int

	line     []byte // the current line, without its terminator
	lineSkip bool   // the current line is dropped (too long or unwanted)
	lineN    int    // bytes of the current line seen so far
	afterCR  bool   // the last byte was '\r', so a '\n' next is part of it
	started  bool   // past the optional byte order mark
	name     []byte // the event's name
	named    bool
	unwanted bool // Want said no to the event
	data     []byte
	hasData  bool
	dataOver bool
}

// Reset makes s ready for a new stream, keeping its buffers and callbacks.
func (s *SSE) Reset() {
	*s = SSE{Want: s.Want, Dispatch: s.Dispatch, MaxData: s.MaxData, line: s.line[:0], name: s.name[:0], data: s.data[:0]}
}

func (s *SSE) max() int {
	if s.MaxData > 0 {
		return s.MaxData
	}
	return 64 << 10
}

// Write feeds the next bytes of the stream. It always returns len(p), nil.
func (s *SSE) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if s.afterCR {
			s.afterCR = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		if !s.started {
			// Strip a leading UTF-8 byte order mark, even split across writes.
			bom := "\xef\xbb\xbf"
			k := min(len(p), len(bom)-s.lineN)
			if string(p[:k]) == bom[s.lineN:s.lineN+k] {
				s.lineN += k
				p = p[k:]
				if s.lineN == len(bom) {
					s.started, s.lineN = true, 0
				}
				continue
			}
			// Not a BOM: replay what was taken as one.
			s.started = true
			prefix := bom[:s.lineN]
			s.lineN = 0
			s.lineBytes([]byte(prefix))
			continue
		}
		nl := bytes.IndexByte(p, '\n')
		seg := p
		if nl >= 0 {
			seg = p[:nl]
		}
		if cr := bytes.IndexByte(seg, '\r'); cr >= 0 {
			s.lineBytes(seg[:cr])
			s.endLine()
			s.afterCR = true
			p = p[cr+1:]
			continue
		}
		s.lineBytes(seg)
		if nl < 0 {
			break
		}
		s.endLine()
		p = p[nl+1:]
	}
	return n, nil
}

// lineBytes adds b to the current line.
func (s *SSE) lineBytes(b []byte) {
	if len(b) == 0 {
		return
	}
	if s.lineN == 0 && s.unwanted && b[0] == 'd' {
		// A data line of an event nobody wants.
		s.lineSkip = true
	}
	s.lineN += len(b)
	if s.lineSkip {
		return
	}
	if s.lineN > s.max() {
		s.lineSkip = true
		head := s.line
		if len(head) < 4 {
			head = append(head, b[:min(len(b), 4-len(head))]...)
		}
		if bytes.HasPrefix(head, []byte("data")) {
			s.dataOver = true // the event's data is incomplete: drop it
		}
		s.line = s.line[:0]
		return
	}
	s.line = append(s.line, b...)
}

// endLine processes the current line.
func (s *SSE) endLine() {
	line, skipped := s.line, s.lineSkip
	s.line, s.lineSkip, s.lineN = s.line[:0], false, 0
	if skipped {
		return
	}
	if len(line) == 0 {
		s.dispatch()
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
		s.name, s.named = append(s.name[:0], value...), true
		s.unwanted = s.Want != nil && !s.Want(s.name)
	case "data":
		if s.dataOver {
			return
		}
		if s.hasData {
			s.data = append(s.data, '\n')
		}
		s.hasData = true
		if len(s.data)+len(value) > s.max() {
			s.dataOver = true
			s.data = s.data[:0]
			return
		}
		s.data = append(s.data, value...)
	}
}

// dispatch ends one event.
func (s *SSE) dispatch() {
	ok := s.hasData && !s.dataOver && !s.unwanted
	var name []byte
	if s.named {
		name = s.name
	}
	if ok && s.Dispatch != nil {
		s.Dispatch(name, s.data)
	}
	s.named, s.unwanted, s.data, s.hasData, s.dataOver = false, false, s.data[:0], false, false
}

// Member finds the top-level member Key of a JSON object streamed in
// pieces and hands its value to Found, with constant state apart from the
// bounded key and value it captures. A value over Max bytes (0: 16 KiB)
// is reported as nil. When the key appears more than once, Found is called
// for each, so the last wins, as in encoding/json.
type Member struct {
	Key   string
	Max   int
	Found func(val []byte)

	state  uint8 // mBegin ...
	depth  int   // open containers
	inStr  bool
	esc    bool   // inside a string, the last byte was an unescaped '\\'
	keyStr bool   // the open string is a top-level key being captured
	key    []byte // the top-level key being read, quotes included (bounded)
	keyBig bool
	want   bool   // the current top-level member is Key
	capt   bool   // capturing the current top-level value into val
	val    []byte // the captured value (bounded)
	valBig bool
}

const (
	mBegin uint8 = iota // before the top-level '{'
	mKey                // at depth 1, expecting a key (or '}')
	mColon              // after a key, expecting ':'
	mValue              // inside a top-level member's value
	mDone               // after the top-level object, or not an object
	maxKey = 64
)

// Reset makes m ready for a new object, keeping its buffers.
func (m *Member) Reset() {
	*m = Member{Key: m.Key, Max: m.Max, Found: m.Found, key: m.key[:0], val: m.val[:0]}
}

func (m *Member) max() int {
	if m.Max > 0 {
		return m.Max
	}
	return 16 << 10
}

// Write feeds the next bytes of the object. It always returns len(p), nil.
func (m *Member) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && m.state != mDone {
		if m.inStr {
			k, closed := m.scanString(p)
			if m.keyStr {
				m.addKey(p[:k])
			} else if m.capt {
				m.addVal(p[:k])
			}
			p = p[k:]
			if closed {
				m.inStr = false
				if m.keyStr {
					m.keyStr = false
					m.want = len(m.key) <= maxKey && !m.keyBig && jsonscan.Valid(m.key) && jsonscan.KeyIs(m.key, jsonscan.Span{Start: 0, End: len(m.key)}, m.Key)
					m.state = mColon
				}
			}
			continue
		}
		c := p[0]
		switch m.state {
		case mBegin:
			switch c {
			case ' ', '\t', '\n', '\r':
			case '{':
				m.depth, m.state = 1, mKey
			default:
				m.state = mDone
			}
			p = p[1:]
			continue
		case mKey:
			switch c {
			case '"':
				m.inStr, m.keyStr = true, true
				m.key, m.keyBig = append(m.key[:0], c), false
			case '}':
				m.state = mDone
			}
			p = p[1:]
			continue
		case mColon:
			if c == ':' {
				m.state = mValue
				m.capt = m.want
				m.val, m.valBig = m.val[:0], false
			}
			p = p[1:]
			continue
		}
		// mValue: track nesting until the member ends at depth 1.
		switch c {
		case '"':
			m.inStr = true
		case '{', '[':
			m.depth++
		case '}', ']':
			m.depth--
		case ',':
			if m.depth == 1 {
				m.endMember()
				m.state = mKey
				p = p[1:]
				continue
			}
		}
		if m.depth == 0 {
			m.endMember()
			m.state = mDone
			break
		}
		if m.capt {
			m.addVal(p[:1])
		}
		p = p[1:]
	}
	return n, nil
}

// scanString consumes string bytes from p up to and including the closing
// quote. It reports how many bytes it consumed and whether the string
// closed.
func (m *Member) scanString(p []byte) (int, bool) {
	i := 0
	for i < len(p) {
		if m.esc {
			m.esc = false
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
			m.esc = true
			continue
		}
		if q < 0 {
			return len(p), false
		}
		return i + q + 1, true
	}
	return i, false
}

func (m *Member) addKey(b []byte) {
	if len(m.key)+len(b) > maxKey {
		m.keyBig = true
		return
	}
	m.key = append(m.key, b...)
}

func (m *Member) addVal(b []byte) {
	if m.valBig {
		return
	}
	if len(m.val)+len(b) > m.max() {
		m.valBig = true
		m.val = m.val[:0]
		return
	}
	m.val = append(m.val, b...)
}

// endMember finishes a top-level member: if it was Key, its captured
// value goes to Found.
func (m *Member) endMember() {
	if !m.want {
		return
	}
	m.want, m.capt = false, false
	if m.Found == nil {
		return
	}
	if m.valBig {
		m.Found(nil)
		return
	}
	m.Found(m.val)
}
