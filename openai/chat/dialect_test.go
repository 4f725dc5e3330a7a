package chat

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/protocol"
)

func TestProtocol(t *testing.T) {
	p := Protocol
	if p.Name() != "chat" || p.Family() != "openai" {
		t.Errorf("name %q family %q", p.Name(), p.Family())
	}
	anth := http.Header{"Anthropic-Version": {"2023-06-01"}}
	for _, tc := range []struct {
		method, path string
		h            http.Header
		claim        protocol.Claim
		rewritable   bool
	}{
		{"POST", "/v1/chat/completions", nil, protocol.Yes, true},
		{"POST", "/v1/chat/completions", anth, protocol.Yes, true},
		{"GET", "/v1/chat/completions", nil, protocol.Yes, false},
		{"POST", "/v1/models", nil, protocol.Maybe, false},
		{"POST", "/v1/messages", anth, protocol.No, false},
		{"POST", "/chat/completions", nil, protocol.No, false}, // not the API's surface: its upstream as before
		{"POST", "/x", nil, protocol.No, false},
	} {
		if got := p.Claim(tc.method, tc.path, tc.h); got != tc.claim {
			t.Errorf("Claim(%s %s) = %v, want %v", tc.method, tc.path, got, tc.claim)
		}
		if got := p.Rewritable(tc.method, tc.path); got != tc.rewritable {
			t.Errorf("Rewritable(%s %s) = %v", tc.method, tc.path, got)
		}
	}
	got := string(p.AppendError(nil, protocol.TooLarge, "too big", "e1"))
	if want := `{"error":{"message":"too big","type":"invalid_request_error","param":null,"code":"request_too_large","ctxguard_error_id":"e1"}}`; got != want {
		t.Errorf("AppendError = %s", got)
	}
}

func TestDialectImage(t *testing.T) {
	body := `{"messages":[{"role":"user","content":[` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"},"cache_control":{"type":"ephemeral"}},` +
		`{"type":"image_url","image_url":{"url":"data:image\/jpeg;base64,\/9j\/4AAQ"}},` +
		`{"type":"image_url","image_url":"https://example.com/a.png"},` +
		`{"type":"image_url","image_url":{"url":"data:text/plain,hello"}},` +
		`{"type":"image_url","image_url":{"detail":"low"}},` +
		`{"type":"text","text":"x"}]}]}`
	c, err := Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		Img  conversation.ImageInfo
		Keep string
		OK   bool
	}
	var got []res
	for _, b := range c.Messages[0].Blocks {
		img, ok := c.Dialect.Image(c, b.Span)
		got = append(got, res{img, string(c.Bytes(img.Keep)), ok})
		img.Keep = conversation.Span{}
		got[len(got)-1].Img = img
	}
	want := []res{
		{conversation.ImageInfo{Inline: true, Media: "image/png", Base64: 11}, `"cache_control":{"type":"ephemeral"}`, true},
		{conversation.ImageInfo{Inline: true, Media: "image/jpeg", Base64: 8}, "", true},
		{conversation.ImageInfo{URL: "https://example.com/a.png"}, "", true},
		{conversation.ImageInfo{Media: "text/plain"}, "", true},
		{conversation.ImageInfo{}, "", false},
		{conversation.ImageInfo{}, "", false},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestDialectReplaceMessage(t *testing.T) {
	body := `{"messages":[{"role":"user","content":"u"},` + call + `,` + tool("c1", `"a"`) + `,` + tool("c2", `"b"`) + `,{"name":"n","role":"system"}]}`
	c, err := Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Dialect
	text := d.AppendText(nil, conversation.RoleUser, []byte(`"note"`), nil)
	part := []byte(`{"type":"image_url","image_url":{"url":"https://x"}}`)
	for _, tc := range []struct {
		mi     int
		blocks [][]byte
		want   string
	}{
		{0, [][]byte{text}, `"note"`},
		{0, [][]byte{text, part}, `[{"type":"text","text":"note"},{"type":"image_url","image_url":{"url":"https://x"}}]`},
		{1, [][]byte{text}, `{"role":"assistant","content":"note"}`},
		{2, [][]byte{text}, `{"role":"user","content":"note"}`},
		{3, nil, `{"role":"system","content":""}`},
	} {
		sp, repl := d.ReplaceMessage(c, tc.mi, tc.blocks)
		if string(repl) != tc.want {
			t.Errorf("message %d: %s, want %s", tc.mi, repl, tc.want)
		}
		if m := c.Messages[tc.mi]; sp != m.Span && sp != m.Content {
			t.Errorf("message %d: span %v", tc.mi, sp)
		}
	}
	if sp, _ := d.ReplaceMessage(c, 2, nil); string(c.Bytes(sp)) != tool("c1", `"a"`)+","+tool("c2", `"b"`) {
		t.Errorf("the tool run's span is %s", c.Bytes(sp))
	}
	// What a rewritten message keeps.
	a := &c.Messages[1]
	var kept []string
	for bi := range a.Blocks {
		kept = append(kept, string(d.KeptBlock(c, a, &a.Blocks[bi])))
	}
	if d := cmp.Diff([]string{"", "", "", ""}, kept); d != "" {
		t.Errorf("assistant keeps (-want +got):\n%s", d)
	}
	if got := string(d.KeptBlock(c, &c.Messages[0], &c.Messages[0].Blocks[0])); got != `{"type":"text","text":"u"}` {
		t.Errorf("user string keeps %s", got)
	}
}
