// Package persist moves oversized tool results out of the request: a
// result over the threshold, and the largest results of a user message
// whose results together exceed the message budget, are stored in full
// and replaced by a preview of their head that says where the whole is.
//
// The decision for a result depends only on that result and its message,
// so every request of a session makes the same replacement (a decision
// about old history never changes as turns are appended); the stored copy
// is the original text, before any other pass shortened it (what is
// removed stays retrievable, whole).
package persist

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/internal/stub"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/splice"
	"github.com/ctxguard/ctxguard/store"
)

// Config is the persistence pass's configuration (YAML key `persist`).
type Config struct {
	// Enabled switches the pass. Default true.
	Enabled bool `yaml:"enabled"`
	// Threshold: a tool result text over this many characters is stored
	// and replaced by a preview. Default 50,000 (Claude Code's own).
	Threshold int `yaml:"threshold"`
	// Preview is how many bytes of the head the model still sees.
	// Default 2,048.
	Preview int `yaml:"preview"`
	// MessageBudget: when the tool results of one user message together
	// exceed this many characters, the largest are stored first until the
	// rest fit. Default 200,000. 0 disables the budget.
	MessageBudget int `yaml:"message_budget"`
	// ExcludeTools lists globs of tools whose results are never stored.
	ExcludeTools []string `yaml:"exclude_tools"`
}

// Defaults returns the seeds' figures: 50K characters, a 2 KB preview, a
// 200K-character budget per message.
func Defaults() Config {
	return Config{Enabled: true, Threshold: 50_000, Preview: 2048, MessageBudget: 200_000}
}

// Validate reports every problem in c, joined, or nil.
func (c Config) Validate() error {
	var errs []error
	if c.Threshold < 0 {
		errs = append(errs, fmt.Errorf("threshold: %d is negative", c.Threshold))
	}
	if c.Preview < 0 || (c.Threshold > 0 && c.Preview >= c.Threshold) {
		errs = append(errs, fmt.Errorf("preview: %d must be between 0 and the threshold", c.Preview))
	}
	if c.MessageBudget < 0 {
		errs = append(errs, fmt.Errorf("message_budget: %d is negative", c.MessageBudget))
	}
	for _, g := range c.ExcludeTools {
		if _, err := path.Match(g, ""); err != nil {
			errs = append(errs, fmt.Errorf("exclude_tools: bad glob %q: %w", g, err))
		}
	}
	return errors.Join(errs...)
}

// Pass is the compiled persistence pass. Safe for concurrent use.
type Pass struct {
	cfg   Config
	blobs *store.Blobs
}

// New compiles cfg.
func New(cfg Config, blobs *store.Blobs) (*Pass, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("persist: %w", err)
	}
	if blobs == nil {
		return nil, errors.New("persist: no blob store")
	}
	return &Pass{cfg: cfg, blobs: blobs}, nil
}

// Name implements pipeline.Pass.
func (p *Pass) Name() string { return "persist" }

// PerMessage tells the pipeline that what the pass does to a message
// depends on that message alone.
func (p *Pass) PerMessage() {}

// candidate is one text part of a tool result.
type candidate struct {
	blk   *conversation.Block
	part  conversation.Part
	chars int // characters as earlier passes left the text (upper bound from bytes)
}

