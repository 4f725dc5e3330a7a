package responses

import (
	"hash/maphash"
	"net/http"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/convbuild"
	"github.com/ctxguard/ctxguard/openai"
	"github.com/ctxguard/ctxguard/protocol"
)

// Protocol is the OpenAI Responses API (POST /v1/responses).
var Protocol protocol.Protocol = responsesAPI{}

type responsesAPI struct{ openai.API }

func (responsesAPI) Name() string { return "responses" }

// Claim implements protocol.Protocol: /v1/responses and everything under
// it (a response by id, compact, input_items, the WebSocket upgrade) are
// the API's own; any other request is the OpenAI family's as
// openai.Claim says.
func (responsesAPI) Claim(method, path string, h http.Header) protocol.Claim {
	if path == "/v1/responses" || strings.HasPrefix(path, "/v1/responses/") {
		return protocol.Yes
	}
	return openai.Claim(path, h)
}

// Rewritable implements protocol.Protocol: only POST /v1/responses.
// /v1/responses/compact and the rest are forwarded untouched.
func (responsesAPI) Rewritable(method, path string) bool {
	return method == http.MethodPost && path == "/v1/responses"
}

func (responsesAPI) Parse(body []byte) (*conversation.Conversation, error) { return Parse(body) }

func (responsesAPI) ParseAfter(body []byte, prev *conversation.Conversation, stable int) (*conversation.Conversation, error) {
	return ParseAfter(body, prev, stable)
}

func (responsesAPI) Stable(prev *conversation.Conversation, body []byte) int {
	return Stable(prev, body)
}

func (responsesAPI) NewUsageTap(contentType string) protocol.UsageTap {
	return NewUsageTap(contentType)
}

// QuickKey implements protocol.Protocol: the top-level instructions, then
// the input items up to the first user message, or a string input
// (convbuild.QuickKey).
func (responsesAPI) QuickKey(seed maphash.Seed, body []byte) (uint64, bool) {
	return convbuild.QuickKey(seed, body, "instructions", "input")
}
