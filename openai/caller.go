package openai

import (
	"net/http"
	"strings"

	"github.com/ctxguard/ctxguard/model"
)

// SmallModel returns the small model ctxguard's own calls use for a
// session of model id: gpt-5-mini for OpenAI models (the registry's GPT-5
// family covers it by prefix), the model itself for others (a
// Chat-Completions-compatible provider's model ids are its own).
func SmallModel(id string) string {
	if model.Lookup(id).Provider == model.OpenAI || strings.HasPrefix(strings.ToLower(id), "gpt-") {
		return "gpt-5-mini"
	}
	return id
}

// CallHeader copies the headers a call of ctxguard's own needs from the
// session's request: its key and the organization, project and (Codex
// signed in with ChatGPT) account it bills to.
func CallHeader(dst, h http.Header) {
	for _, k := range []string{"Authorization", "Openai-Organization", "Openai-Project", "Chatgpt-Account-Id"} {
		if v := h.Values(k); len(v) > 0 {
			dst[k] = append([]string(nil), v...)
		}
	}
}
