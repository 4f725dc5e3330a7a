package tap

// MaxUsage is the largest JSON "usage" value a UsageTap buffers; a usage
// object is a few hundred bytes.
const MaxUsage = 16 << 10

// Usage says how a protocol's answers carry their token usage, in the
// protocol's own vocabulary U; a UsageTap reads it.
type Usage[U any] struct {
	// Want is the SSE reader's Want: which named events carry usage
	// (nil: every event).
	Want func(name []byte) bool
	// Event reads one SSE event (name is nil without an "event:" line)
	// into u, which holds what earlier events gave, and reports whether
	// it found usage.
	Event func(name, data []byte, u *U) bool
	// MaxEvent bounds the data of one event that is buffered (SSE.MaxData).
	MaxEvent int
	// JSON reads the value of a JSON answer's top-level "usage" member;
	// ok is false when it is not a usage object.
	JSON func(val []byte) (u U, ok bool)
}

// UsageTap reads the token usage of an answer as it streams past,
// without buffering the stream: from the events of an SSE stream, or
// from the top-level "usage" member of a JSON answer (the last one wins,
// as in encoding/json), as its Usage says. It holds at most MaxEvent
// bytes of an event or MaxUsage bytes of JSON at a time, never fails and
// never retains what it is given. It is not safe for concurrent use.
type UsageTap[U any] struct {
	r     Router
	u     U
	found bool
}

// Setup readies t, a protocol's tap, for an answer with the given
// Content-Type (ModeOf): text/event-stream is read as SSE with how's
// Event, application/json (and +json types) as a JSON answer with how's
// JSON, anything else not at all. (A function, not a method, so that the
// taps that embed a UsageTap do not offer it.)
func Setup[U any](t *UsageTap[U], contentType string, how *Usage[U]) {
	t.r.Mode = ModeOf(contentType)
	t.r.SSE = SSE{Want: how.Want, MaxData: how.MaxEvent, Dispatch: func(name, data []byte) {
		if how.Event(name, data, &t.u) {
			t.found = true
		}
	}}
	t.r.JSON = Member{Key: "usage", Max: MaxUsage, Found: func(val []byte) {
		var zero U
		t.u, t.found = zero, false
		if u, ok := how.JSON(val); val != nil && ok {
			t.u, t.found = u, true
		}
	}}
}

// Reset makes t ready for a new answer with the given Content-Type,
// keeping its buffers and what it reads with.
func (t *UsageTap[U]) Reset(contentType string) {
	var zero U
	t.u, t.found = zero, false
	t.r.SSE.Reset()
	t.r.JSON.Reset()
	t.r.Mode = ModeOf(contentType)
}

// Usage returns the usage read so far and whether any was found.
func (t *UsageTap[U]) Usage() (U, bool) { return t.u, t.found }

// Write feeds the next bytes of the answer. It always returns len(p), nil,
// so it can sit behind an io.MultiWriter.
func (t *UsageTap[U]) Write(p []byte) (int, error) { return t.r.Write(p) }
