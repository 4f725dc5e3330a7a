package ctxguard_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/ctxguard/ctxguard/openai/openaitest"
)

// The Guard plugs into the official OpenAI Go SDK the same way, for the
// Responses API (Codex's) and Chat Completions alike: the 68 KB tool
// output reaches the upstream as a stored blob's preview.
func ExampleGuard_Middleware_openai() {
	fake := openaitest.New(openaitest.Options{})
	fake.Start()
	defer fake.Close()
	dir, cleanup := tempDir()
	defer cleanup()
	g := exampleGuard(dir)
	defer g.Close()

	client := openaisdk.NewClient(
		option.WithBaseURL(fake.URL+"/v1/"),
		option.WithAPIKey("sk-example"),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			return g.Middleware(r, next)
		}))

	call := responses.ResponseInputItemParamOfFunctionCall(`{"command":"make"}`, "call_1", "shell")
	output := responses.ResponseInputItemParamOfFunctionCallOutput(bigLog)
	output.OfFunctionCallOutput.CallID = openaisdk.String("call_1")
	resp, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "gpt-5.1-codex",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Build the project.", responses.EasyInputMessageRoleUser),
			call, output,
		}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("responses answer:", resp.OutputText())

	chat, err := client.Chat.Completions.New(context.Background(), openaisdk.ChatCompletionNewParams{
		Model: "gpt-4.1",
		Messages: []openaisdk.ChatCompletionMessageParamUnion{
			openaisdk.UserMessage("Build the project."),
			{OfAssistant: &openaisdk.ChatCompletionAssistantMessageParam{
				ToolCalls: []openaisdk.ChatCompletionMessageToolCallUnionParam{{
					OfFunction: &openaisdk.ChatCompletionMessageFunctionToolCallParam{
						ID:       "call_1",
						Function: openaisdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "shell", Arguments: `{"command":"make"}`},
					},
				}},
			}},
			openaisdk.ToolMessage(bigLog, "call_1"),
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("chat answer:", chat.Choices[0].Message.Content)

	for _, r := range fake.Requests() {
		fmt.Printf("%s: preview %v, whole log %v\n", r.Path,
			bytes.Contains(r.Body, []byte("ctxguard-persisted")), holdsWholeLog(r.Body))
	}
	// Output:
	// responses answer: ok
	// chat answer: ok
	// /v1/responses: preview true, whole log false
	// /v1/chat/completions: preview true, whole log false
}
