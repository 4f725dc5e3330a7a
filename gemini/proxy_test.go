package gemini_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/gemini"
	"github.com/ctxguard/ctxguard/gemini/geminitest"
	"github.com/ctxguard/ctxguard/internal/guardtest"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/record"
)

// world is a Guard's proxy in front of the fake Gemini API, with the
// records it publishes and its log.
type world struct {
	up  *geminitest.Server
	srv *httptest.Server
	mu  sync.Mutex
	rec []*record.Exchange
	log bytes.Buffer
}

func newWorld(t *testing.T, cfg config.Config, script func(*geminitest.Request) geminitest.Turn) *world {
	t.Helper()
	w := &world{up: geminitest.New(geminitest.Options{Script: script})}
	w.up.Start()
	t.Cleanup(w.up.Close)
	cfg.Upstreams = config.AllUpstreams(w.up.URL)
	cfg.DataDir = t.TempDir()
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &w.log, mu: &w.mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	g, err := ctxguard.New(cfg, ctxguard.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	g.Records().Subscribe(record.ObserverFunc(func(x *record.Exchange) {
		w.mu.Lock()
		w.rec = append(w.rec, x)
		w.mu.Unlock()
	}))
	h, err := g.Handler()
	if err != nil {
		t.Fatal(err)
	}
	w.srv = httptest.NewServer(h)
	t.Cleanup(w.srv.Close)
	return w
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// post sends body to path (with query) as the Gemini CLI does, and
// returns the answer's status and body.
func (w *world) post(t *testing.T, pathQuery string, body []byte) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("POST", w.srv.URL+pathQuery, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Goog-Api-Key", "AIza-secret-header-key")
	req.Header.Set("X-Goog-Api-Client", "google-genai-sdk/1.30.0 gl-node/v20.20.2")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b, res.Header
}

// records waits for n records.
func (w *world) records(t *testing.T, n int) []*record.Exchange {
	t.Helper()
	for range 300 {
		w.mu.Lock()
		got := append([]*record.Exchange(nil), w.rec...)
		w.mu.Unlock()
		if len(got) >= n {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("fewer than %d records", n)
	return nil
}

func captureFiles(t *testing.T) []string {
	files, err := filepath.Glob("testdata/cli/*.body.json")
	if err != nil || len(files) == 0 {
		t.Fatal("no captures", err)
	}
	sort.Strings(files)
	return files
}

// TestFidelityThroughProxy: with every rule off, the upstream receives
// each of the real CLI's requests byte for byte, with the client's key
// header and query, and the answer's usage reaches the record whatever
// the stream's shape.
func TestFidelityThroughProxy(t *testing.T) {
	w := newWorld(t, guardtest.AllOff(), nil)
	queries := []string{"?alt=sse", "", "?alt=sse&key=AIza-secret-query-key"}
	for i, f := range captureFiles(t) {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		path := "/v1beta/models/gemini-3.8-flash:streamGenerateContent" + queries[i%len(queries)]
		if strings.Contains(f, "route") {
			path = "/v1beta/models/gemini-3.5-flash-lite:generateContent"
		}
		status, _, _ := w.post(t, path, body)
		if status != 200 {
			t.Fatalf("%s: status %d", f, status)
		}
		reqs := w.up.Requests()
		got := reqs[len(reqs)-1]
		if !bytes.Equal(got.Body, body) {
			t.Errorf("%s: the upstream got another body", f)
		}
		if got.Header.Get("X-Goog-Api-Key") != "AIza-secret-header-key" || "?"+got.Query != path[strings.IndexByte(path+"?", '?'):] && got.Query != "" {
			t.Errorf("%s: key header %q, query %q", f, got.Header.Get("X-Goog-Api-Key"), got.Query)
		}
	}
	recs := w.records(t, len(captureFiles(t)))
	for _, x := range recs {
		if x.Protocol != "gemini" || x.Usage == nil || x.Usage.PromptTokens() == 0 || !strings.HasPrefix(x.Model, "gemini-3.") {
			t.Errorf("record %s %s: protocol %q model %q usage %+v", x.Path, x.Protocol, x.Protocol, x.Model, x.Usage)
		}
	}
	w.mu.Lock()
	logged := w.log.String()
	w.mu.Unlock()
	if strings.Contains(logged, "AIza-secret") {
		t.Error("the log names a key")
	}
}

// TestKeyNeverLogged: an unreachable upstream's error names the URL;
// neither the log nor the record holds the key query parameter.
func TestKeyNeverLogged(t *testing.T) {
	w := newWorld(t, guardtest.AllOff(), nil)
	w.up.Close() // unreachable from now on
	body, _ := os.ReadFile(captureFiles(t)[1])
	status, answer, _ := w.post(t, "/v1beta/models/gemini-3.8-flash:streamGenerateContent?alt=sse&key=AIza-secret-query-key", body)
	if status != http.StatusBadGateway {
		t.Fatalf("status %d: %s", status, answer)
	}
	if !strings.Contains(string(answer), `"status":"INTERNAL"`) || !strings.Contains(string(answer), `"code":500`) {
		t.Errorf("the error is not in the API's shape: %s", answer)
	}
	recs := w.records(t, 1)
	w.mu.Lock()
	logged := w.log.String()
	w.mu.Unlock()
	if strings.Contains(logged, "AIza-secret") || strings.Contains(recs[0].Error, "AIza-secret") || !strings.Contains(logged, "streamGenerateContent") {
		t.Errorf("the key leaked (or nothing was logged):\n%s\nrecord: %s", logged, recs[0].Error)
	}
}

// session returns the request of turn n of a Gemini CLI-like session:
// n rounds of a shell call (its first call signed) and a large output.
func session(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"contents":[{"parts":[{"text":"<session_context>\nThis is the Gemini CLI.\n</session_context>"},{"text":"Run the tests until they pass."}],"role":"user"}`)
	for i := range n {
		out := strings.Repeat(fmt.Sprintf("PASS test_%d_line ok %d\\n", i, i), 900)
		fmt.Fprintf(&b, `,{"parts":[{"functionCall":{"id":"run_shell_command_%d_0","args":{"command":"go test ./pkg%d/"},"name":"run_shell_command"},"thoughtSignature":"c2lnLSVk%d"}],"role":"model"}`, i, i, i)
		fmt.Fprintf(&b, `,{"parts":[{"functionResponse":{"name":"run_shell_command","response":{"output":"%s"},"id":"run_shell_command_%d_0"}}],"role":"user"}`, out, i)
	}
	b.WriteString(`],"systemInstruction":{"parts":[{"text":"You are an interactive CLI agent."}],"role":"user"},"tools":[{"functionDeclarations":[{"name":"run_shell_command","description":"Runs a command.","parametersJsonSchema":{"type":"object","properties":{"command":{"type":"string"}}}}]}],"generationConfig":{"temperature":1,"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"HIGH"}}}`)
	return []byte(b.String())
}

// TestRewriteThroughProxy: with the defaults and a small window, a long
// Gemini session is rewritten into valid requests that keep every
// signature of the parts they keep, and the answers' usage is read.
func TestRewriteThroughProxy(t *testing.T) {
	cfg := config.Defaults()
	cfg.Models.Overrides = map[string]model.Limits{"gemini-2.5-pro": {Window: 100_000, MaxOutput: 8_000}}
	w := newWorld(t, cfg, func(r *geminitest.Request) geminitest.Turn {
		return geminitest.Turn{Parts: []geminitest.Part{geminitest.Call("run_shell_command", `{"command":"go test"}`, "c2ln")}}
	})
	changed := 0
	for n := 1; n <= 30; n++ {
		body := session(n)
		status, answer, hdr := w.post(t, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", body)
		if status != 200 {
			t.Fatalf("turn %d: %d %s", n, status, answer)
		}
		reqs := w.up.Requests()
		sent := reqs[len(reqs)-1].Body
		if !bytes.Equal(sent, body) {
			changed++
		}
		if err := gemini.ValidateRewrite(body, sent); err != nil {
			t.Fatalf("turn %d (passes %s): %v", n, hdr.Get("X-Ctxguard-Passes"), err)
		}
	}
	if changed == 0 {
		t.Fatal("no request was rewritten")
	}
	recs := w.records(t, 30)
	last := recs[len(recs)-1]
	if last.Model != "gemini-2.5-pro" || last.TokensAfter >= last.TokensBefore || last.Usage == nil {
		t.Errorf("last record: model %q tokens %d -> %d usage %+v", last.Model, last.TokensBefore, last.TokensAfter, last.Usage)
	}
}

// TestRecoverThroughProxy: an upstream whose window is smaller than
// ctxguard believes refuses a turn with Gemini's overflow error; ctxguard
// reads its numbers, compacts the request (the summary written by a
// call of its own through the Gemini API, with the session's key) and
// retries once; the client gets the retry's answer, and the retry is a
// valid rewrite that fits.
func TestRecoverThroughProxy(t *testing.T) {
	var mu sync.Mutex
	limit := 0 // bytes; set from the first turn
	w := newWorld(t, config.Defaults(), func(r *geminitest.Request) geminitest.Turn {
		mu.Lock()
		defer mu.Unlock()
		if r.Action == "generateContent" {
			if r.Header.Get("X-Goog-Api-Key") != "AIza-secret-header-key" {
				return geminitest.Turn{Status: 401, Message: "API key not valid"}
			}
			return geminitest.Turn{Parts: []geminitest.Part{geminitest.Text("## Goal\nRun the tests until they pass.\n## Done\nRan go test in many packages; all PASS.")}}
		}
		if limit == 0 {
			limit = len(r.Body) * 3 / 5
		}
		if len(r.Body) > limit {
			return geminitest.Overflow(len(r.Body)/4, limit/4)
		}
		return geminitest.Turn{Parts: []geminitest.Part{geminitest.Text("all green")}}
	})
	body := session(40)
	status, answer, hdr := w.post(t, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", body)
	if status != 200 || hdr.Get("X-Ctxguard-Recovered") != "1" || !strings.Contains(string(answer), "all green") {
		t.Fatalf("status %d, recovered %q: %.300s", status, hdr.Get("X-Ctxguard-Recovered"), answer)
	}
	var turns [][]byte
	for _, r := range w.up.Requests() {
		if r.Action == "streamGenerateContent" {
			turns = append(turns, r.Body)
		}
	}
	if len(turns) != 2 || len(turns[1]) > limit {
		t.Fatalf("%d turns reached the upstream (the retry %d bytes, limit %d)", len(turns), len(turns[len(turns)-1]), limit)
	}
	if err := gemini.ValidateRewrite(body, turns[1]); err != nil {
		t.Errorf("the retry: %v", err)
	}
}

// TestCompactionThroughProxy: with only compaction on, a Gemini session
// that outgrows its window gets a summary written by ctxguard's own call
// to the small Gemini model, with the session's key, and the requests
// after the swap carry it.
func TestCompactionThroughProxy(t *testing.T) {
	cfg := guardtest.AllOff()
	cfg.Passes.Switch("compact", true)
	cfg.Models.Overrides = map[string]model.Limits{"gemini-2.5-pro": {Window: 100_000, MaxOutput: 8_000}}
	const summary = "## Goal\nRun the tests until they pass (summary by the fake)."
	w := newWorld(t, cfg, func(r *geminitest.Request) geminitest.Turn {
		if r.Action == "generateContent" {
			return geminitest.Turn{Parts: []geminitest.Part{geminitest.Text(summary)}}
		}
		return geminitest.Turn{Parts: []geminitest.Part{geminitest.Text("ok")}}
	})
	carried := false
	for n := 1; n <= 20 && !carried; n++ {
		body := session(n)
		status, answer, _ := w.post(t, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", body)
		if status != 200 {
			t.Fatalf("turn %d: %d %s", n, status, answer)
		}
		// The session's own request: ctxguard's summary call may reach
		// the upstream after it.
		var sent []byte
		for _, r := range w.up.Requests() {
			if r.Action == "streamGenerateContent" {
				sent = r.Body
			}
		}
		if err := gemini.ValidateRewrite(body, sent); err != nil {
			t.Fatalf("turn %d: %v", n, err)
		}
		carried = strings.Contains(string(sent), "summary by the fake")
		if !carried {
			time.Sleep(20 * time.Millisecond) // the summary is written in the background
		}
	}
	if !carried {
		t.Fatal("no request carried the summary")
	}
	var call *geminitest.Request
	for _, r := range w.up.Requests() {
		if r.Action == "generateContent" {
			call = &r
		}
	}
	if call == nil || call.Model != gemini.SmallModel || call.Header.Get("X-Goog-Api-Key") != "AIza-secret-header-key" || call.Header.Get("X-Goog-Api-Client") != "" {
		t.Fatalf("the summarizer's call: %+v", call)
	}
	if err := gemini.Validate(call.Body); err != nil {
		t.Errorf("the summarizer's request: %v", err)
	}
}

// TestTransport: an SDK whose base URL has a path of its own (a gateway
// prefix) sends Gemini requests through the Guard's Transport; they are
// rewritten like the proxy's.
func TestTransport(t *testing.T) {
	up := geminitest.New(geminitest.Options{})
	up.Start()
	defer up.Close()
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Upstreams = config.AllUpstreams(up.URL)
	g, err := ctxguard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	recs := make(chan *record.Exchange, 1)
	g.Records().Subscribe(record.ObserverFunc(func(x *record.Exchange) { recs <- x }))
	client := &http.Client{Transport: g.Transport(nil)}
	body := session(30)
	req, _ := http.NewRequest("POST", up.URL+"/gateway/gemini/v1beta/models/gemini-2.5-pro:generateContent", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Goog-Api-Key", "k")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	select {
	case x := <-recs:
		if x.Protocol != "gemini" || x.Model != "gemini-2.5-pro" || x.Path != "/v1beta/models/gemini-2.5-pro:generateContent" || x.Usage == nil {
			t.Errorf("record: %s %s %s usage %v", x.Protocol, x.Model, x.Path, x.Usage)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no record: the request was not rewritten")
	}
	got := up.Requests()
	if len(got) != 1 || len(got[0].Body) >= len(body) {
		t.Errorf("the upstream got %d requests, %d bytes of %d", len(got), len(got[0].Body), len(body))
	}
}
