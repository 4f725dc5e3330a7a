package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/record"
)

// messagesBody builds a Claude Code-like Messages body of about size
// bytes: tool rounds whose results are long text.
func messagesBody(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"claude-opus-4-8","max_tokens":32000,"stream":true,"system":[{"type":"text","text":"You are Claude Code."}],"messages":[{"role":"user","content":"fix the bug"}`)
	line := strings.Repeat("drwxr-xr-x  2 root root  4096 Nov 22 02:42 some/path/file.go\\n", 20)
	for i := 0; b.Len() < size-200; i++ {
		fmt.Fprintf(&b, `,{"role":"assistant","content":[{"type":"text","text":"Running step %d."},{"type":"tool_use","id":"toolu_%06d","name":"Bash","input":{"command":"ls -la"}}]}`, i, i)
		fmt.Fprintf(&b, `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%06d","content":"%s"}]}`, i, line)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

const benchAnswer = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_read_input_tokens":1000,"output_tokens":1}}}` + "\n\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}` + "\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

func benchUpstream(b *testing.B) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		_, _ = io.WriteString(w, benchAnswer)
	}))
	b.Cleanup(s.Close)
	return s
}

// benchBaseline starts the fake upstream and a plain streaming Go
// passthrough (httputil.ReverseProxy) in front of it, the hops ctxguard
// is compared with.
func benchBaseline(b *testing.B) (upURL *url.URL, plainURL string) {
	up := benchUpstream(b)
	upURL, _ = url.Parse(up.URL)
	plain := httputil.NewSingleHostReverseProxy(upURL)
	plain.FlushInterval = -1
	plainSrv := httptest.NewServer(plain)
	b.Cleanup(plainSrv.Close)
	return upURL, plainSrv.URL
}

// BenchmarkProxy measures one Messages round trip through each hop:
// direct to the upstream, through a plain streaming Go passthrough
// (httputil.ReverseProxy), and through ctxguard with no Rewriter, with a
// Rewriter that parses the body, and with one that returns a new body.
// The overhead of ctxguard is its ns/op minus the plain passthrough's.
func BenchmarkProxy(b *testing.B) {
	for _, size := range []int{100 << 10, 1 << 20} {
		body := messagesBody(size)
		upURL, plainURL := benchBaseline(b)
		parse := RewriterFunc(func(_ context.Context, _ *http.Request, _ protocol.Protocol, body []byte) Outcome {
			if _, err := anthropic.Parse(body); err != nil {
				panic(err)
			}
			return Outcome{Body: body}
		})
		edited := RewriterFunc(func(_ context.Context, _ *http.Request, _ protocol.Protocol, body []byte) Outcome {
			out := make([]byte, len(body)-10, len(body))
			copy(out, body[:len(body)-12])
			copy(out[len(out)-2:], "]}")
			return Outcome{Body: out}
		})
		hops := []struct {
			name string
			url  string
		}{
			{"direct", upURL.String()},
			{"plain-passthrough", plainURL},
		}
		for _, v := range []struct {
			name string
			rw   Rewriter
		}{{"ctxguard-no-rewriter", nil}, {"ctxguard-parse", parse}, {"ctxguard-new-body", edited}} {
			p, err := New(Options{Upstream: upURL, Rewriter: v.rw, Protocols: []protocol.Protocol{anthropic.Protocol}, Record: func(*record.Exchange) {}})
			if err != nil {
				b.Fatal(err)
			}
			s := httptest.NewServer(p)
			b.Cleanup(s.Close)
			hops = append(hops, struct {
				name string
				url  string
			}{v.name, s.URL})
		}
		for _, hop := range hops {
			b.Run(fmt.Sprintf("%s/%dKB", hop.name, size>>10), func(b *testing.B) {
				c := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}}
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					req, _ := http.NewRequest("POST", hop.url+"/v1/messages?beta=true", bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("X-Api-Key", "sk-bench")
					res, err := c.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					n, _ := io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode != 200 || n != int64(len(benchAnswer)) {
						b.Fatalf("status %d, %d bytes", res.StatusCode, n)
					}
				}
			})
		}
	}
}

// BenchmarkReadBody compares the proxy's Content-Length-sized read with
// io.ReadAll.
func BenchmarkReadBody(b *testing.B) {
	body := messagesBody(1 << 20)
	b.Run("sized", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := readBody(bytes.NewReader(body), int64(len(body)), DefaultMaxBody, false, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("chunked", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := readBody(io.MultiReader(bytes.NewReader(body)), -1, DefaultMaxBody, false, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("io.ReadAll", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := io.ReadAll(bytes.NewReader(body)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkUsageTap measures the tap on a streamed answer.
func BenchmarkUsageTap(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(benchAnswer[:strings.Index(benchAnswer, "event: message_delta")])
	for range 2000 {
		sb.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"some words of the answer\"}}\n\n")
	}
	sb.WriteString(benchAnswer[strings.Index(benchAnswer, "event: message_delta"):])
	stream := []byte(sb.String())
	tap := anthropic.NewUsageTap("text/event-stream")
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		tap.Reset("text/event-stream")
		for c := stream; len(c) > 0; {
			n := min(len(c), 4096)
			tap.Write(c[:n])
			c = c[n:]
		}
		if _, ok := tap.Usage(); !ok {
			b.Fatal("no usage")
		}
	}
}

// BenchmarkOverhead measures the added latency of ctxguard over a plain
// streaming Go passthrough with requests interleaved round-robin (one
// request to each hop per iteration), so load from other processes hits
// every hop alike, which separate sub-benchmarks (BenchmarkProxy) cannot
// promise on a shared machine. Besides ns/op (one round over every hop)
// it reports each hop's median latency (<hop>-ns) and, for ctxguard's
// hops, the median minus the plain passthrough's (<hop>-over-plain-ns).
// Every answer must arrive whole with status 200.
func BenchmarkOverhead(b *testing.B) {
	for _, size := range []int{100 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			body := messagesBody(size)
			upURL, plainURL := benchBaseline(b)
			tap := RewriterFunc(func(_ context.Context, _ *http.Request, _ protocol.Protocol, body []byte) Outcome {
				return Outcome{Body: body}
			})
			type hop struct {
				name, url string
				times     []time.Duration
			}
			hops := []*hop{{name: "direct", url: upURL.String()}, {name: "plain-passthrough", url: plainURL}}
			for _, v := range []struct {
				name string
				opts Options
			}{
				{"ctxguard", Options{Upstream: upURL}},
				{"ctxguard+usage-tap", Options{Upstream: upURL, Rewriter: tap, Protocols: []protocol.Protocol{anthropic.Protocol}, Record: func(*record.Exchange) {}}},
			} {
				p, err := New(v.opts)
				if err != nil {
					b.Fatal(err)
				}
				s := httptest.NewServer(p)
				b.Cleanup(s.Close)
				hops = append(hops, &hop{name: v.name, url: s.URL})
			}
			c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
			one := func(h *hop) {
				start := time.Now()
				req, _ := http.NewRequest("POST", h.url+"/v1/messages?beta=true", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				res, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK || n != int64(len(benchAnswer)) {
					b.Fatalf("%s: status %d, %d bytes of %d", h.name, res.StatusCode, n, len(benchAnswer))
				}
				h.times = append(h.times, time.Since(start))
			}
			for range 20 { // warm up connections and pools
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
			base := median(hops[1])
			for _, h := range hops {
				m := median(h)
				b.ReportMetric(float64(m.Nanoseconds()), h.name+"-ns")
				if strings.HasPrefix(h.name, "ctxguard") {
					b.ReportMetric(float64((m - base).Nanoseconds()), h.name+"-over-plain-ns")
				}
			}
		})
	}
}
