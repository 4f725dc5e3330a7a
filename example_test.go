package ctxguard_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	anthropicsdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/ctxguard/ctxguard"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/config"
)

// exampleGuard returns a Guard with its store in a scratch folder.
func exampleGuard(dir string) *ctxguard.Guard {
	cfg := config.Defaults()
	cfg.DataDir = dir
	g, err := ctxguard.New(cfg)
	if err != nil {
		panic(err)
	}
	return g
}

// bigLog is tool output over persist's 50,000-character threshold.
var bigLog = strings.Repeat("step ok: compiled package, linked binary, ran the checks\n", 1200)

// The Guard plugs into the official Anthropic Go SDK as a middleware: the
// SDK builds its requests as usual, and the upstream receives them
// rewritten (here, a 68 KB tool result stored whole and replaced by a
// preview).
func ExampleGuard_Middleware() {
	fake := anthropictest.NewServer(anthropictest.Options{})
	defer fake.Close()
	dir, cleanup := tempDir()
	defer cleanup()
	g := exampleGuard(dir)
	defer g.Close()

	client := anthropicsdk.NewClient(
		option.WithBaseURL(fake.URL),
		option.WithAPIKey("sk-ant-example"),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			return g.Middleware(r, next)
		}))
	msg, err := client.Messages.New(context.Background(), buildParams())
	if err != nil {
		panic(err)
	}
	sent := fake.MessagesRequests()[0].Body
	fmt.Println("answer:", msg.Content[0].Text)
	fmt.Println("upstream got the preview:", bytes.Contains(sent, []byte("ctxguard-persisted")))
	fmt.Println("upstream got the whole log:", holdsWholeLog(sent))
	// Output:
	// answer: ok
	// upstream got the preview: true
	// upstream got the whole log: false
}

// Any Go HTTP client gets the same through Guard.Transport.
func ExampleGuard_Transport() {
	fake := anthropictest.NewServer(anthropictest.Options{})
	defer fake.Close()
	dir, cleanup := tempDir()
	defer cleanup()
	g := exampleGuard(dir)
	defer g.Close()

	client := &http.Client{Transport: g.Transport(nil)}
	body := fmt.Sprintf(`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[`+
		`{"role":"user","content":"Build it."},`+
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"make"}}]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":%q}]}]}`, bigLog)
	req, _ := http.NewRequest("POST", fake.URL+"/v1/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	res, err := client.Do(req)
	if err != nil {
		panic(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	sent := fake.MessagesRequests()[0].Body
	fmt.Println(res.StatusCode, len(sent) < len(body)/10)
	// Output: 200 true
}
