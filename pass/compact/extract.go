package compact

import "github.com/ctxguard/ctxguard/conversation"

// Extract returns the LLM-free summary of messages [from, to) of c, with
// prev (the previous summary, or "") folded in, in at most budget tokens.
// It is deterministic: the same messages and prev give the same text.
func Extract(c *conversation.Conversation, from, to int, prev string, budget int) string {
	panic("not implemented")
}
