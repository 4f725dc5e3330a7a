package validate

import (
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/conversation"
)

// bigRequest is the last request of a real session with its tool results
// grown to make the body about size bytes.
func bigRequest(tb testing.TB, size int) []byte {
	msgs, _ := loadSession(tb, "testdata/sessions/8914a511-2982-4b5b-886b-cb526da278b1.jsonl")
	reqs := stream(tb, msgs)
	body := reqs[len(reqs)-1]
	c := parseOK(tb, body)
	var results [][2]int
	for i := range c.Messages {
		for j, b := range c.Messages[i].Blocks {
			if b.Kind == conversation.ToolResult && !b.Content.IsZero() {
				results = append(results, [2]int{i, j})
			}
		}
	}
	per := (size - len(body)) / len(results)
	line := "drwxr-xr-x  5 user staff   160 Nov 21 10:02 some-directory-name\\n"
	text := `"` + strings.Repeat(line, per/len(line)) + `"`
	x := newXform()
	for _, r := range results {
		b := c.Messages[r[0]].Blocks[r[1]]
		x.block[r] = string(body[b.Span.Start:b.Content.Start]) + text + string(body[b.Content.End:b.Span.End])
	}
	return x.apply(tb, c)
}

func BenchmarkRequest1MB(b *testing.B) {
	body := bigRequest(b, 1<<20)
	if err := Request(body); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		Request(body)
	}
}

func BenchmarkRewrite1MB(b *testing.B) {
	body := bigRequest(b, 1<<20)
	rw := clearResults(b, parseOK(b, body))
	if err := Rewrite(body, rw, Options{}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		Rewrite(body, rw, Options{})
	}
}

// A rewrite that keeps most of the body: one old thinking block gone.
func BenchmarkRewriteSmallEdit1MB(b *testing.B) {
	body := bigRequest(b, 1<<20)
	rw := dropThinking(b, parseOK(b, body))
	if err := Rewrite(body, rw, Options{AllowThinkingRemoval: true}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		Rewrite(body, rw, Options{AllowThinkingRemoval: true})
	}
}
