// Package thinking is the thinking guard: when a session switches to a
// model of another family mid-way (a gateway that routes one conversation
// to Claude, then to GPT, say), the thinking the other family minted is
// removed from its history, which the new model's API would reject or
// misread. Seed 004 (Antigravity) keeps the same kind of signature cache.
//
// # What is a signed block
//
// A thinking block's signature, a redacted_thinking block's data
// (Anthropic Messages), a reasoning item's encrypted_content (OpenAI
// Responses; the adapter leaves the item Opaque and points
// Block.Signature at it) and a part's thoughtSignature (Gemini: on a
// thought, a function call or a text part) are opaque tokens only the
// API that minted them can read. Chat Completions carries reasoning as plain text
// (reasoning_content) without a token: there is nothing to attribute and
// the guard never edits a Chat request.
//
// # Who minted what
//
// The assistant messages a request adds after the previous request of
// its session were written by the previous request's model, so the Guard
// records their signatures under that model's family (model.Family,
// Signatures.Record). The cache is in memory and bounded; an entry lives
// TTL (2 h by default) after its last use, and every request that holds
// a block looks it up, so the blocks of a live session stay attributed
// and their removal stays sticky: request N+1 removes what request N
// removed, as long as the cache holds the entries. A block whose
// signature is unknown (a restarted process, an evicted or expired
// entry, a session the Guard did not see from its start) is kept: the
// safe side. A session idle past the TTL gets its blocks back, but by
// then the prompt cache (5 minutes or 1 hour) has expired too, so the
// change costs no cache write it would not have paid anyway.
//
// The family, not the model, decides because within a family the API
// settles it: Anthropic's preserved-thinking rules
// (https://platform.claude.com/docs/en/build-with-claude/preserved-thinking,
// "Switching models mid-conversation") have each Claude model read its
// own thinking blocks and those of a fixed set of other Claude models,
// and drop a block it cannot read "from that request without an error";
// removing them here would lose the blocks the new model can read. Another
// family's API has no such rule: it rejects or misreads a Claude
// signature, and Anthropic's API an OpenAI encrypted_content.
//
// # What is edited
//
// In every assistant message but the latest (whose thinking the API
// requires byte-identical), the signed blocks the
// cache attributes to a family other than the request's model's are
// removed (pipeline.Request.RemoveBlocks: a message left with nothing is
// rewritten to one short text block, the same edit the clearing pass
// makes). A signed block that stands without its token (Gemini's
// thoughtSignature on a function call or a text part: the Dialect is a
// conversation.Unsigner) keeps its place in every assistant message, the
// latest included, and only loses the token: a Gemini model gets the
// API's documented skip value, another model none (a call removed would
// break its pairing, and a Gemini model refuses a foreign signature in
// the current turn). Nothing else changes, so the body is byte-identical
// outside those blocks. A request that continues a conversation the server keeps
// (Conversation.Continued) holds no history and is left alone.
//
// On a model that binds thinking to its prefix (pipeline.Env.Binding)
// every request asks for drop_block (conversation.DropInvalidThinking),
// not only those that remove something: a removal changes the prefix of
// the blocks after it, a block that comes back after its entry expired
// changes it again, and the setting must not change mid-session.
package thinking

import (
	"errors"
	"fmt"
	"time"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/stub"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass"
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
	// MaxEntries bounds the signatures remembered (about 50 bytes each).
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

// Signed reports whether b carries a token the guard attributes: a
// thinking or redacted_thinking block, or a Responses reasoning item,
// with its token (Block.Signature).
func Signed(b *conversation.Block) bool { return !b.Signature.IsZero() }

// Pass is the compiled guard. It is safe for concurrent use.
type Pass struct{ sigs pass.Signatures }

// New returns the guard over sigs, which says who minted a signed block:
// a Signatures its owner fills (Record).
func New(sigs pass.Signatures) (*Pass, error) {
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
	if r.Env != nil && r.Env.Binding {
		r.Require(conversation.DropInvalidThinking)
	}
	family := model.Family(c.Model)
	last := c.LastAssistant()
	if family == "" || last < 0 || c.Continued {
		return nil, nil
	}
	unsigner, _ := c.Dialect.(conversation.Unsigner)
	var out []splice.Edit
	var drop []int
	for mi := 0; mi <= last; mi++ {
		m := &c.Messages[mi]
		if m.Role != conversation.RoleAssistant {
			continue
		}
		drop = drop[:0]
		for bi := range m.Blocks {
			b := &m.Blocks[bi]
			if !Signed(b) {
				continue
			}
			if fam, ok := p.sigs.Family(c.Bytes(b.Signature)); !ok || fam == family {
				continue
			}
			if unsigner != nil {
				if sp, repl, ok := unsigner.Unsign(c, b, family); ok {
					if repl == nil {
						out = append(out, r.RemoveSpan(sp))
					} else {
						out = append(out, splice.Edit{Span: sp, Repl: repl})
					}
					continue
				}
			}
			if mi < last {
				drop = append(drop, bi)
			}
		}
		out = append(out, r.RemoveBlocks(mi, drop, []byte(stub.RemovedReasoning))...)
	}
	if len(out) > 0 {
		r.Note("thinking-removed")
	}
	return out, nil
}
