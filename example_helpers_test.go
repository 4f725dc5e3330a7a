package ctxguard_test

import (
	"bytes"
	"encoding/json"
	"os"

	"github.com/anthropics/anthropic-sdk-go"
)

// tempDir makes a scratch folder for an example's store.
func tempDir() (string, func()) {
	dir, err := os.MkdirTemp("", "ctxguard-example-")
	if err != nil {
		panic(err)
	}
	return dir + "/store", func() { os.RemoveAll(dir) }
}

// holdsWholeLog reports whether a request body carries bigLog whole, as
// the JSON string a client writes.
func holdsWholeLog(body []byte) bool {
	q, _ := json.Marshal(bigLog)
	return bytes.Contains(body, q[1:len(q)-1])
}

// buildParams is a request whose tool result is bigLog: the answer to
// "Build the project." after a call of Bash with make.
func buildParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-sonnet-4-5",
		MaxTokens: 1024,
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Build the project.")),
			anthropic.NewAssistantMessage(anthropic.NewToolUseBlock("toolu_1", map[string]string{"command": "make"}, "Bash")),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", bigLog, false)),
		},
	}
}
