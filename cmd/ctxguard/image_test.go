package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/internal/imagetest"
	"github.com/ctxguard/ctxguard/tokens"
)

// screenshotSession is a Claude Code transcript in which the agent reads a
// screenshot: the tool result holds the image, with b64 as its data.
func screenshotSession(b64 string) string {
	const head = `{"parentUuid":%P,"isSidechain":false,"userType":"external","cwd":"/home/dev/app","sessionId":"5f1d7c2e-9a41-4b7e-8e0f-2c6b1d9a7e31","version":"2.1.9","gitBranch":"main",`
	lines := []string{
		`"type":"user","message":{"role":"user","content":"The dashboard renders the chart twice after a resize. Look at /tmp/shot.jpg."},"uuid":"u1","timestamp":"2026-01-02T10:00:00.000Z"}`,
		`"message":{"model":"claude-sonnet-4-5-20250929","id":"msg_01A","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_01Xa","name":"Read","input":{"file_path":"/tmp/shot.jpg"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":12000,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":40}},"type":"assistant","uuid":"a1","timestamp":"2026-01-02T10:00:05.000Z"}`,
		`"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_01Xa","type":"tool_result","content":[{"type":"image","source":{"type":"base64","data":"` + b64 + `","media_type":"image/jpeg"}}]}]},"uuid":"u2","timestamp":"2026-01-02T10:00:06.000Z","toolUseResult":{"type":"image"}}`,
		`"message":{"model":"claude-sonnet-4-5-20250929","id":"msg_01B","type":"message","role":"assistant","content":[{"type":"text","text":"The second chart is offset by the sidebar's width: the resize handler mounts it again."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":13700,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":30}},"type":"assistant","uuid":"a2","timestamp":"2026-01-02T10:00:12.000Z"}`,
		`"type":"user","message":{"role":"user","content":"Fix it."},"uuid":"u3","timestamp":"2026-01-02T10:01:00.000Z"}`,
		`"message":{"model":"claude-sonnet-4-5-20250929","id":"msg_01C","type":"message","role":"assistant","content":[{"type":"text","text":"Done: the handler now unmounts the old chart first."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":13760,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":20}},"type":"assistant","uuid":"a3","timestamp":"2026-01-02T10:01:20.000Z"}`,
	}
	var b strings.Builder
	parent := "null"
	for i, l := range lines {
		b.WriteString(strings.Replace(head, "%P", parent, 1))
		b.WriteString(l)
		b.WriteByte('\n')
		parent = `"` + []string{"u1", "a1", "u2", "a2", "u3", "a3"}[i] + `"`
	}
	return b.String()
}

// TestReplayDamagedScreenshot: a screenshot whose base64 a secret
// scrubber marked in the transcript is replayed as an image at a 64K
// window: no request crosses the overflow line (read as text, its 211 KB
// made the request that holds it 85K tokens, above the 56K line), and
// the largest request is the one without the image plus the image's
// tokens.
func TestReplayDamagedScreenshot(t *testing.T) {
	peak := func(b64 string) jsonReport {
		t.Helper()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "5f1d7c2e-9a41-4b7e-8e0f-2c6b1d9a7e31.jsonl"), []byte(screenshotSession(b64)), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, err := runArgs(t, false, "--window", "64k", "--json", dir)
		if err != nil {
			t.Fatal(err, errOut)
		}
		return decode(t, out)
	}
	without := peak("")
	for _, dmg := range imagetest.Damages {
		t.Run(dmg.Name, func(t *testing.T) {
			r := peak(dmg.Apply(imagetest.Screenshot(t)))
			if r.Total.Requests != 3 {
				t.Fatalf("%d requests replayed", r.Total.Requests)
			}
			if r.Total.OverLine != 0 || r.Total.OrigOverLine != 0 {
				t.Errorf("requests above the overflow line: %d sent, %d in the original", r.Total.OverLine, r.Total.OrigOverLine)
			}
			if want := without.Total.PeakOrigTokens + tokens.ImageTokens(imagetest.ScreenshotWidth, imagetest.ScreenshotHeight); r.Total.PeakOrigTokens != want {
				t.Errorf("largest request %d tokens, want %d (%d without the image)", r.Total.PeakOrigTokens, want, without.Total.PeakOrigTokens)
			}
		})
	}
}
