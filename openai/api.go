package openai

import (
	"net/http"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/convbuild"
	"github.com/ctxguard/ctxguard/protocol"
)

// API holds the methods the OpenAI APIs' protocols share; each adapter's
// Protocol embeds it: the family, the error shape and status, overflow
// errors, what the engine reads of a request besides its conversation,
// and the calls of ctxguard's own (protocol.Caller, less CallRequest and
// CallAnswer).
type API struct{}

// Family implements protocol.Protocol: Family.
func (API) Family() string { return Family }

// AppendError implements protocol.Protocol (AppendError).
func (API) AppendError(dst []byte, k protocol.Kind, message, id string) []byte {
	return AppendError(dst, k, message, id)
}

// ErrorStatus implements protocol.StatusMapper (ErrorStatus).
func (API) ErrorStatus(k protocol.Kind, status int) int { return ErrorStatus(k, status) }

// Overflow implements protocol.OverflowReader (Overflow).
func (API) Overflow(status int, body []byte) (protocol.Overflow, bool) {
	return Overflow(status, body)
}

// Features implements protocol.Protocol. The anthropic-beta header is
// honoured on the OpenAI APIs too: a Claude model reached through an
// OpenAI-compatible gateway gets the window the client asks for the
// Anthropic way. Claude Code's compaction request is recognized too, for
// the gateways that translate Claude Code's requests (Codex compacts
// through /v1/responses/compact, which is never rewritten).
func (API) Features(h http.Header, c *conversation.Conversation) protocol.Features {
	return protocol.Features{Betas: h.Values("Anthropic-Beta"), ClientCompaction: convbuild.ClientCompaction(c)}
}

// SmallModel implements protocol.Caller (SmallModel).
func (API) SmallModel(id string) string { return SmallModel(id) }

// CallHeader implements protocol.Caller (CallHeader).
func (API) CallHeader(dst, h http.Header) { CallHeader(dst, h) }

// CallKey implements protocol.Caller: the key as a bearer token.
func (API) CallKey(dst http.Header, key string) { dst.Set("Authorization", "Bearer "+key) }
