// Package session names the agent session a request belongs to.
//
// The key is, in order of preference: a client's session header
// (Claude Code's x-claude-code-session-id, Codex's session-id or thread-id,
// opencode's x-session-id), the session_id inside Anthropic's
// metadata.user_id, and else a hash of the request's stable prefix (system
// prompt and first user message), which every request of a session shares.
// Keys are only for bookkeeping: no rewrite decision depends on them.
package session

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Headers that carry a client's own session id, most specific first.
var Headers = []string{"X-Claude-Code-Session-Id", "Session-Id", "Thread-Id", "X-Session-Id"}

// Key returns the session key of a request. c may be nil when the body was
// not understood; then only headers are used and "" may be returned.
// Keys from clients are prefixed with where they came from and cut to 128
// bytes so they are safe in logs and file names after hashing.
func Key(h http.Header, c *conversation.Conversation) string {
	for _, name := range Headers {
		if v := strings.TrimSpace(h.Get(name)); v != "" {
			return "h:" + clip(v)
		}
	}
	if c == nil {
		return ""
	}
	if id := metadataSession(c); id != "" {
		return "m:" + clip(id)
	}
	return "p:" + prefixHash(c)
}

func clip(s string) string {
	if len(s) > 128 {
		s = s[:128]
	}
	return s
}

// metadataSession extracts session_id from metadata.user_id, which Claude
// Code sends as a JSON string holding a JSON object, and older versions as
// "user_<hash>_account_<id>_session_<uuid>".
func metadataSession(c *conversation.Conversation) string {
	if c.Metadata.Value.IsZero() {
		return ""
	}
	v, err := jsonscan.Lookup(c.Body, c.Metadata.Value, "user_id")
	if err != nil {
		return ""
	}
	uid := c.String(v)
	if uid == "" {
		return ""
	}
	if strings.HasPrefix(uid, "{") {
		var m struct {
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal([]byte(uid), &m) == nil {
			return m.SessionID
		}
		return ""
	}
	if i := strings.LastIndex(uid, "_session_"); i >= 0 {
		return uid[i+len("_session_"):]
	}
	return ""
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
