package responses

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ctxguard/ctxguard/protocol"
)

// CallRequest implements protocol.Caller: a non-streamed, unstored
// Responses request.
func (responsesAPI) CallRequest(model, system, user string, maxTokens int) (string, []byte) {
	b, _ := json.Marshal(struct {
		Model        string `json:"model"`
		Instructions string `json:"instructions,omitempty"`
		Input        string `json:"input"`
		MaxOutput    int    `json:"max_output_tokens"`
		Store        bool   `json:"store"`
	}{model, system, user, maxTokens, false})
	return "/v1/responses", b
}

// CallAnswer implements protocol.Caller: the output_text parts of the
// answer's message items, and its usage.
func (responsesAPI) CallAnswer(body []byte) (string, protocol.Usage, error) {
	var a struct {
		Object string `json:"object"`
		Status string `json:"status"`
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		Usage struct {
			Input   int `json:"input_tokens"`
			Output  int `json:"output_tokens"`
			Details struct {
				Cached int `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return "", protocol.Usage{}, fmt.Errorf("responses: the answer is not JSON: %w", err)
	}
	if a.Object != "response" {
		return "", protocol.Usage{}, fmt.Errorf("responses: the answer is a %q, not a response", a.Object)
	}
	var sb strings.Builder
	for _, o := range a.Output {
		if o.Type != "message" {
			continue
		}
		for _, c := range o.Content {
			if c.Type == "output_text" {
				sb.WriteString(c.Text)
			}
		}
	}
	u := protocol.Usage{Input: a.Usage.Input - a.Usage.Details.Cached, CacheRead: a.Usage.Details.Cached, Output: a.Usage.Output}
	if text := strings.TrimSpace(sb.String()); text != "" {
		return text, u, nil
	}
	if a.Status != "" && a.Status != "completed" {
		return "", u, fmt.Errorf("responses: the answer is %s, with no text", a.Status)
	}
	return "", u, errors.New("responses: the answer has no text")
}
