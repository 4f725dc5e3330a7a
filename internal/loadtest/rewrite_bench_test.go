package loadtest

import (
	"context"
	"net/http"
	"testing"

	"github.com/ctxguard/ctxguard"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/module"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/tokens"
)

// BenchmarkRewrite breaks down what ctxguard serve spends per request
// outside HTTP, in-process, on the harness's bodies of every protocol (one
// session, as a worker sends it): parsing, a whole-body token estimate, and
// Guard.RewriteBody with no pass, with each pass alone, and with every
// pass on (the harness's configuration). Profile it with -cpuprofile;
// compare runs with benchstat.
func BenchmarkRewrite(b *testing.B) {
	root, err := module.Root(".")
	if err != nil {
		b.Fatal(err)
	}
	src, err := NewSource(DefaultSessions(root), "")
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range []Protocol{Anthropic, Responses, Chat} {
		for _, size := range []int{100 << 10, 1 << 20, 5 << 20} {
			benchRewrite(b, src, p, size)
		}
	}
}

func benchRewrite(b *testing.B, src *Source, p Protocol, size int) {
	var proto protocol.Protocol
	for _, pr := range ctxguard.Protocols() {
		if pr.Name() == string(p) {
			proto = pr
		}
	}
	if proto == nil {
		b.Fatalf("ctxguard speaks no protocol %q", p)
	}
	h := http.Header{}
	switch p {
	case Anthropic:
		h.Set("Anthropic-Beta", "claude-code-20250219,context-management-2025-06-27,interleaved-thinking-2025-05-14")
		h.Set("X-Claude-Code-Session-Id", sessionID(0))
	case Responses:
		h.Set("Session-Id", sessionID(0))
	case Chat:
		h.Set("X-Session-Id", sessionID(0))
	}
	body, err := src.Sized(p, size, sessionID(0))
	if err != nil {
		b.Fatal(err)
	}
	data := body.Data
	name := string(p) + "/" + sizeName(size)
	b.Run(name+"/parse", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			c, err := proto.Parse(data)
			if err != nil {
				b.Fatal(err)
			}
			c.Release()
		}
	})
	b.Run(name+"/tokens", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			tokens.Estimate(data)
		}
	})
	for _, pc := range []struct {
		name                     string
		compress, persist, clear bool
	}{
		{"none", false, false, false},
		{"compress", true, false, false},
		{"persist", false, true, false},
		{"clear", false, false, true},
		{"all", true, true, true},
	} {
		cfg := config.Defaults()
		cfg.DataDir = b.TempDir()
		cfg.Upstreams = config.Upstreams{Anthropic: "http://127.0.0.1:1", OpenAI: "http://127.0.0.1:1"}
		cfg.Compress.Enabled, cfg.Persist.Enabled, cfg.Clear.Enabled = pc.compress, pc.persist, pc.clear
		g, err := ctxguard.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/rewrite-"+pc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if res := g.RewriteBody(context.Background(), proto, h, data); res.Err != nil {
					b.Fatal(res.Err)
				}
			}
		})
		if pc.name == "all" {
			// Without a session header the Guard remembers nothing:
			// every request is parsed and judged whole, as the first
			// request of a session (or one after a restart) is.
			b.Run(name+"/rewrite-all-cold", func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for b.Loop() {
					if res := g.RewriteBody(context.Background(), proto, nil, data); res.Err != nil {
						b.Fatal(res.Err)
					}
				}
			})
		}
		g.Close()
	}
}
