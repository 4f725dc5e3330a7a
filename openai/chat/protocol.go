package chat

import (
	"hash/maphash"
	"net/http"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/convbuild"
	"github.com/ctxguard/ctxguard/openai"
	"github.com/ctxguard/ctxguard/protocol"
)

// Path is the API's endpoint. A route prefix (/x/<name>/...) is stripped
// by the proxy before protocols see the path.
const Path = "/v1/chat/completions"

// Protocol is OpenAI Chat Completions (POST /v1/chat/completions).
var Protocol protocol.Protocol = chatAPI{}

type chatAPI struct{ openai.API }

func (chatAPI) Name() string { return "chat" }

// Claim implements protocol.Protocol: the endpoint is the API's own;
// anything else is the OpenAI family's claim (openai.Claim).
func (chatAPI) Claim(method, path string, h http.Header) protocol.Claim {
	if path == Path {
		return protocol.Yes
	}
	return openai.Claim(path, h)
}

// Rewritable implements protocol.Protocol: POST /v1/chat/completions.
func (chatAPI) Rewritable(method, path string) bool {
	return method == http.MethodPost && path == Path
}

func (chatAPI) Parse(body []byte) (*conversation.Conversation, error) { return Parse(body) }

func (chatAPI) ParseAfter(body []byte, prev *conversation.Conversation, stable int) (*conversation.Conversation, error) {
	return ParseAfter(body, prev, stable)
}

func (chatAPI) Stable(prev *conversation.Conversation, body []byte) int { return Stable(prev, body) }

func (chatAPI) NewUsageTap(contentType string) protocol.UsageTap { return NewUsageTap(contentType) }

// QuickKey implements protocol.Protocol: the messages up to the first
// user message, system and developer messages included
// (convbuild.QuickKey).
func (chatAPI) QuickKey(seed maphash.Seed, body []byte) (uint64, bool) {
	return convbuild.QuickKey(seed, body, "", "messages")
}
