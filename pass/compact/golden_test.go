package compact

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/shareddata"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/tokens"
	"github.com/ctxguard/ctxguard/tools/transcript"
)

var update = flag.Bool("update", false, "rewrite the golden summaries in testdata/golden")

// TestGoldenSummaries folds two real sessions (a Claude Code one and a
// Codex one, from the shared data) in three compactions each, at the
// budget of a 64K window, and compares the summaries with
// testdata/golden: they show the structure a compaction sends (the
// user's requests verbatim, the files and searches, the failures with
// their reasons, images, the commands with counts, the plan, the latest
// assistant messages, and what each leaves out counted with its blob).
// Run with -update to rewrite them after an intended change.
func TestGoldenSummaries(t *testing.T) {
	budget := model.SummaryBudget(56_000)
	for _, tc := range []struct {
		dir, file, golden string
		parse             func([]byte) (*conversation.Conversation, error)
	}{
		{"claude-code", "abc757d1-3da3-42fb-bb7b-ffa293a4ba29.jsonl", "claude-code-abc757d1.txt", anthropic.Parse},
		{"codex", "rollout-2026-02-04T22-14-12-019c2a81-73a6-7de0-a280-e83c91954ab1.jsonl", "codex-019c2a81.txt", responses.Parse},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			sessions, err := transcript.Load([]string{shareddata.File(t, tc.dir, tc.file)}, transcript.Options{SkipSidechains: true})
			if err != nil || len(sessions) != 1 {
				t.Fatalf("%d sessions, %v", len(sessions), err)
			}
			b, err := transcript.NewBuilder(sessions[0], transcript.BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			req, err := b.Request(b.Len() - 1)
			if err != nil {
				t.Fatal(err)
			}
			c, err := tc.parse(req.Body)
			if err != nil {
				t.Fatal(err)
			}
			// Three spans, each ending before an assistant message.
			var ends []int
			for _, frac := range []float64{0.35, 0.65, 0.9} {
				i := int(frac * float64(len(c.Messages)))
				for i < len(c.Messages) && c.Messages[i].Role != conversation.RoleAssistant {
					i++
				}
				ends = append(ends, i)
			}
			var out strings.Builder
			from := 0
			for i, rec := range foldSpans(t, newTestPass(t), c, ends, budget, nil) {
				if n := tokens.EstimateText(rec.Summary); n > budget {
					t.Errorf("compaction %d: %d tokens, over the budget of %d", i+1, n, budget)
				}
				span := fmt.Sprintf("messages [0, %d)", ends[i])
				if from > 0 {
					span += fmt.Sprintf(": the previous record's [0, %d) and [%d, %d)", from, from, ends[i])
				}
				fmt.Fprintf(&out, "==== compaction %d, %s ====\n%s\n\n", i+1, span, rec.Text)
				from = ends[i]
			}
			path := filepath.Join("testdata", "golden", tc.golden)
			if *update {
				if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if d := cmp.Diff(string(want), out.String()); d != "" {
				t.Errorf("summaries differ from %s (-want +got; -update rewrites it):\n%s", path, d)
			}
		})
	}
}
