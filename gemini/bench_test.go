package gemini_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/ctxguard/ctxguard"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/gemini"
	"github.com/ctxguard/ctxguard/protocol"
)

// benchBody is a Gemini CLI-like request of about 1 MB (session).
func benchBody() []byte { return session(42) }

func BenchmarkParse(b *testing.B) {
	body := benchBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		c, err := gemini.Parse(body)
		if err != nil {
			b.Fatal(err)
		}
		c.Release()
	}
}

// BenchmarkRewrite is what the Guard spends on one ~1 MB Gemini request
// of a session it has seen (the proxy's added work besides the HTTP
// hop), with no pass and with the shipped passes on.
func BenchmarkRewrite(b *testing.B) {
	body := benchBody()
	proto := gemini.Protocol.(protocol.PathBound).ForPath("/v1beta/models/gemini-2.5-pro:streamGenerateContent")
	for _, on := range []bool{false, true} {
		cfg := config.Defaults()
		cfg.DataDir = b.TempDir()
		cfg.Upstreams = config.AllUpstreams("http://127.0.0.1:1")
		for _, p := range []string{"compress", "persist", "clear"} {
			cfg.Passes.Switch(p, on)
		}
		g, err := ctxguard.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		h := http.Header{}
		if res := g.RewriteBody(context.Background(), proto, h, body); res.Err != nil {
			b.Fatal(res.Err)
		}
		name := "none"
		if on {
			name = "all"
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if res := g.RewriteBody(context.Background(), proto, h, body); res.Err != nil {
					b.Fatal(res.Err)
				}
			}
		})
		g.Close()
	}
}
