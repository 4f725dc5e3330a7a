package gemini_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/gemini"
	"github.com/ctxguard/ctxguard/internal/guardtest"
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

// benchAnswer is a streamed Gemini answer, as the API writes it.
const benchAnswer = "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"ok\"}]},\"finishReason\":\"STOP\",\"index\":0}]," +
	"\"usageMetadata\":{\"promptTokenCount\":250000,\"candidatesTokenCount\":1,\"totalTokenCount\":250001,\"cachedContentTokenCount\":240000},\"modelVersion\":\"gemini-2.5-pro\"}\r\n\r\n"

// BenchmarkAddedLatency measures what ctxguard adds to a Gemini turn of
// about 1 MB on the wire: the Guard's proxy (every shipped rule on, and
// every rule off) in front of an upstream streaming a Gemini SSE answer,
// against a plain streaming Go passthrough (httputil.ReverseProxy),
// requests interleaved round-robin so that load from other processes
// hits every hop alike. The same request is sent again and again (the
// session's memory makes its parse incremental, as for a session's next
// turn). It reports each hop's median (<hop>-ns) and ctxguard's median
// minus the passthrough's (<hop>-over-plain-ns). With the rules on, the
// body ctxguard sends is much smaller than the client's, which the
// upstream then reads faster.
func BenchmarkAddedLatency(b *testing.B) {
	body := benchBody()
	// The upstream drains the body and streams a short answer, as the
	// API does; it keeps nothing (geminitest keeps every body).
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, benchAnswer)
	}))
	defer up.Close()
	upURL, _ := url.Parse(up.URL)
	plain := httputil.NewSingleHostReverseProxy(upURL)
	plain.FlushInterval = -1
	plainSrv := httptest.NewServer(plain)
	defer plainSrv.Close()
	type hop struct {
		name, url string
		times     []time.Duration
	}
	hops := []*hop{{name: "plain-passthrough", url: plainSrv.URL}}
	for _, v := range []struct {
		name string
		cfg  config.Config
	}{{"ctxguard-all-rules", config.Defaults()}, {"ctxguard-rules-off", guardtest.AllOff()}} {
		v.cfg.DataDir = b.TempDir()
		v.cfg.Upstreams = config.AllUpstreams(up.URL)
		g, err := ctxguard.New(v.cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer g.Close()
		h, err := g.Handler()
		if err != nil {
			b.Fatal(err)
		}
		s := httptest.NewServer(h)
		defer s.Close()
		hops = append(hops, &hop{name: v.name, url: s.URL})
	}
	c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	one := func(h *hop) {
		start := time.Now()
		req, _ := http.NewRequest("POST", h.url+"/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Goog-Api-Key", "bench")
		res, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || n == 0 {
			b.Fatalf("%s: status %d, %d bytes", h.name, res.StatusCode, n)
		}
		h.times = append(h.times, time.Since(start))
	}
	for range 10 { // warm up connections, pools and the session's memory
		for _, h := range hops {
			one(h)
		}
	}
	for _, h := range hops {
		h.times = h.times[:0]
	}
	b.SetBytes(int64(len(body) * len(hops)))
	b.ReportAllocs()
	for b.Loop() {
		for _, h := range hops {
			one(h)
		}
	}
	median := func(h *hop) time.Duration {
		slices.Sort(h.times)
		return h.times[len(h.times)/2]
	}
	base := median(hops[0])
	for _, h := range hops {
		m := median(h)
		b.ReportMetric(float64(m.Nanoseconds()), h.name+"-ns")
		if h != hops[0] {
			b.ReportMetric(float64((m - base).Nanoseconds()), h.name+"-over-plain-ns")
		}
	}
}
