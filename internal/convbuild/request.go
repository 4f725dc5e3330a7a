package convbuild

import (
	"bytes"
	"errors"
	"hash/maphash"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// errStop ends QuickKey's scan.
var errStop = errors.New("stop")

// QuickKey hashes, with seed, what every request of one conversation
// starts with, from a quick scan of the body's top level
// (protocol.Protocol.QuickKey): the text of the system prompt when it
// comes before the message list (the top-level member system; "" when
// the API has none there), and the role and text of each message of the
// list (the member list) up to and including the first user message; a
// list that is a string (the Responses API's input) is hashed whole.
//
// It hashes the JSON string literals of the text, so a client's
// re-encoding of a message (a cache marker moved, a string sent as a list
// of blocks) does not change the key, and it scans no further than the
// first user message, so its cost does not grow with the history.
// Conversations that start alike share a key. ok is false when the body
// is not an object with a message list before its end.
func QuickKey(seed maphash.Seed, body []byte, system, list string) (sum uint64, ok bool) {
	return QuickKeyOf(seed, body, system, list, "content")
}

// QuickKeyOf is QuickKey for an API whose messages hold their text under
// another member than "content" (Gemini's "parts").
func QuickKeyOf(seed maphash.Seed, body []byte, system, list, content string) (sum uint64, ok bool) {
	var h maphash.Hash
	h.SetSeed(seed)
	_, err := jsonscan.ObjectEach(body, 0, 0, func(k jsonscan.Span, v int) (int, error) {
		switch {
		case system != "" && jsonscan.KeyIs(body, k, system):
			s, err := jsonscan.ValueAt(body, v, 1)
			if err != nil {
				return 0, err
			}
			h.WriteByte('s')
			texts(&h, body, s)
			return s.End, nil
		case jsonscan.KeyIs(body, k, list):
			if i := jsonscan.SkipSpace(body, v); i < len(body) && body[i] == '"' {
				s, err := jsonscan.ValueAt(body, i, 1)
				if err != nil {
					return 0, err
				}
				h.Write(s.Bytes(body))
				return 0, errStop
			}
			_, err := jsonscan.ArrayEach(body, v, 1, func(e int) (int, error) {
				m, err := jsonscan.ValueAt(body, e, 2)
				if err != nil {
					return 0, err
				}
				role, _ := jsonscan.Lookup(body, m, "role")
				h.WriteByte('m')
				h.Write(role.Bytes(body))
				if c, err := jsonscan.Lookup(body, m, content); err == nil {
					texts(&h, body, c)
				}
				if jsonscan.StringIs(body, role, "user") {
					return 0, errStop
				}
				return m.End, nil
			})
			if err == nil {
				err = errStop // no user message: what there was
			}
			return 0, err
		}
		return jsonscan.Skip(body, v, 1)
	})
	if !errors.Is(err, errStop) {
		return 0, false
	}
	return h.Sum64(), true
}

// texts writes to h the text of the value at s: the literal of a string,
// the "text" literals of a list of blocks.
func texts(h *maphash.Hash, body []byte, s jsonscan.Span) {
	switch jsonscan.KindOf(body, s) {
	case jsonscan.String:
		h.Write(s.Bytes(body))
	case jsonscan.Array:
		it := jsonscan.Elements(body, s)
		for e, ok := it.NextElement(); ok; e, ok = it.NextElement() {
			if jsonscan.KindOf(body, e) != jsonscan.Object {
				continue
			}
			if t, err := jsonscan.Lookup(body, e, "text"); err == nil && jsonscan.KindOf(body, t) == jsonscan.String {
				h.Write(t.Bytes(body))
			}
		}
	}
}

// ClientCompactPrompt starts the request Claude Code sends to have its
// own history summarized (/compact and auto-compact, full and partial:
// "... of the conversation so far", "... of the RECENT portion of the
// conversation").
const ClientCompactPrompt = "Your task is to create a detailed summary of the "

// ClientCompaction reports whether c is a client's own compaction
// request: its last user message holds a text block that starts (after
// white space) with ClientCompactPrompt.
func ClientCompaction(c *conversation.Conversation) bool {
	for i := len(c.Messages) - 1; i >= 0; i-- {
		m := &c.Messages[i]
		if m.Role != conversation.RoleUser {
			continue
		}
		for j := range m.Blocks {
			b := &m.Blocks[j]
			if b.Kind != conversation.Text || b.Text.Len() < len(ClientCompactPrompt) {
				continue
			}
			// The string's head as sent: the prompt has nothing to escape,
			// so only leading white space (raw or escaped) comes first.
			head := c.Bytes(conversation.Span{Start: b.Text.Start + 1, End: min(b.Text.End, b.Text.Start+1+64+len(ClientCompactPrompt))})
			for len(head) > 0 {
				if head[0] == ' ' || head[0] == '\t' {
					head = head[1:]
				} else if len(head) > 1 && head[0] == '\\' && (head[1] == 'n' || head[1] == 't' || head[1] == 'r') {
					head = head[2:]
				} else {
					break
				}
			}
			if bytes.HasPrefix(head, []byte(ClientCompactPrompt)) {
				return true
			}
		}
		return false
	}
	return false
}
