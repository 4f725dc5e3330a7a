package clearing

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"sync"

	"github.com/ctxguard/ctxguard/conversation"
)

// memo remembers rendered stubs for the life of the process, keyed by a
// fast hash of what they replace: every request of a session re-sends the
// cleared items, and rendering a stub (a hash for the blob id, a store
// write) should happen once. A stub is a function of its key's inputs, so
// the memo never changes an output. The key includes the blob store's
// epoch (store.Blobs.Epoch): when a blob a stub names was lost, the next
// request renders the stub again, which stores the blob again. The stored
// slices are shared and never modified (splice copies them). Safe for
// concurrent use; bounded.
type memo struct {
	once sync.Once
	seed maphash.Seed
	mu   sync.Mutex
	m    map[uint64]stubEdit
}

// stubEdit is a rendered stub and the blobs it names (splice.Edit.Blob).
type stubEdit struct {
	repl []byte
	blob string
}

const maxMemo = 1 << 16

func (m *memo) key(raw []byte, kind byte, first bool, name []byte, epoch uint64) uint64 {
	m.once.Do(func() { m.seed = maphash.MakeSeed(); m.m = map[uint64]stubEdit{} })
	var h maphash.Hash
	h.SetSeed(m.seed)
	h.Write(raw)
	h.WriteByte(kind)
	if first {
		h.WriteByte(1)
	}
	h.Write(name)
	var e [8]byte
	h.Write(binary.LittleEndian.AppendUint64(e[:0], epoch))
	return h.Sum64() ^ uint64(len(raw))
}

func (m *memo) get(k uint64) (stubEdit, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[k]
	return e, ok
}

func (m *memo) put(k uint64, e stubEdit) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) >= maxMemo {
		clear(m.m)
	}
	m.m[k] = e
}

// toolRule is what the configuration says of one tool: its results may
// be cleared, its inputs may be cleared, its results are file reads.
type toolRule struct{ result, input, read bool }

// toolRules caches toolRule by tool name, so matching the globs costs a
// map lookup on the raw name bytes, without allocating, for every block of
// every request. Safe for concurrent use; bounded.
type toolRules struct {
	decide func(name string) toolRule
	mu     sync.Mutex
	m      map[string]toolRule
}

func (t *toolRules) of(c *conversation.Conversation, b *conversation.Block) toolRule {
	raw := c.Bytes(b.Name)
	if len(raw) < 2 || bytes.IndexByte(raw, '\\') >= 0 {
		return t.decide(c.ToolName(b)) // escaped or absent: decode, uncached
	}
	raw = raw[1 : len(raw)-1]
	t.mu.Lock()
	r, ok := t.m[string(raw)]
	t.mu.Unlock()
	if ok {
		return r
	}
	r = t.decide(string(raw))
	t.mu.Lock()
	if t.m == nil || len(t.m) >= 4096 {
		t.m = map[string]toolRule{}
	}
	t.m[string(raw)] = r
	t.mu.Unlock()
	return r
}
