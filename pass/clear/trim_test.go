package clear

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/validate"
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
