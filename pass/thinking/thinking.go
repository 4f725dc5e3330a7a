// Package thinking is the thinking guard: when a session switches to a
// model of another family mid-way (a gateway that routes one conversation
// to Claude, then to GPT, say), thinking blocks the other family minted
// are removed from its history, which the new model's API would reject or
// misread. Seed 004 (Antigravity) keeps the same kind of signature cache.
//
// Who minted a block is known from the session itself: the assistant
// message a request adds after the previous request of its session was
// written by the previous request's model, so the Guard records the
// signatures of its thinking blocks under that model's family (Record).
// The cache is in memory, bounded, and its entries live TTL after their
// last use (a sliding TTL, 2 h by default), so the blocks of a live
// session stay attributed and their removal stays sticky. A block whose
// signature is unknown (a restart, an evicted entry) is kept: the safe
// side. Blocks of the latest assistant message are never touched (BRIEF
// principle 2), and a thinking block inside a compacted span goes with
// the span.
//
// Claude models accept each other's signatures (Anthropic: thinking
// blocks from an earlier turn are passed back as they were, whatever
// Claude model made them), so the family, not the model, decides.
// OpenAI's reasoning items are opaque in the Responses adapter and never
// edited here.
package thinking

import (
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/splice"
)

// Config is the guard's configuration (YAML key `thinking_guard`).
type Config struct {
	// Enabled switches the guard on.
	Enabled bool `yaml:"enabled"`
	// TTL is how long a signature stays attributed after its last use.
	// Default 2h.
	TTL time.Duration `yaml:"ttl"`
	// MaxEntries bounds the signatures remembered (about 64 bytes each).
	// Default 100000.
	MaxEntries int `yaml:"max_entries"`
}

// Defaults returns the guard's shipped configuration.
func Defaults() Config { return Config{Enabled: true, TTL: 2 * time.Hour, MaxEntries: 100_000} }

// Validate reports every problem in c, or nil.
func (c Config) Validate() error {
	if c.TTL <= 0 || c.MaxEntries <= 0 {
		return fmt.Errorf("ttl (%v) and max_entries (%d) must be positive", c.TTL, c.MaxEntries)
	}
	return nil
}

// Signatures remembers who minted thinking blocks: the model family, by a
// hash of the block's signature. Safe for concurrent use.
type Signatures struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu sync.Mutex
	m  map[uint64]entry
}

type entry struct {
	family string
	used   time.Time
}

var seed = maphash.MakeSeed()

// NewSignatures returns an empty cache for cfg; now is the clock (nil:
// time.Now).
func NewSignatures(cfg Config, now func() time.Time) *Signatures {
	if now == nil {
		now = time.Now
	}
	return &Signatures{ttl: cfg.TTL, max: cfg.MaxEntries, now: now, m: map[uint64]entry{}}
}

// Record attributes the signature sig (its bytes as sent) to family.
func (s *Signatures) Record(family string, sig []byte) {
	if family == "" || len(sig) == 0 {
		return
	}
	h := maphash.Bytes(seed, sig)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[h]; !ok && len(s.m) >= s.max {
		s.evictLocked(now)
	}
	s.m[h] = entry{family: family, used: now}
}

// Family returns who minted the block with signature sig, refreshing the
// entry, or false when unknown (or expired).
func (s *Signatures) Family(sig []byte) (string, bool) {
	h := maphash.Bytes(seed, sig)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[h]
	if !ok {
		return "", false
	}
	if now.Sub(e.used) >= s.ttl {
		delete(s.m, h)
		return "", false
	}
	e.used = now
	s.m[h] = e
	return e.family, true
}

// Len reports how many signatures are remembered.
func (s *Signatures) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// evictLocked drops expired entries, and if none expired, the oldest
// tenth.
func (s *Signatures) evictLocked(now time.Time) {
	var oldest time.Time
	for h, e := range s.m {
		if now.Sub(e.used) >= s.ttl {
			delete(s.m, h)
		} else if oldest.IsZero() || e.used.Before(oldest) {
			oldest = e.used
		}
	}
	if len(s.m) < s.max {
		return
	}
	cut := oldest.Add(now.Sub(oldest) / 10)
	for h, e := range s.m {
		if !e.used.After(cut) {
			delete(s.m, h)
		}
	}
	for h := range s.m { // all used at once: drop any
		if len(s.m) < s.max {
			break
		}
		delete(s.m, h)
	}
}

// Pass is the compiled guard. It is safe for concurrent use.
type Pass struct{ sigs *Signatures }

// New returns the guard over sigs.
func New(sigs *Signatures) (*Pass, error) {
	if sigs == nil {
		return nil, errors.New("thinking: no signature cache")
	}
	return &Pass{sigs: sigs}, nil
}

// Name implements pipeline.Pass.
func (p *Pass) Name() string { return "thinking" }

// Run implements pipeline.Pass.
func (p *Pass) Run(r *pipeline.Request) ([]splice.Edit, error) {
	c := r.Conv
	family := model.Family(c.Model)
	last := c.LastAssistant()
	if family == "" || last < 0 {
		return nil, nil
	}
	var out []splice.Edit
	for mi := 0; mi < last; mi++ {
		m := &c.Messages[mi]
		if m.Role != conversation.RoleAssistant {
			continue
		}
		var drop []int
		for bi := range m.Blocks {
			b := &m.Blocks[bi]
			if (b.Kind != conversation.Thinking && b.Kind != conversation.RedactedThinking) || b.Signature.IsZero() {
				continue
			}
			if fam, ok := p.sigs.Family(c.Bytes(b.Signature)); ok && fam != family {
				drop = append(drop, bi)
			}
		}
		if len(drop) == 0 || len(drop) == len(m.Blocks) {
			continue // a message of nothing but thinking keeps it (rare)
		}
		for _, bi := range drop {
			out = append(out, r.RemoveBlock(mi, bi))
		}
	}
	if len(out) > 0 {
		r.Note("thinking-removed")
		if r.Env != nil && r.Env.Binding {
			r.Require(conversation.DropInvalidThinking)
		}
	}
	return out, nil
}
