package ctxguard_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/ctxguard/ctxguard"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/config"
)

// The Guard in a Go program, without the proxy: the official Anthropic
// SDK's middleware. The lines between "README:" markers are the README's
// example, word for word (TestREADMEExample keeps the two the same).
func Example() {
	// What a program has before it starts: the API (here a fake one that
	// speaks its wire format), a key, a home for the store.
	fake := anthropictest.NewServer(anthropictest.Options{})
	defer fake.Close()
	dir, cleanup := tempDir()
	defer cleanup()
	defer setenv("ANTHROPIC_BASE_URL", fake.URL)()
	defer setenv("ANTHROPIC_API_KEY", "sk-ant-example")()
	defer setenv("ANTHROPIC_AUTH_TOKEN", "")()
	defer setenv("XDG_DATA_HOME", dir)()

	err := func(ctx context.Context) error {
		// README: begin
		g, err := ctxguard.New(config.Defaults())
		if err != nil {
			return err
		}
		defer g.Close()
		go g.Maintain(ctx) // housekeeping until ctx ends: frees idle session memory, sweeps expired blobs
		client := anthropic.NewClient(option.WithMiddleware(
			func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
				return g.Middleware(r, next)
			}))
		// the same with openai.NewClient and openai-go's option.WithMiddleware (Responses and Chat Completions),
		// or any client: &http.Client{Transport: g.Transport(nil)}
		// README: end

		msg, err := client.Messages.New(ctx, buildParams())
		if err != nil {
			return err
		}
		fmt.Println("answer:", msg.Content[0].Text)
		fmt.Println("upstream got the whole log:", holdsWholeLog(fake.MessagesRequests()[0].Body))
		_, err = os.Stat(filepath.Join(dir, "ctxguard"))
		fmt.Println("store in $XDG_DATA_HOME/ctxguard:", err == nil)
		return nil
	}(context.Background())
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// answer: ok
	// upstream got the whole log: false
	// store in $XDG_DATA_HOME/ctxguard: true
}

// setenv sets the environment variable k to v (unsets it for "") and
// returns what restores it.
func setenv(k, v string) func() {
	old, had := os.LookupEnv(k)
	if v == "" {
		os.Unsetenv(k)
	} else {
		os.Setenv(k, v)
	}
	return func() {
		if had {
			os.Setenv(k, old)
		} else {
			os.Unsetenv(k)
		}
	}
}
