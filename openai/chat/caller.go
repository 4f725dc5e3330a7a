package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ctxguard/ctxguard/protocol"
)

// CallRequest implements protocol.Caller: a non-streamed Chat Completions
// request with a system and a user message.
func (chatAPI) CallRequest(model, system, user string, maxTokens int) (string, []byte) {
	msgs := []map[string]string{}
	if system != "" {
		msgs = append(msgs, map[string]string{"role": "system", "content": system})
	}
	msgs = append(msgs, map[string]string{"role": "user", "content": user})
	b, _ := json.Marshal(struct {
		Model     string              `json:"model"`
		Messages  []map[string]string `json:"messages"`
		MaxTokens int                 `json:"max_completion_tokens"`
	}{model, msgs, maxTokens})
	return Path, b
}

// CallAnswer implements protocol.Caller: the first choice's content and
// the usage.
func (chatAPI) CallAnswer(body []byte) (string, protocol.Usage, error) {
	var a struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
				Refusal *string `json:"refusal"`
			} `json:"message"`
		} `json:"choices"`
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
			Details    struct {
				Cached int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return "", protocol.Usage{}, fmt.Errorf("chat: the answer is not JSON: %w", err)
	}
	if a.Object != "chat.completion" || len(a.Choices) == 0 {
		return "", protocol.Usage{}, fmt.Errorf("chat: the answer is a %q with %d choices, not a completion", a.Object, len(a.Choices))
	}
	u := protocol.Usage{Input: a.Usage.Prompt - a.Usage.Details.Cached, CacheRead: a.Usage.Details.Cached, Output: a.Usage.Completion}
	m := a.Choices[0].Message
	if m.Refusal != nil && *m.Refusal != "" {
		return "", u, errors.New("chat: the model refused")
	}
	if m.Content == nil || strings.TrimSpace(*m.Content) == "" {
		return "", u, errors.New("chat: the answer has no text")
	}
	return strings.TrimSpace(*m.Content), u, nil
}
