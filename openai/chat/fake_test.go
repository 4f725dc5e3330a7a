package chat

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/openai/openaitest"
	"github.com/ctxguard/ctxguard/protocol"
)

// The usage tap reads the answers of the scripted fake, streamed and not,
// in their exact wire formats.
func TestUsageTapFake(t *testing.T) {
	fake := openaitest.New(openaitest.Options{Script: func(*openaitest.Request) openaitest.Turn {
		return openaitest.Turn{
			Items: []openaitest.Item{openaitest.Text("All done, the build is green."), openaitest.Call("bash", `{"command":"ls"}`)},
			Usage: openaitest.Usage{Input: 900, Cached: 4096, Output: 57},
		}
	}})
	fake.Start()
	defer fake.Close()
	want := tapResult{protocol.Usage{Input: 900, CacheRead: 4096, Output: 57}, true}
	for _, tc := range []struct {
		name, body string
		want       tapResult
	}{
		{"json", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, want},
		{"stream with usage", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, want},
		{"stream without usage", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, tapResult{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(fake.URL+Path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			checkSplits(t, resp.Header.Get("Content-Type"), string(b), tc.want)
		})
	}
}
