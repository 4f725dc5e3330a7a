package engine

import (
	"net/http"
	"strconv"

	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/session"
)

// cacheKey returns the key a request's memo is found under before the
// request is parsed: its protocol and a client's session header, or,
// without one, a hash of the start of the conversation
// (protocol.Protocol.QuickKey). "" means the request is not remembered.
// Conversations that start alike (subagents given the same task) share a
// key: that only costs speed, since a cached session is used only for
// what a body verifiably repeats.
func cacheKey(proto protocol.Protocol, h http.Header, body []byte) string {
	for _, name := range session.Headers {
		if v := h.Get(name); v != "" {
			return proto.Name() + "|" + name + ":" + v
		}
	}
	if k, ok := proto.QuickKey(hashSeed, body); ok {
		return proto.Name() + "|p:" + strconv.FormatUint(k, 16)
	}
	return ""
}
