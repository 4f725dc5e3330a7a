package transcript

import (
	"embed"
	"encoding/json"
	"fmt"
	"os"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Profile is what a replayed request carries besides the conversation:
// the client's system prompt, tool schemas and request settings. The
// transcripts do not hold Claude Code's own, so the default profile is
// ctxguard's own text of about the sizes Claude Code sends (about 7 KB of
// system text in three blocks, about 30 KB of tool schemas for 15 tools, a
// 3.6 KB system message), written for this purpose.
type Profile struct {
	// System holds the three system blocks. System[0] carries no cache
	// marker; System[1] and System[2] each carry one, as Claude Code sends
	// them. A session with its own system prompt (SWE-agent) replaces
	// System[2] with it.
	System [3]string `json:"system"`
	// SystemMessage is the text of the role:"system" message Claude Code
	// sends inside messages; "" sends none.
	SystemMessage string `json:"system_message"`
	// SystemMessageIndex is its position in the messages array (1 in
	// Claude Code: after the first user message). A position past the end
	// appends it.
	SystemMessageIndex int `json:"system_message_index"`
	// Reminder is a text block put before the content of the first user
	// message of every history, as Claude Code injects its context
	// reminder; "" adds none.
	Reminder string `json:"reminder"`
	// Tools is the JSON array of tool definitions, sent compacted with its
	// key order kept.
	Tools json.RawMessage `json:"tools"`
	// MaxTokens is the request's max_tokens.
	MaxTokens int `json:"max_tokens"`
	// Effort is output_config.effort; "" leaves output_config out.
	Effort string `json:"effort"`
	// DeviceID is the device_id inside metadata.user_id.
	DeviceID string `json:"device_id"`
	// Model is used when neither the options nor the session name a
	// Claude model.
	Model string `json:"model"`
	// ResponsesTools is the tools array of rebuilt Responses API requests
	// (Codex sessions). The default is the array Codex CLI 0.169.0 sent in
	// its first request of a captured session (9 tools, 17 KB: exec_command,
	// write_stdin, request_user_input, view_image, a multi_agent_v1
	// namespace, get_goal, create_goal, update_goal, web_search), the
	// schemas of openai/codex (Apache-2.0) as that client sent them.
	ResponsesTools json.RawMessage `json:"responses_tools"`
	// GeminiSystem is the system instruction of Gemini CLI sessions'
	// requests. The default is the one Gemini CLI 0.61.0 sent in a
	// captured session (31 KB; google-gemini/gemini-cli, Apache-2.0), its
	// machine paths replaced by neutral ones.
	GeminiSystem string `json:"gemini_system"`
	// GeminiTools is the tools array of Gemini CLI sessions' requests. The
	// default is the array Gemini CLI 0.61.0 sent in the same capture (one
	// functionDeclarations list of 15 tools, 15 KB).
	GeminiTools json.RawMessage `json:"gemini_tools"`
	// GeminiModel is the model of Gemini requests when neither the options
	// nor the session name one (Claude Code and SWE-agent sessions written
	// as Gemini requests name none).
	GeminiModel string `json:"gemini_model"`
}

//go:embed profile
var profileFS embed.FS

func mustRead(name string) string {
	b, err := profileFS.ReadFile("profile/" + name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// DefaultProfile returns the embedded default profile.
func DefaultProfile() Profile {
	return Profile{
		System:             [3]string{mustRead("system-0.txt"), mustRead("system-1.txt"), mustRead("system-2.md")},
		SystemMessage:      mustRead("system-message.md"),
		SystemMessageIndex: 1,
		Reminder:           mustRead("reminder.txt"),
		Tools:              json.RawMessage(mustRead("tools.json")),
		MaxTokens:          64000,
		Effort:             "high",
		DeviceID:           "0000000000000000000000000000000000000000000000000000000000000000",
		Model:              "claude-opus-4-8",
		ResponsesTools:     json.RawMessage(mustRead("codex-tools.json")),
		GeminiSystem:       mustRead("gemini-system.md"),
		GeminiTools:        json.RawMessage(mustRead("gemini-tools.json")),
		GeminiModel:        "gemini-3.1-pro-preview",
	}
}

// LoadProfile reads a JSON profile file. Fields the file does not set keep
// their default values, so a file can change only the tools, say; set a
// text to "" to leave its part out.
func LoadProfile(path string) (Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Profile{}, err
	}
	p := DefaultProfile()
	if err := json.Unmarshal(data, &p); err != nil {
		return Profile{}, fmt.Errorf("%s: %w", path, err)
	}
	if err := p.Validate(); err != nil {
		return Profile{}, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// Validate checks that the profile can make valid requests.
func (p *Profile) Validate() error {
	for _, t := range []struct {
		name string
		v    json.RawMessage
	}{{"tools", p.Tools}, {"responses_tools", p.ResponsesTools}, {"gemini_tools", p.GeminiTools}} {
		if len(t.v) == 0 {
			continue
		}
		root, err := jsonscan.Root(t.v)
		if err != nil {
			return fmt.Errorf("profile %s: %w", t.name, err)
		}
		if jsonscan.KindOf(t.v, root) != jsonscan.Array {
			return fmt.Errorf("profile %s: not a JSON array", t.name)
		}
	}
	if p.MaxTokens <= 0 {
		return fmt.Errorf("profile max_tokens: %d must be positive", p.MaxTokens)
	}
	if p.SystemMessageIndex < 0 {
		return fmt.Errorf("profile system_message_index: %d is negative", p.SystemMessageIndex)
	}
	return nil
}
