package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/guardtest"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/store"
)

// FuzzRewriteBody: whatever a client sends, as a request of any protocol,
// the Guard never panics, with every rule off it forwards the bytes
// unchanged, and with the defaults a valid JSON body stays valid JSON and
// an invalid one is forwarded as it came.
func FuzzRewriteBody(f *testing.F) {
	files, _ := filepath.Glob("testdata/fidelity/*.json")
	captures, _ := filepath.Glob("openai/responses/testdata/codex/*.body.raw")
	chats, _ := filepath.Glob("openai/chat/testdata/opencode-*.body.json")
	captures = append(captures, chats...)
	files = append(files, captures...)
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add(guardtest.BigResult())
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"\u001b[1m"}]}]}`))
	off := guardtest.AllOff()
	off.DataDir = f.TempDir()
	gOff := newEngine(f, off, withStore(store.NewMemory()))
	on := config.Defaults()
	on.DataDir = f.TempDir()
	pass.Update(&on.Passes, func(s *clearing.Config) {
		s.Trigger.UnmarshalText([]byte("100"))
		s.Payback = 0
	})
	gOn := newEngine(f, on, withStore(store.NewMemory()))
	f.Fuzz(func(t *testing.T, body []byte) {
		orig := bytes.Clone(body)
		for _, p := range protocols {
			if r := gOff.RewriteBody(context.Background(), p, nil, body); !bytes.Equal(r.Body, orig) {
				t.Fatalf("%s: all rules off changed the body", p.Name())
			}
			r := gOn.RewriteBody(context.Background(), p, nil, body)
			if !bytes.Equal(body, orig) {
				t.Fatalf("%s: input modified", p.Name())
			}
			if json.Valid(orig) != json.Valid(r.Body) {
				t.Fatalf("%s: validity changed: %q -> %q", p.Name(), orig, r.Body)
			}
			if !json.Valid(orig) && !bytes.Equal(r.Body, orig) {
				t.Fatalf("%s: invalid JSON was not forwarded untouched", p.Name())
			}
		}
	})
}