// Run implements pipeline.Pass.
func (p *Pass) Run(r *pipeline.Request) ([]splice.Edit, error) {
	if !p.cfg.Enabled {
		return nil, nil
	}
	c := r.Conv
	var out []splice.Edit
	var cands []candidate
	for mi := r.From; mi < len(c.Messages); mi++ {
		m := &c.Messages[mi]
		// A JSON string holds at least as many bytes as its text has
		// characters, so a message whose results are small in bytes needs
		// no closer look: most of them, on every request.
		rawTotal, rawMax := 0, 0
		for bi := range m.Blocks {
			if b := &m.Blocks[bi]; b.Kind == conversation.ToolResult {
				for _, pt := range b.Parts {
					if pt.Kind == conversation.Text {
						rawTotal += pt.Text.Len()
						rawMax = max(rawMax, pt.Text.Len())
					}
				}
			}
		}
		if rawMax <= p.cfg.Threshold && (p.cfg.MessageBudget == 0 || rawTotal <= p.cfg.MessageBudget) {
			continue
		}
		cands = cands[:0]
		total := 0
		for bi := range m.Blocks {
			b := &m.Blocks[bi]
			if b.Kind != conversation.ToolResult {
				continue
			}
			excluded := len(p.cfg.ExcludeTools) > 0 && p.excluded(c, b)
			for _, pt := range b.Parts {
				if pt.Kind != conversation.Text {
					continue
				}
				cur, err := r.Current(pt.Text)
				if err != nil {
					return nil, err
				}
				n := len(cur)
				if n > p.cfg.Preview {
					if n, err = chars(cur); err != nil {
						return nil, err
					}
				}
				total += n
				if !excluded && n > p.cfg.Preview {
					cands = append(cands, candidate{blk: b, part: pt, chars: n})
				}
			}
		}
		for _, cd := range p.choose(cands, total) {
			e, err := p.persist(r, cd)
			if errors.Is(err, store.ErrTooLarge) {
				// Over the store's blob limit: the part stays whole
				// (nothing is removed that cannot be got back).
				r.Note("persist: a result over the store's blob limit stays whole")
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// choose picks the parts to store: every part over the threshold, then,
// while the message is over its budget, the largest remaining ones (ties
// go to the earlier part, so the choice is deterministic).
func (p *Pass) choose(cands []candidate, total int) []candidate {
	var chosen []candidate
	var rest []candidate
	for _, cd := range cands {
		if p.cfg.Threshold > 0 && cd.chars > p.cfg.Threshold {
			chosen = append(chosen, cd)
			total -= cd.chars - p.cfg.Preview
		} else {
			rest = append(rest, cd)
		}
	}
	if p.cfg.MessageBudget > 0 && total > p.cfg.MessageBudget {
		slices.SortStableFunc(rest, func(a, b candidate) int { return b.chars - a.chars })
		for _, cd := range rest {
			if total <= p.cfg.MessageBudget {
				break
			}
			chosen = append(chosen, cd)
			total -= cd.chars - p.cfg.Preview
		}
	}
	return chosen
}

func (p *Pass) excluded(c *conversation.Conversation, b *conversation.Block) bool {
	name := c.ToolName(b)
	for _, g := range p.cfg.ExcludeTools {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// persist stores the original text of a part and returns the edit that
// replaces the part with a preview of its current text.
func (p *Pass) persist(r *pipeline.Request, cd candidate) (splice.Edit, error) {
	c := r.Conv
	ref, err := p.blobs.KeepFrom(r.Context(), c.Bytes(cd.part.Text), func(raw []byte) ([]byte, error) { return jsonscan.AppendUnquote(nil, raw) })
	if err != nil {
		return splice.Edit{}, err
	}
	cur, err := r.Current(cd.part.Text)
	if err != nil {
		return splice.Edit{}, err
	}
	text, err := jsonscan.AppendUnquote(nil, cur)
	if err != nil {
		return splice.Edit{}, err
	}
	head := text[:cutUTF8(text, p.cfg.Preview)]
	var b strings.Builder
	name := c.ToolName(cd.blk)
	if name == "" {
		name = "tool"
	}
	fmt.Fprintf(&b, "<ctxguard-persisted>\nThis %s result was %s characters, too large to keep in context; ctxguard stored it whole.\n", name, stub.Commas(ref.Chars))
	where := []string{}
	if ref.Path != "" {
		where = append(where, "read the file "+ref.Path)
	}
	if ref.URL != "" {
		where = append(where, "GET "+ref.URL)
	}
	if len(where) == 0 {
		where = append(where, "ctxguard blob "+ref.ID)
	}
	fmt.Fprintf(&b, "To see all of it, %s (use offsets or grep for parts).\nPreview (first %s bytes):\n", strings.Join(where, ", or "), stub.Commas(len(head)))
	b.Write(head)
	b.WriteString("\n…\n</ctxguard-persisted>")
	return splice.Edit{Span: cd.part.Text, Repl: jsonscan.AppendQuote(nil, b.String()), Blob: ref.ID}, nil
}

// chars counts the characters of a JSON string literal without decoding
// it into a new buffer: each escape is one character (a surrogate pair,
// two escapes, counts as two, an upper bound that only matters at the
// threshold's edge and is the same on every request).
func chars(q []byte) (int, error) {
	if len(q) < 2 {
		return 0, errors.New("persist: not a string")
	}
	n := 0
	raw := q[1 : len(q)-1]
	for i := 0; i < len(raw); {
		switch c := raw[i]; {
		case c == '\\':
			if i+1 < len(raw) && raw[i+1] == 'u' {
				i += 6
			} else {
				i += 2
			}
			n++
		case c < utf8.RuneSelf:
			i++
			n++
		default:
			_, size := utf8.DecodeRune(raw[i:])
			i += size
			n++
		}
	}
	return n, nil
}

// cutUTF8 returns the largest n <= max such that b[:n] ends on a rune
// boundary.
func cutUTF8(b []byte, max int) int {
	if len(b) <= max {
		return len(b)
	}
	n := max
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return n
}
