package openai

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"

	"github.com/ctxguard/ctxguard/protocol"
)

// Overflow reads an error answer of the OpenAI APIs (Chat Completions and
// Responses): a 400 whose error code is context_length_exceeded. The
// numbers are read when the message states them, as Chat Completions'
// does ("This model's maximum context length is 128000 tokens. However,
// your messages resulted in 130000 tokens."); the Responses API's ("Your
// input exceeds the context window of this model.") has none.
func Overflow(status int, body []byte) (protocol.Overflow, bool) {
	if status != http.StatusBadRequest {
		return protocol.Overflow{}, false
	}
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Code != "context_length_exceeded" {
		return protocol.Overflow{}, false
	}
	var o protocol.Overflow
	if m := maxContext.FindStringSubmatch(e.Error.Message); m != nil {
		o.Limit, _ = strconv.Atoi(m[1])
	}
	if m := resulted.FindStringSubmatch(e.Error.Message); m != nil {
		o.Tokens, _ = strconv.Atoi(m[1])
	}
	return o, true
}

var (
	maxContext = regexp.MustCompile(`maximum context length is (\d+) tokens`)
	resulted   = regexp.MustCompile(`(?:resulted in|requested) (\d+) tokens`)
)
