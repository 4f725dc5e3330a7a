package engine

import (
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/imagetest"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/tokens"
)

// TestDamagedImagePrompt: an image whose base64 a transcript damaged (a
// secret scrubber's marker in it, a bad length, stray characters) is
// still an image block to every protocol adapter, and the request's
// estimate that the proxy makes message by message (promptTokens, what
// the thresholds read) bills it as the image its header describes: the
// request's text plus 1,585 tokens, not its 211 KB of base64 as text.
func TestDamagedImagePrompt(t *testing.T) {
	parse := map[string]func([]byte) (*conversation.Conversation, error){
		"anthropic": anthropic.Parse,
		"responses": responses.Parse,
		"chat":      chat.Parse,
	}
	b64 := imagetest.Screenshot(t)
	image := tokens.ImageTokens(imagetest.ScreenshotWidth, imagetest.ScreenshotHeight)
	estimate := func(t *testing.T, req imagetest.Request, data string) int {
		t.Helper()
		c, err := parse[req.Protocol](req.Body(data))
		if err != nil {
			t.Fatal(err)
		}
		images := 0
		for _, m := range c.Messages {
			for _, b := range m.Blocks {
				if b.Kind == conversation.Image {
					images++
				}
				for _, p := range b.Parts {
					if p.Kind == conversation.Image {
						images++
					}
				}
			}
		}
		if data != "" && images != 1 {
			t.Fatalf("%d image blocks parsed", images)
		}
		n, _ := promptTokens(c, 0, nil, nil)
		return n
	}
	for _, req := range imagetest.Requests {
		text := estimate(t, req, "")
		for _, dmg := range imagetest.Damages {
			t.Run(req.Name+"/"+dmg.Name, func(t *testing.T) {
				if got := estimate(t, req, dmg.Apply(b64)); got != text+image {
					t.Errorf("estimate %d, want %d (text) + %d (image)", got, text, image)
				}
			})
		}
	}
}
