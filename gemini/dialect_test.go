package gemini

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/conversation"
)

func TestDialect(t *testing.T) {
	body := []byte(`{"contents":[` +
		`{"role":"user","parts":[{"text":""},{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="},"thoughtSignature":"aW1n"},{"fileData":{"mimeType":"image/jpeg","fileUri":"https://x/y.jpg"}},{"inlineData":{"mimeType":"audio/wav","data":"AAAA"}}]},` +
		`{"role":"model","parts":[{"text":"sure","thoughtSignature":"dGV4dA=="},{"functionCall":{"name":"f","args":{}}}]},` +
		`{"role":"user"}]}`)
	c, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	d := c.Dialect
	u, m := &c.Messages[0], &c.Messages[1]

	img, ok := d.Image(c, u.Blocks[1].Span)
	if !ok || !img.Inline || img.Media != "image/png" || img.Base64 != 11 || string(c.Bytes(img.Keep)) != `"thoughtSignature":"aW1n"` {
		t.Errorf("inline image: %+v %v", img, ok)
	}
	if repl := d.AppendText(nil, conversation.RoleTool, []byte(`"[image]"`), c.Bytes(img.Keep)); string(repl) != `{"text":"[image]","thoughtSignature":"aW1n"}` {
		t.Errorf("a replaced image: %s", repl)
	}
	if img, ok := d.Image(c, u.Blocks[2].Span); !ok || img.Inline || img.URL != "https://x/y.jpg" {
		t.Errorf("file image: %+v %v", img, ok)
	}
	if _, ok := d.Image(c, u.Blocks[3].Span); ok {
		t.Error("audio read as an image")
	}

	var kept []string
	for _, mm := range []*conversation.Message{u, m} {
		for bi := range mm.Blocks {
			if k := d.KeptBlock(c, mm, &mm.Blocks[bi]); k != nil {
				kept = append(kept, string(k))
			}
		}
	}
	want := []string{`{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="},"thoughtSignature":"aW1n"}`,
		`{"fileData":{"mimeType":"image/jpeg","fileUri":"https://x/y.jpg"}}`, `{"inlineData":{"mimeType":"audio/wav","data":"AAAA"}}`,
		`{"text":"sure","thoughtSignature":"dGV4dA=="}`}
	if diff := cmp.Diff(want, kept); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}

	for mi, wantOut := range []string{
		`[{"text":"x"}]`,
		`[{"text":"sure","thoughtSignature":"dGV4dA=="}]`,
		`{"role":"user","parts":[{"text":""}]}`, // no parts: the content is written whole
	} {
		var blocks [][]byte
		switch mi {
		case 0:
			blocks = [][]byte{d.AppendText(nil, conversation.RoleUser, []byte(`"x"`), nil)}
		case 1:
			blocks = [][]byte{d.KeptBlock(c, m, &m.Blocks[0])}
		}
		sp, repl := d.ReplaceMessage(c, mi, blocks)
		if string(repl) != wantOut {
			t.Errorf("message %d: %s, want %s", mi, repl, wantOut)
		}
		out := append(append(append([]byte(nil), body[:sp.Start]...), repl...), body[sp.End:]...)
		if !json.Valid(out) {
			t.Errorf("message %d: invalid JSON %s", mi, out)
		}
	}
	if d.CacheMarker(c) != nil || d.SessionID(c) != "" {
		t.Error("Gemini has no cache marker and no session id in the body")
	}
}
