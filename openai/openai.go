// Package openai holds what ctxguard's two OpenAI protocol adapters share:
// the API's error shape and the family's claim on requests. The adapters
// themselves are openai/responses (the Responses API, Codex CLI) and
// openai/chat (Chat Completions, opencode and most OpenAI-compatible
// clients).
package openai

import (
	"net/http"
	"strings"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/protocol"
)

// Family is the protocol family of the OpenAI APIs: their requests go to
// one upstream (config upstreams.openai).
const Family = "openai"

// errorType and errorCode are the API's names for each kind of error.
var errorType = [...]struct{ typ, code string }{
	protocol.Internal:       {"server_error", ""},
	protocol.InvalidRequest: {"invalid_request_error", ""},
	protocol.Authentication: {"invalid_request_error", "invalid_api_key"},
	protocol.Permission:     {"invalid_request_error", "permission_denied"},
	protocol.NotFound:       {"invalid_request_error", "not_found"},
	protocol.TooLarge:       {"invalid_request_error", "request_too_large"},
	protocol.RateLimited:    {"requests", "rate_limit_exceeded"},
	protocol.Overloaded:     {"server_error", "overloaded"},
	protocol.GatewayTimeout: {"server_error", "timeout"},
}

// AppendError appends an error body in the OpenAI APIs' shape:
//
//	{"error":{"message":"...","type":"invalid_request_error","param":null,"code":"request_too_large"}}
func AppendError(dst []byte, k protocol.Kind, message, id string) []byte {
	t := errorType[protocol.Internal]
	if int(k) < len(errorType) && errorType[k].typ != "" {
		t = errorType[k]
	}
	dst = append(dst, `{"error":{"message":`...)
	dst = jsonscan.AppendQuote(dst, message)
	dst = append(dst, `,"type":`...)
	dst = jsonscan.AppendQuote(dst, t.typ)
	dst = append(dst, `,"param":null,"code":`...)
	if t.code == "" {
		dst = append(dst, "null"...)
	} else {
		dst = jsonscan.AppendQuote(dst, t.code)
	}
	dst = append(dst, `,"ctxguard_error_id":`...)
	dst = jsonscan.AppendQuote(dst, id)
	return append(dst, "}}"...)
}

// ErrorStatus is the status the OpenAI APIs answer an error of kind k
// with, where it differs from ctxguard's default: 503 for overloaded
// (ctxguard's default is Anthropic's 529). Adapters implement
// protocol.StatusMapper with it.
func ErrorStatus(k protocol.Kind, status int) int {
	if k == protocol.Overloaded {
		return http.StatusServiceUnavailable
	}
	return status
}

// Claim is the family's claim on a request outside the endpoints an
// adapter owns: Maybe for a path of the OpenAI API's own surface (models,
// files, embeddings, ...) when nothing marks the request as Anthropic's
// (every Anthropic SDK sends anthropic-version), so that OpenAI clients'
// other calls reach the OpenAI upstream; No for anything else, which goes
// where it always went.
func Claim(path string, h http.Header) protocol.Claim {
	if h.Get("Anthropic-Version") != "" || h.Get("Anthropic-Beta") != "" {
		return protocol.No
	}
	rest, ok := strings.CutPrefix(path, "/v1/")
	if !ok {
		return protocol.No
	}
	first, _, _ := strings.Cut(rest, "/")
	if surface[first] {
		return protocol.Maybe
	}
	return protocol.No
}

// surface holds the first path segments (after /v1/) of the OpenAI API's
// resources, as the official Go SDK (openai-go v3) names them.
var surface = map[string]bool{
	"agents": true, "assistants": true, "audio": true, "batches": true, "chat": true, "chatkit": true,
	"completions": true, "containers": true, "conversations": true, "embeddings": true, "evals": true,
	"files": true, "fine_tuning": true, "images": true, "models": true, "moderations": true,
	"organization": true, "realtime": true, "responses": true, "skills": true, "threads": true,
	"uploads": true, "vector_stores": true, "videos": true,
}
