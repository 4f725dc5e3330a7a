package loadtest

import (
	"context"
	"net/http"
	"testing"

	"github.com/ctxguard/ctxguard"
	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/internal/module"
	"github.com/ctxguard/ctxguard/tokens"
)

// BenchmarkRewrite breaks down what ctxguard serve spends per request
// outside HTTP, in-process, on the harness's bodies (one session, as a
// worker sends it): parsing, a whole-body token estimate, and
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
	h := http.Header{}
	h.Set("Anthropic-Beta", "claude-code-20250219,context-management-2025-06-27,interleaved-thinking-2025-05-14")
	h.Set("X-Claude-Code-Session-Id", sessionID(0))
	for _, size := range []int{100 << 10, 1 << 20, 5 << 20} {
		body, err := src.Sized(size, sessionID(0))
		if err != nil {
			b.Fatal(err)
		}
		data := body.Data
		b.Run(sizeName(size)+"/parse", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := anthropic.Parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sizeName(size)+"/tokens", func(b *testing.B) {
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
			b.Run(sizeName(size)+"/rewrite-"+pc.name, func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for b.Loop() {
					if res := g.RewriteBody(context.Background(), anthropic.Protocol, h, data); res.Err != nil {
						b.Fatal(res.Err)
					}
				}
			})
			if pc.name == "all" {
				// Without a session header the Guard remembers nothing:
				// every request is parsed and judged whole, as the first
				// request of a session (or one after a restart) is.
				b.Run(sizeName(size)+"/rewrite-all-cold", func(b *testing.B) {
					b.SetBytes(int64(len(data)))
					b.ReportAllocs()
					for b.Loop() {
						if res := g.RewriteBody(context.Background(), anthropic.Protocol, nil, data); res.Err != nil {
							b.Fatal(res.Err)
						}
					}
				})
			}
			g.Close()
		}
	}
}
