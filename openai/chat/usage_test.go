package chat

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/protocol"
)

type tapResult struct {
	U     protocol.Usage
	Found bool
}

func runTap(ct string, chunks ...string) tapResult {
	t := Protocol.NewUsageTap(ct)
	for _, c := range chunks {
		if n, err := t.Write([]byte(c)); n != len(c) || err != nil {
			panic("short write")
		}
	}
	u, ok := t.Usage()
	return tapResult{u, ok}
}

// checkSplits feeds s whole and split in two at every byte boundary.
func checkSplits(t *testing.T, ct, s string, want tapResult) {
	t.Helper()
	if d := cmp.Diff(want, runTap(ct, s)); d != "" {
		t.Fatalf("whole (-want +got):\n%s", d)
	}
	for i := 1; i < len(s); i++ {
		if d := cmp.Diff(want, runTap(ct, s[:i], s[i:])); d != "" {
			t.Fatalf("split at %d (-want +got):\n%s", i, d)
		}
	}
	bytewise := make([]string, len(s))
	for i := range s {
		bytewise[i] = s[i : i+1]
	}
	if d := cmp.Diff(want, runTap(ct, bytewise...)); d != "" {
		t.Fatalf("byte by byte (-want +got):\n%s", d)
	}
}

func TestUsageTapCaptures(t *testing.T) {
	for _, tc := range []struct {
		file string
		want tapResult
	}{
		// prompt_tokens 3671, cached_tokens 512, completion_tokens 42.
		{"opencode-reasoning-0004.resp.sse", tapResult{protocol.Usage{Input: 3159, CacheRead: 512, Output: 42}, true}},
		{"opencode-ok-no-usage-0004.resp.sse", tapResult{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile("testdata/" + tc.file)
			if err != nil {
				t.Fatal(err)
			}
			checkSplits(t, "text/event-stream; charset=utf-8", string(b), tc.want)
			checkSplits(t, "text/event-stream", strings.ReplaceAll(string(b), "\n", "\r\n"), tc.want)
		})
	}
	b, err := os.ReadFile("testdata/opencode-first-0002.resp.sse")
	if err != nil {
		t.Fatal(err)
	}
	if got := runTap("text/event-stream", string(b)); !got.Found || got.U.PromptTokens() == 0 {
		t.Errorf("opencode-first-0002: %+v", got)
	}
}

func TestUsageTap(t *testing.T) {
	const chunk = `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}` + "\n\n"
	for _, tc := range []struct {
		name, ct, in string
		want         tapResult
	}{
		{"null usage only", "text/event-stream", chunk + "data: [DONE]\n\n", tapResult{}},
		{"last non-null wins", "text/event-stream",
			chunk + `data: {"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2}}` + "\n\n" +
				`data: {"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":5}}}` + "\n\n" + chunk + "data: [DONE]\n\n",
			tapResult{protocol.Usage{Input: 15, CacheRead: 5, Output: 3}, true}},
		{"deepseek", "text/event-stream",
			`data: {"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":7,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":36}}` + "\n\ndata: [DONE]\n\n",
			tapResult{protocol.Usage{Input: 36, CacheRead: 64, Output: 7}, true}},
		{"cached over prompt", "text/event-stream",
			`data: {"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":9}}}` + "\n\n",
			tapResult{protocol.Usage{CacheRead: 3}, true}},
		{"a content that names usage", "text/event-stream",
			`data: {"choices":[{"delta":{"content":"\"usage\":{\"prompt_tokens\":9}"}}]}` + "\n\n", tapResult{}},
		{"json answer", "application/json",
			`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"usage"},"finish_reason":"stop"}],` +
				`"usage":{"prompt_tokens":1200,"completion_tokens":30,"total_tokens":1230,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0}}}`,
			tapResult{protocol.Usage{Input: 176, CacheRead: 1024, Output: 30}, true}},
		{"json error", "application/json", `{"error":{"message":"x","type":"invalid_request_error"}}`, tapResult{}},
		{"json null usage", "application/json", `{"usage":null}`, tapResult{}},
		{"other type", "text/plain", `{"usage":{"prompt_tokens":1}}`, tapResult{}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkSplits(t, tc.ct, tc.in, tc.want) })
	}
}

func TestParseUsage(t *testing.T) {
	for in, want := range map[string]protocol.Usage{
		`{"prompt_tokens":5,"completion_tokens":1}`:                                                     {Input: 5, Output: 1},
		`{"prompt_tokens":"5","completion_tokens":1.5}`:                                                 {},
		`{"prompt_tokens":50,"prompt_tokens_details":null,"prompt_cache_hit_tokens":10}`:                {Input: 40, CacheRead: 10},
		`{"prompt_tokens":50,"prompt_tokens_details":{"cached_tokens":0},"prompt_cache_hit_tokens":10}`: {Input: 50},
	} {
		got, ok := ParseUsage([]byte(in))
		if !ok || got != want {
			t.Errorf("%s: got %+v %v, want %+v", in, got, ok, want)
		}
	}
	if _, ok := ParseUsage([]byte(`[1]`)); ok {
		t.Error("array accepted")
	}
}
