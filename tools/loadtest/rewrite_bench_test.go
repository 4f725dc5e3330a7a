package loadtest

import (
	"context"
	"net/http"
	"strconv"
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
// pass on (the harness's configuration); with every pass on also as a
// session's first request (rewrite-all-first: nothing remembered) and
// without a session header (rewrite-all-noheader). Profile it with -cpuprofile;
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
	var sessionHeader string // the client's session header
	switch p {
	case Anthropic:
		h.Set("Anthropic-Beta", "claude-code-20250219,context-management-2025-06-27,interleaved-thinking-2025-05-14")
		sessionHeader = "X-Claude-Code-Session-Id"
	case Responses:
		sessionHeader = "Session-Id"
	case Chat:
		sessionHeader = "X-Session-Id"
	}
	h.Set(sessionHeader, sessionID(0))
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
		cfg.Upstreams = config.AllUpstreams("http://127.0.0.1:1")
		cfg.Passes.Switch("compress", pc.compress)
		cfg.Passes.Switch("persist", pc.persist)
		cfg.Passes.Switch("clear", pc.clear)
		g, err := ctxguard.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		// One request first, untimed: what a process does once (the
		// store's first writes) is not what a request costs.
		if res := g.RewriteBody(context.Background(), proto, h, data); res.Err != nil {
			b.Fatal(res.Err)
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
			// A session's first request: nothing is remembered of it (a
			// fresh session id each time), so it is parsed and judged
			// whole, as after a restart; the Guard remembers it for the
			// next.
			first := h.Clone()
			b.Run(name+"/rewrite-all-first", func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					n++
					first.Set(sessionHeader, "first-"+strconv.Itoa(n))
					if res := g.RewriteBody(context.Background(), proto, first, data); res.Err != nil {
						b.Fatal(res.Err)
					}
				}
			})
			// Without a session header (SDK apps): the Guard finds the
			// session's memo by the start of its conversation.
			bare := h.Clone()
			bare.Del(sessionHeader)
			b.Run(name+"/rewrite-all-noheader", func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for b.Loop() {
					if res := g.RewriteBody(context.Background(), proto, bare, data); res.Err != nil {
						b.Fatal(res.Err)
					}
				}
			})
		}
		g.Close()
	}
}
