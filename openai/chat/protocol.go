package chat

import (
	"net/http"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/openai"
	"github.com/ctxguard/ctxguard/protocol"
)

// Path is the API's endpoint. A route prefix (/x/<name>/...) is stripped
// by the proxy before protocols see the path.
const Path = "/v1/chat/completions"

// Protocol is OpenAI Chat Completions (POST /v1/chat/completions).
var Protocol protocol.Protocol = chatAPI{}

type chatAPI struct{}

func (chatAPI) Name() string   { return "chat" }
func (chatAPI) Family() string { return openai.Family }

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

func (chatAPI) AppendError(dst []byte, k protocol.Kind, message, id string) []byte {
	return openai.AppendError(dst, k, message, id)
}

// ErrorStatus implements protocol.StatusMapper (openai.ErrorStatus).
func (chatAPI) ErrorStatus(k protocol.Kind, status int) int { return openai.ErrorStatus(k, status) }

// Overflow implements protocol.OverflowReader (openai.Overflow).
func (chatAPI) Overflow(status int, body []byte) (protocol.Overflow, bool) {
	return openai.Overflow(status, body)
}
