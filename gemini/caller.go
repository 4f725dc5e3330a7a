package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/protocol"
)

// SmallModel is the model ctxguard's own calls use for Gemini sessions.
const SmallModel = "gemini-2.5-flash"

// CallRequest implements protocol.Caller: a generateContent request with
// the system instruction, one user content and maxOutputTokens.
func (api) CallRequest(id, system, user string, maxTokens int) (string, []byte) {
	type part struct {
		Text string `json:"text"`
	}
	type content struct {
		Role  string `json:"role,omitempty"`
		Parts []part `json:"parts"`
	}
	var sys *content
	if system != "" {
		sys = &content{Parts: []part{{system}}}
	}
	b, _ := json.Marshal(struct {
		Contents          []content      `json:"contents"`
		SystemInstruction *content       `json:"systemInstruction,omitempty"`
		GenerationConfig  map[string]int `json:"generationConfig"`
	}{[]content{{"user", []part{{user}}}}, sys, map[string]int{"maxOutputTokens": maxTokens}})
	return "/v1beta/models/" + id + ":generateContent", b
}

// CallAnswer implements protocol.Caller: the text parts (not thoughts)
// of the first candidate, joined, and the usage.
func (api) CallAnswer(body []byte) (string, protocol.Usage, error) {
	var a struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					Text    string `json:"text"`
					Thought bool   `json:"thought"`
				} `json:"parts"`
			} `json:"content"`
			FinishReason string `json:"finishReason"`
		} `json:"candidates"`
		PromptFeedback struct {
			BlockReason string `json:"blockReason"`
		} `json:"promptFeedback"`
		UsageMetadata json.RawMessage `json:"usageMetadata"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return "", protocol.Usage{}, fmt.Errorf("gemini: the answer is not JSON: %w", err)
	}
	u, _ := ParseUsage(a.UsageMetadata)
	if a.PromptFeedback.BlockReason != "" {
		return "", u, fmt.Errorf("gemini: the prompt was blocked (%s)", a.PromptFeedback.BlockReason)
	}
	if len(a.Candidates) == 0 {
		return "", u, errors.New("gemini: the answer has no candidate")
	}
	var sb strings.Builder
	for _, p := range a.Candidates[0].Content.Parts {
		if !p.Thought {
			sb.WriteString(p.Text)
		}
	}
	text := strings.TrimSpace(sb.String())
	switch r := a.Candidates[0].FinishReason; {
	case r != "" && r != "STOP" && r != "MAX_TOKENS":
		return "", u, fmt.Errorf("gemini: the answer stopped for %s", r)
	case text == "":
		return "", u, errors.New("gemini: the answer has no text")
	}
	return text, u, nil
}

// SmallModel implements protocol.Caller: SmallModel for Google's models;
// a model of another family served through the Gemini API (a gateway's)
// is called itself.
func (api) SmallModel(id string) string {
	if model.Family(id) == string(model.Google) {
		return SmallModel
	}
	return id
}

// CallHeader implements protocol.Caller: the session's key
// (x-goog-api-key, or an OAuth Authorization) and the project it bills
// to (x-goog-user-project). A key the client sent as the key query
// parameter is not in h: such a session's calls need summarizer.mode
// endpoint.
func (api) CallHeader(dst, h http.Header) {
	for _, k := range []string{"X-Goog-Api-Key", "Authorization", "X-Goog-User-Project"} {
		if v := h.Values(k); len(v) > 0 {
			dst[k] = append([]string(nil), v...)
		}
	}
}

// CallKey implements protocol.Caller: the key in x-goog-api-key.
func (api) CallKey(dst http.Header, key string) { dst.Set("X-Goog-Api-Key", key) }
