package clearing

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tools/transcript"
	"github.com/ctxguard/ctxguard/tools/validate"
)

func TestTrim(t *testing.T) {
	big := strings.Repeat("output line with some words in it\n", 120)
	var rounds []round
	for i := 0; i < 12; i++ {
		rounds = append(rounds, round{"Bash", `{"command":"step"}`, big, "think"})
	}
	orig := build(`{"type":"adaptive"}`, rounds)
	// Give one assistant message text next to its call: it must survive.
	orig = []byte(strings.Replace(string(orig), `{"type":"tool_use","id":"toolu_001"`, `{"type":"text","text":"checking the build"},{"type":"tool_use","id":"toolu_001"`, 1))
	cfg := testConfig()
	cfg.Trim = Trim{Enabled: true, KeepRounds: 3}
	st := store.NewMemory()
	p, err := New(cfg, &store.Blobs{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	c, err := anthropic.Parse(orig)
	if err != nil {
		t.Fatal(err)
	}
	a, pl := analyzed(t, p, c, nil)
	runs := p.trimRuns(c, a, pl)
	if len(runs) == 0 {
		t.Fatalf("no runs; plan %+v", pl)
	}
	res := pipeline.New(nil, p).Run(&pipeline.Request{Conv: c})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if err := validate.Request(res.Body); err != nil {
		t.Fatalf("trimmed request is invalid: %v", err)
	}
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(res.Body, &req); err != nil {
		t.Fatal(err)
	}
	dropped := 0
	for _, rn := range runs {
		dropped += rn[1] - rn[0] + 1 - 2
	}
	if got, want := len(req.Messages), len(c.Messages)-dropped; got != want {
		t.Errorf("%d messages, want %d", got, want)
	}
	body := string(res.Body)
	if !strings.Contains(body, `"checking the build"`) {
		t.Error("text next to a dropped call was lost")
	}
	if !strings.Contains(body, "[ctxguard dropped ") {
		t.Error("no note")
	}
	// The newest KeepRounds rounds are intact.
	for i := 9; i < 12; i++ {
		if !strings.Contains(body, `"toolu_0`+string(rune('0'+i/10))+string(rune('0'+i%10))+`"`) {
			t.Errorf("round %d dropped", i)
		}
	}
	// The note's blob holds the dropped messages, readable: every call and
	// result of the run, with the results' text as it was.
	for _, rn := range runs {
		want, err := c.AppendTranscript(nil, rn[0], rn[1])
		if err != nil {
			t.Fatal(err)
		}
		id := store.ID(want)
		rc, err := st.OpenBlob(context.Background(), id)
		if err != nil {
			t.Fatalf("run %v: blob %s: %v", rn, id, err)
		}
		b, _ := io.ReadAll(rc)
		if !bytes.Equal(b, want) || !strings.Contains(string(b), big) || strings.Count(string(b), "[tool call Bash") != (rn[1]-rn[0]+1)/2 {
			t.Errorf("blob of run %v does not hold its calls and results", rn)
		}
		if !strings.Contains(body, "blob "+id) {
			t.Errorf("note does not name blob %s", id)
		}
	}
}

// TestTrimBlankText: Claude Code sends a text of white space alone
// ("\n\n") before the thinking and tool calls of an assistant message.
// Where trimming drops such a round, the Messages API would refuse the
// message left holding only that text, so it goes with the round; the
// Responses API's message items and Chat Completions' content stay as
// they are. Every protocol's rewrite is valid by its validator.
func TestTrimBlankText(t *testing.T) {
	big := strings.Repeat("output line with some words in it\n", 120)
	var jsonl strings.Builder
	line := func(typ, msg string) {
		jsonl.WriteString(`{"type":"` + typ + `","sessionId":"s","message":` + msg + "}\n")
	}
	line("user", `{"role":"user","content":"start the task"}`)
	for i := range 12 {
		id := fmt.Sprintf("toolu_%03d", i)
		blocks := `{"type":"tool_use","id":"` + id + `","name":"Bash","input":{"command":"step"}}`
		switch i {
		case 0, 2: // white space alone beside the call
			blocks = `{"type":"text","text":"\n\n"},{"type":"thinking","thinking":"plan","signature":"c2ln` + id + `"},` + blocks
		case 1: // white space and text
			blocks = `{"type":"text","text":"\n\n"},{"type":"thinking","thinking":"plan more","signature":"c2ln1"},{"type":"text","text":"checking the build"},` + blocks
		}
		line("assistant", `{"id":"msg_`+id+`","model":"claude-opus-4-6","role":"assistant","content":[`+blocks+`]}`)
		line("user", `{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+id+`","content":`+q(big)+`}]}`)
	}
	line("assistant", `{"id":"msg_end","model":"claude-opus-4-6","role":"assistant","content":[{"type":"text","text":"done"}]}`)
	ss := transcript.ParseClaudeCode([]byte(jsonl.String()), "s.jsonl", transcript.Options{})
	if len(ss) != 1 || ss[0].Stats.Repairs.Total() != 0 {
		t.Fatalf("transcript: %d sessions, %+v", len(ss), ss[0].Stats)
	}
	// One event drops rounds 0-2 as one run (the first goes whole, the
	// second keeps its text, the last holds the note), another rounds 4-6.
	cfg := testConfig()
	cfg.Trigger = model.Tokens(6000)
	cfg.ClearAtLeast = model.Tokens(3000)
	cfg.Trim = Trim{Enabled: true, KeepRounds: 3}
	pc := propConfig{cfg: cfg}
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			b, err := transcript.NewBuilder(ss[0], transcript.BuildOptions{Protocol: w.name})
			if err != nil {
				t.Fatal(err)
			}
			r, err := b.Request(b.Len() - 1)
			if err != nil {
				t.Fatal(err)
			}
			c, err := w.proto.Parse(r.Body)
			if err != nil {
				t.Fatal(err)
			}
			blankBefore := blankTexts(c)
			p, err := New(cfg, &store.Blobs{Store: store.NewMemory()})
			if err != nil {
				t.Fatal(err)
			}
			res := pipeline.New(nil, p).Run(&pipeline.Request{Conv: c})
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if err := w.valid(pc, r.Body, res.Body); err != nil {
				t.Fatalf("invalid rewrite: %v", err)
			}
			body := string(res.Body)
			for _, id := range []string{"toolu_000", "toolu_001", "toolu_002"} {
				if strings.Contains(body, id) {
					t.Fatalf("round %s was not trimmed", id)
				}
			}
			if !strings.Contains(body, "checking the build") {
				t.Error("text next to a dropped call was lost")
			}
			sent, err := w.proto.Parse(res.Body)
			if err != nil {
				t.Fatal(err)
			}
			want := blankBefore
			if w.proto == anthropic.Protocol {
				want = 0
			}
			if got := blankTexts(sent); blankBefore == 0 || got != want {
				t.Errorf("%d texts of white space alone, want %d (the original: %d)", got, want, blankBefore)
			}
		})
	}
}

// blankTexts counts the text blocks of c's messages that hold white space
// alone ("" not counted: Chat Completions' content beside tool calls).
func blankTexts(c *conversation.Conversation) int {
	n := 0
	for _, m := range c.Messages {
		for _, b := range m.Blocks {
			if b.Kind == conversation.Text && b.Text.Len() > 2 && jsonscan.Blank(c.Bytes(b.Text)) {
				n++
			}
		}
	}
	return n
}
