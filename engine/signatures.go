package engine

import (
	"hash/maphash"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pass/thinking"
)

// extendsPrev reports whether c continues prev, the previous request of
// its session (a parse without its body, whose body's fingerprint is p): c has
// more messages, starts with prev's system prompt, holds every message of
// prev but its last byte for byte, and the last (which the client may
// re-encode, a string as a list of blocks, a cache marker moved) with the
// same role and text. stable is what the incremental parse found: when it
// covers those messages, the bytes were verified already; when the model
// or another early member changed length, the offsets moved and the
// messages are compared by their hashes. A message's bytes after its first
// are hashed (fingerprint): for a JSON value they determine the first too (an
// object ends with '}', an array with ']', a string with '"').
func extendsPrev(prev *conversation.Conversation, p *fingerprint, c *conversation.Conversation, stable int) bool {
	n := len(prev.Messages)
	if n == 0 || len(c.Messages) <= n || len(p.sums) != 2*n {
		return false
	}
	if stable > 0 && stable >= n-1 {
		return true
	}
	if maphash.Bytes(hashSeed, c.Bytes(c.System)) != p.sys {
		return false
	}
	for i := 0; i < n-1; i++ {
		ps, cs := prev.Messages[i].Span, c.Messages[i].Span
		if ps.Len() != cs.Len() || maphash.Bytes(hashSeed, c.Body[cs.Start+1:cs.End]) != p.sums[2*i+1] {
			return false
		}
	}
	return prev.Messages[n-1].Role == c.Messages[n-1].Role && textSum(c, n-1) == p.last
}

// recordSignatures attributes the signed blocks (thinking.Signed: thinking
// blocks, Responses reasoning items) of the assistant messages c holds
// from message from on (those the answer to the session's previous
// request added) to the family of that request's model, for the
// thinking guard.
func (e *Engine) recordSignatures(c *conversation.Conversation, from int, prevModel string) {
	fam := model.Family(prevModel)
	for mi := from; mi < len(c.Messages); mi++ {
		m := &c.Messages[mi]
		if m.Role != conversation.RoleAssistant {
			continue
		}
		for bi := range m.Blocks {
			if b := &m.Blocks[bi]; thinking.Signed(b) {
				e.sigs.Record(fam, c.Bytes(b.Signature))
			}
		}
	}
}
