package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ctxguard/ctxguard/protocol"
)

// Version is the anthropic-version a call of ctxguard's own sends when the
// session's request named none.
const Version = "2023-06-01"

// SmallModel is the model ctxguard's own calls use for Claude sessions.
const SmallModel = "claude-haiku-4-5"

// CallRequest implements protocol.Caller: a non-streamed Messages request.
func (messagesAPI) CallRequest(model, system, user string, maxTokens int) (string, []byte) {
	b, _ := json.Marshal(struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		System    string `json:"system,omitempty"`
		Messages  []any  `json:"messages"`
	}{model, maxTokens, system, []any{map[string]string{"role": "user", "content": user}}})
	return "/v1/messages", b
}

// CallAnswer implements protocol.Caller: the text blocks of a Messages
// answer, joined, and its usage.
func (messagesAPI) CallAnswer(body []byte) (string, protocol.Usage, error) {
	var a struct {
		Type    string `json:"type"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
		Usage      struct {
			Input      int `json:"input_tokens"`
			Output     int `json:"output_tokens"`
			CacheRead  int `json:"cache_read_input_tokens"`
			CacheWrite int `json:"cache_creation_input_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return "", protocol.Usage{}, fmt.Errorf("anthropic: the answer is not JSON: %w", err)
	}
	if a.Type != "message" {
		return "", protocol.Usage{}, fmt.Errorf("anthropic: the answer is a %q, not a message", a.Type)
	}
	var sb strings.Builder
	for _, c := range a.Content {
		if c.Type == "text" {
			sb.WriteString(c.Text)
		}
	}
	u := protocol.Usage{Input: a.Usage.Input, Output: a.Usage.Output, CacheRead: a.Usage.CacheRead, CacheWrite: a.Usage.CacheWrite}
	text := strings.TrimSpace(sb.String())
	switch {
	case a.StopReason == "refusal":
		return "", u, errors.New("anthropic: the model refused")
	case text == "":
		return "", u, errors.New("anthropic: the answer has no text")
	}
	return text, u, nil
}

// SmallModel implements protocol.Caller: claude-haiku-4-5 for any model.
func (messagesAPI) SmallModel(string) string { return SmallModel }

// CallHeader implements protocol.Caller: the session's key (x-api-key or
// Authorization) and its anthropic-version, or Version.
func (messagesAPI) CallHeader(dst, h http.Header) {
	for _, k := range []string{"X-Api-Key", "Authorization"} {
		if v := h.Values(k); len(v) > 0 {
			dst[k] = append([]string(nil), v...)
		}
	}
	v := h.Get("Anthropic-Version")
	if v == "" {
		v = Version
	}
	dst.Set("Anthropic-Version", v)
}

// CallKey implements protocol.Caller: the key in x-api-key.
func (messagesAPI) CallKey(dst http.Header, key string) { dst.Set("X-Api-Key", key) }
