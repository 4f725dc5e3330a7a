// Package session names the agent session a request belongs to.
//
// A key names the request's protocol first, so requests of different
// protocols never share a session, whatever ids or prompts they have in
// common: a client's session header or prompt can be reused by another
// client that speaks another API. After it comes, in order of preference: a client's session header
// (Claude Code's x-claude-code-session-id, Codex's session-id or thread-id,
// opencode's x-session-id), a session id the body carries (the Dialect's
// SessionID: the session_id inside Anthropic's metadata.user_id, the
// Responses prompt_cache_key), and else a hash of the request's stable prefix (system
// prompt and first user message), which every request of a session shares.
// Keys are only for bookkeeping: no rewrite decision depends on them.
package session

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
)

// Headers that carry a client's own session id, most specific first.
var Headers = []string{"X-Claude-Code-Session-Id", "Session-Id", "Thread-Id", "X-Session-Id"}

// Key returns the session key of a request of protocol proto (a
// protocol.Protocol's Name: "anthropic", "responses", "chat"). c may be
// nil when the body was not understood; then only headers are used and ""
// may be returned. A key is proto, then where the id came from ("h:" a
// header, "m:" the body's session id, "p:" the prefix hash), then the id
// cut to 128 bytes, so it is safe in logs and file names after hashing:
// "anthropic:h:0b4c…".
func Key(proto string, h http.Header, c *conversation.Conversation) string {
	for _, name := range Headers {
		if v := strings.TrimSpace(h.Get(name)); v != "" {
			return proto + ":h:" + clip(v)
		}
	}
	if c == nil {
		return ""
	}
	if c.Dialect != nil {
		if id := c.Dialect.SessionID(c); id != "" {
			return proto + ":m:" + clip(id)
		}
	}
	return proto + ":p:" + prefixHash(c)
}

func clip(s string) string {
	if len(s) > 128 {
		s = s[:128]
	}
	return s
}

// prefixHash hashes the system prompt and the text of the first user
// message. It uses the JSON string literals of the text, so the moving
// cache_control marker and the client's string-or-array re-encoding of a
// message do not change the key.
func prefixHash(c *conversation.Conversation) string {
	h := sha256.New()
	h.Write(c.Bytes(c.System))
	for _, m := range c.Messages {
		if m.Role != conversation.RoleUser {
			continue
		}
		for _, b := range m.Blocks {
			if b.Kind == conversation.Text {
				h.Write(c.Bytes(b.Text))
				h.Write([]byte{0})
			}
		}
		break
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}
