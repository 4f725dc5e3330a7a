package engine

import (
	"bytes"
	"context"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/guardtest"
)

// TestClientCompactionRecord: a client's own compaction goes as it came,
// and its record still tells the prompt's size and model (the dashboard
// draws it in its session).
func TestClientCompactionRecord(t *testing.T) {
	var rec guardtest.Recorder
	g := newEngine(t, config.Defaults())
	g.Records().Subscribe(&rec)
	body := []byte(`{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"fix it"},{"role":"assistant","content":"done"},` +
		`{"role":"user","content":"Your task is to create a detailed summary of the conversation so far."}]}`)
	res := g.RewriteBody(context.Background(), anthropic.Protocol, nil, body)
	x := rec.All()[0]
	if res.Skipped != "client compaction" || !bytes.Equal(res.Body, body) || x.TokensBefore <= 0 || x.TokensAfter != x.TokensBefore || x.Model != "claude-sonnet-4-5" || x.Window == 0 {
		t.Errorf("client compaction: skipped %q, %d→%d tokens, model %q window %d", res.Skipped, x.TokensBefore, x.TokensAfter, x.Model, x.Window)
	}
}
