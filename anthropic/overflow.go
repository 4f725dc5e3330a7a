package anthropic

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"

	"github.com/ctxguard/ctxguard/protocol"
)

// Overflow implements protocol.OverflowReader: a 400 invalid_request_error
// "prompt is too long: 215000 tokens > 200000 maximum", or a 413
// request_too_large (the body over the API's byte limit; no numbers).
func (messagesAPI) Overflow(status int, body []byte) (protocol.Overflow, bool) {
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return protocol.Overflow{}, false
	}
	switch {
	case status == http.StatusRequestEntityTooLarge && e.Error.Type == "request_too_large":
		return protocol.Overflow{}, true
	case status == http.StatusBadRequest && e.Error.Type == "invalid_request_error":
		m := tooLong.FindStringSubmatch(e.Error.Message)
		if m == nil {
			return protocol.Overflow{}, false
		}
		var o protocol.Overflow
		o.Tokens, _ = strconv.Atoi(m[1])
		o.Limit, _ = strconv.Atoi(m[2])
		return o, true
	}
	return protocol.Overflow{}, false
}

var tooLong = regexp.MustCompile(`prompt is too long: (\d+) tokens > (\d+) maximum`)
