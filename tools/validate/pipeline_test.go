package validate

import (
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/splice"
)

// passFunc adapts a function to pipeline.Pass.
type passFunc func(r *pipeline.Request) ([]splice.Edit, error)

func (passFunc) Name() string                                     { return "test" }
func (f passFunc) Run(r *pipeline.Request) ([]splice.Edit, error) { return f(r) }

// The validator accepts what the real pipeline produces for allowed
// changes, separators included, and rejects the same machinery pointed at
// the latest assistant message.
func TestPipelineOutput(t *testing.T) {
	dropThinking := func(skipLatest bool) pipeline.Pass {
		return passFunc(func(r *pipeline.Request) ([]splice.Edit, error) {
			var edits []splice.Edit
			last := r.Conv.LastAssistant()
			for i, m := range r.Conv.Messages {
				if m.Role != conversation.RoleAssistant || (skipLatest && i == last) {
					continue
				}
				for j, b := range m.Blocks {
					if (b.Kind == conversation.Thinking || b.Kind == conversation.RedactedThinking) && len(m.Blocks) > 1 {
						edits = append(edits, r.RemoveBlock(i, j))
					}
				}
			}
			return edits, nil
		})
	}
	clear := passFunc(func(r *pipeline.Request) ([]splice.Edit, error) {
		var edits []splice.Edit
		for _, m := range r.Conv.Messages {
			for _, b := range m.Blocks {
				if b.Kind == conversation.ToolResult {
					edits = append(edits, splice.Edit{Span: b.Content, Repl: []byte(`"[cleared]"`)})
				}
			}
		}
		return edits, nil
	})
	for _, tc := range []struct {
		name   string
		passes []pipeline.Pass
		want   []Rule
	}{
		{"drop old thinking, clear results", []pipeline.Pass{dropThinking(true), clear}, nil},
		{"drop all thinking", []pipeline.Pass{dropThinking(false)}, []Rule{RuleThinkingChanged}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := anthropic.Parse([]byte(base))
			if err != nil {
				t.Fatal(err)
			}
			res := pipeline.New(nil, tc.passes...).Run(&pipeline.Request{Conv: c})
			if res.Err != nil || !res.Changed {
				t.Fatalf("pipeline: changed %v, err %v", res.Changed, res.Err)
			}
			err = Rewrite([]byte(base), res.Body, Options{AllowThinkingRemoval: true})
			if got := rulesOf(t, err); !equalRules(got, tc.want) {
				t.Errorf("rules %v, want %v\nerror: %v\nbody: %s", got, tc.want, err, res.Body)
			}
		})
	}
}

func equalRules(a, b []Rule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
