package engine

import (
	"errors"
	"hash/maphash"
	"net/http"
	"strconv"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/session"
)

// cacheKey returns the key a request's memo is found under before the
// request is parsed: its protocol and a client's session header, or,
// without one, a hash of the start of the conversation (quickKey). ""
// means the request is not remembered.
func cacheKey(proto protocol.Protocol, h http.Header, body []byte) string {
	for _, name := range session.Headers {
		if v := h.Get(name); v != "" {
			return proto.Name() + "|" + name + ":" + v
		}
	}
	if k, ok := quickKey(body); ok {
		return proto.Name() + "|p:" + strconv.FormatUint(k, 16)
	}
	return ""
}

// errStop ends quickKey's scan.
var errStop = errors.New("stop")

// quickKey hashes what every request of one conversation starts with and
// what a quick scan of the top level finds before the conversation's
// first user turn: the text of the system prompt, when it comes before
// the message list (system, or the Responses instructions), and the role
// and text of each message up to and including the first user message.
// Like session.Key's prefix hash it hashes the JSON string literals of
// the text, so a client's re-encoding of a message (a cache marker
// moved, a string sent as a list of blocks) does not change it; unlike
// it, it scans no further, so its cost does not grow with the history.
// Conversations that start alike (subagents given the same task) share a
// key: that only costs speed, since a memo is used only for what a body
// verifiably repeats. ok is false when the body is not an object with a
// message list (the parse then says what is wrong).
func quickKey(body []byte) (sum uint64, ok bool) {
	var h maphash.Hash
	h.SetSeed(hashSeed)
	_, err := jsonscan.ObjectEach(body, 0, 0, func(k jsonscan.Span, v int) (int, error) {
		switch {
		case jsonscan.KeyIs(body, k, "system") || jsonscan.KeyIs(body, k, "instructions"):
			s, err := jsonscan.ValueAt(body, v, 1)
			if err != nil {
				return 0, err
			}
			h.WriteByte('s')
			texts(&h, body, s)
			return s.End, nil
		case jsonscan.KeyIs(body, k, "messages") || jsonscan.KeyIs(body, k, "input"):
			if i := jsonscan.SkipSpace(body, v); i < len(body) && body[i] == '"' {
				s, err := jsonscan.ValueAt(body, i, 1) // a Responses input string
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
				if content, err := jsonscan.Lookup(body, m, "content"); err == nil {
					texts(&h, body, content)
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
