package anthropic

import (
	"hash/maphash"
	"net/http"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/convbuild"
	"github.com/ctxguard/ctxguard/protocol"
)

// Protocol is the Anthropic Messages API (POST /v1/messages).
var Protocol protocol.Protocol = messagesAPI{}

type messagesAPI struct{}

func (messagesAPI) Name() string   { return "anthropic" }
func (messagesAPI) Family() string { return "anthropic" }

// Claim implements protocol.Protocol: the Messages and legacy Complete
// endpoints are the API's own; any request carrying an anthropic-version
// or anthropic-beta header (every SDK sends the first) may be.
func (messagesAPI) Claim(method, path string, h http.Header) protocol.Claim {
	if path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/") || path == "/v1/complete" {
		return protocol.Yes
	}
	if h.Get("Anthropic-Version") != "" || h.Get("Anthropic-Beta") != "" {
		return protocol.Maybe
	}
	return protocol.No
}

// Rewritable implements protocol.Protocol: POST /v1/messages (with any
// query, such as Claude Code's ?beta=true).
func (messagesAPI) Rewritable(method, path string) bool {
	return method == http.MethodPost && path == "/v1/messages"
}

func (messagesAPI) Parse(body []byte) (*conversation.Conversation, error) { return Parse(body) }

func (messagesAPI) ParseAfter(body []byte, prev *conversation.Conversation, stable int) (*conversation.Conversation, error) {
	return ParseAfter(body, prev, stable)
}

func (messagesAPI) Stable(prev *conversation.Conversation, body []byte) int {
	return Stable(prev, body)
}

// QuickKey implements protocol.Protocol: the top-level system, then the
// messages up to the first user message (convbuild.QuickKey).
func (messagesAPI) QuickKey(seed maphash.Seed, body []byte) (uint64, bool) {
	return convbuild.QuickKey(seed, body, "system", "messages")
}

// Features implements protocol.Protocol: the anthropic-beta header's
// values, and Claude Code's compaction request (convbuild.ClientCompaction).
func (messagesAPI) Features(h http.Header, c *conversation.Conversation) protocol.Features {
	return protocol.Features{Betas: h.Values("Anthropic-Beta"), ClientCompaction: convbuild.ClientCompaction(c)}
}

// SettingsMembers are the top-level members of a request that the
// Dialect's Settings may add or change: "thinking", where the thinking
// binding's drop_block goes.
var SettingsMembers = []string{"thinking"}

func (messagesAPI) NewUsageTap(contentType string) protocol.UsageTap {
	return usageTap{NewUsageTap(contentType)}
}

func (messagesAPI) AppendError(dst []byte, k protocol.Kind, message, id string) []byte {
	return AppendErrorJSON(dst, ErrorType(k), message, id)
}

// usageTap gives a UsageTap's usage in protocol terms.
type usageTap struct{ *UsageTap }

func (t usageTap) Usage() (protocol.Usage, bool) {
	u, ok := t.UsageTap.Usage()
	return u.Protocol(), ok
}

// Protocol returns u in protocol terms.
func (u Usage) Protocol() protocol.Usage {
	return protocol.Usage{Input: u.InputTokens, CacheRead: u.CacheReadInputTokens, CacheWrite: u.CacheCreationInputTokens, Output: u.OutputTokens}
}
