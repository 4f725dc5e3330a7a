//go:build browser

package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/ctxguard/ctxguard"
	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/dashboard"
	"github.com/ctxguard/ctxguard/dashboard/chart"
	"github.com/ctxguard/ctxguard/internal/testtool"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/openaitest"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/pass/compress"
	"github.com/ctxguard/ctxguard/pass/persist"
)

// The client's credentials: recognisable, so that the test can show
// they reach no page and no API answer.
const (
	apiKey      = "sk-ant-api03-DASHBOARD-BROWSER-TEST-KEY-7f3e9c"
	bearerToken = "DASHBOARD-BROWSER-TEST-BEARER-51d2a0"
	sessionID   = "browser-session"
	sessionKey  = "anthropic:h:" + sessionID
	chatKey     = "chat:h:" + sessionID // the same header in another protocol: another session
	evilID      = `<img src=x onerror="window.pwned=1">`
)

// moneyShown is how the pages round dollars: cents, or less than one.
var moneyShown = regexp.MustCompile(`^(\$0|< \$0\.01|\$[0-9,]+\.[0-9]{2}|\$[0-9,]+)$`)

// sent is what the proxy said about one request of the session.
type sent struct {
	before, after int
	event         bool
}

func TestDashboard(t *testing.T) {
	chromium := findChromium(t)
	artifacts := os.Getenv("CTXGUARD_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}

	up := anthropictest.NewServer(anthropictest.Options{})
	defer up.Close()
	oa := openaitest.New(openaitest.Options{})
	oa.Start()
	defer oa.Close()
	base := start(t, testConfig(t, up.URL, oa.URL))

	// The session: each request the history so far plus one tool call and
	// its result; the first result is large, so the clear pass clears it
	// once the prompt passes clear.trigger (an edit event).
	results := make([]string, 7)
	var got []sent
	for k := range results {
		results[k] = fmt.Sprintf("RESULT-%d ", k) + strings.Repeat(fmt.Sprintf("line %d of file %d\n", k, k), map[bool]int{true: 1200, false: 90}[k == 0])
		h := post(t, base, sessionID, messages(results[:k+1]))
		got = append(got, sent{atoi(t, h.Get("X-Ctxguard-Tokens-Before")), atoi(t, h.Get("X-Ctxguard-Tokens-After")), h.Get("X-Ctxguard-Edit-Event") == "1"})
	}
	post(t, base, evilID, messages(results[:1]))
	// Counted, never listed as a session: a bypassed request of the
	// session and an unreadable one. A request in another protocol with
	// the same session header is a session of its own.
	postTo(t, base, "/v1/messages", sessionID, messages(results[:1]), http.Header{"X-Ctxguard-Bypass": {"1"}}, http.StatusOK)
	postTo(t, base, "/v1/messages", sessionID, []byte(`{"model":"claude-sonnet-4-5","messages":[`), nil, http.StatusBadRequest)
	postTo(t, base, "/v1/chat/completions", sessionID, []byte(`{"model":"gpt-5.2","stream":true,"messages":[{"role":"user","content":"Look at the files and fix the bug."}]}`), nil, http.StatusOK)
	const requests, unlisted = 11, 2
	eventAt := slices.IndexFunc(got, func(s sent) bool { return s.event })
	if eventAt < 0 {
		t.Fatalf("no request of the session had an edit event: %+v", got)
	}
	t.Logf("session: %+v; first event at request %d", got, eventAt+1)
	// The body the upstream got for the event request names the blobs.
	upBodies := up.MessagesRequests()
	if len(upBodies) != len(results)+3 {
		t.Fatalf("the upstream got %d requests, want %d", len(upBodies), len(results)+3)
	}
	wantBlobs := blobIDs(upBodies[eventAt].Body)
	if len(wantBlobs) == 0 {
		t.Fatalf("the event request's body names no blob:\n%.2000s", upBodies[eventAt].Body)
	}

	ctx := browser(t, chromium)
	var texts, shown []string // the API's answers, the chart; every page's HTML and text

	// 1. The overview lists the session with the proxy's figures.
	run(t, ctx, "open the overview", chromedp.Navigate(base+"/ctxguard/"), loaded())
	row := fmt.Sprintf(`tr[data-session=%q]`, sessionKey)
	last := got[len(got)-1]
	saved := 0
	for _, s := range got {
		saved += s.before - s.after
	}
	for field, want := range map[string]int{"last_before": last.before, "last_after": last.after, "tokens_saved": saved, "requests": len(got)} {
		v := get(t, ctx, "read "+field, chromedp.AttributeValue(chromedp.CSS(row+` td[data-field=`+field+`]`), "data-value")).Value
		if v != strconv.Itoa(want) {
			t.Errorf("overview %s = %s, want %d (from the proxy's headers)", field, v, want)
		}
	}
	// The hostile session key is shown as text, not run.
	evilShown := get(t, ctx, "check escaping", chromedp.Evaluate[bool](fmt.Sprintf(
		`[...document.querySelectorAll("td.key a")].some(a => a.textContent === %q) && document.querySelectorAll('img[src="x"]').length === 0`, "anthropic:h:"+evilID)))
	pwned := get(t, ctx, "check the script did not run", chromedp.Evaluate[bool](`window.pwned === 1`))
	if !evilShown || pwned {
		t.Errorf("the hostile session key: shown as text %v, ran %v", evilShown, pwned)
	}
	// Every request is counted; the bypassed and the unreadable one are
	// listed as no session; the protocols are apart.
	keys := get(t, ctx, "read the sessions", chromedp.Evaluate[[]string](`[...document.querySelectorAll("tr[data-session]")].map(r => r.dataset.session)`))
	slices.Sort(keys)
	if want := []string{"anthropic:h:" + evilID, sessionKey, chatKey}; !slices.Equal(keys, slices.Sorted(slices.Values(want))) {
		t.Errorf("sessions listed %q, want %q", keys, want)
	}
	cards := get(t, ctx, "read the cards", chromedp.Evaluate[map[string][2]string](
		`Object.fromEntries([...document.querySelectorAll("[data-card]")].map(c => [c.dataset.card, [c.querySelector(".value").textContent, (c.querySelector(".note") || {}).textContent || ""]]))`))
	if c := cards["requests"]; c[0] != strconv.Itoa(requests) || !strings.Contains(c[1], strconv.Itoa(unlisted)+" in no session") {
		t.Errorf("requests card %q, want %d requests, %d in no session", c, requests, unlisted)
	}
	// Savings are never shown as a loss, and dollars are rounded to what
	// a person reads.
	for _, k := range []string{"saved_usd", "spent_usd"} {
		if !moneyShown.MatchString(cards[k][0]) {
			t.Errorf("%s card shows %q", k, cards[k][0])
		}
	}
	if v := cards["tokens_saved"][0]; strings.HasPrefix(v, "-") || strings.HasPrefix(v, "−") || v == "0" {
		t.Errorf("tokens saved card %q, want the clearing's saving", v)
	}
	shown = append(shown, page(t, ctx))
	shots(t, ctx, artifacts, "overview")

	// 2. The session page: the chart marks the event at its request.
	run(t, ctx, "follow the session link", chromedp.Click(chromedp.CSS(row+` td.key a`)), loaded(),
		chromedp.WaitVisible(chromedp.CSS(`#chart`)))
	src := get(t, ctx, "chart", chromedp.AttributeValue(chromedp.CSS(`#chart`), "src")).Value
	if !get(t, ctx, "chart drawn", chromedp.Poll[bool](`document.getElementById("chart").complete && document.getElementById("chart").naturalWidth > 0`, chromedp.WithPollingTimeout(20*time.Second))) {
		t.Error("the chart image did not load")
	}
	svg := fetch(t, base+src, http.StatusOK)
	marks, err := chart.ReadMarks([]byte(svg))
	if err != nil {
		t.Fatal(err)
	}
	if marks.Requests != len(got) || marks.First != 1 || !slices.Contains(marks.Events, eventAt+1) {
		t.Errorf("chart: %d requests from %d, events at %v; want %d from 1, an event at %d", marks.Requests, marks.First, marks.Events, len(got), eventAt+1)
	}
	for i, s := range got {
		if s.event != slices.Contains(marks.Events, i+1) {
			t.Errorf("request %d: event %v, chart marks it %v", i+1, s.event, !s.event)
		}
	}
	if m := model.Lookup("claude-sonnet-4-5"); marks.Line != m.Window-m.MaxOutput || !marks.OrigOnTop {
		t.Errorf("chart: overflow line %d, original on top %v; want %d, true", marks.Line, marks.OrigOnTop, m.Window-m.MaxOutput)
	}
	// The table numbers the session's requests 1…N as the chart does,
	// the edit event's row at the chart's marker.
	rows := get(t, ctx, "read the rows", chromedp.Evaluate[[]struct {
		N     int
		Event bool
	}](`[...document.querySelectorAll("tr[data-n]")].map(r => ({n: +r.dataset.n, event: r.classList.contains("event")}))`))
	var ns []int
	for _, r := range rows {
		ns = append(ns, r.N)
		if r.Event != got[r.N-1].event {
			t.Errorf("row #%d: event %v, the proxy said %v", r.N, r.Event, got[r.N-1].event)
		}
	}
	slices.Sort(ns)
	if want := []int{1, 2, 3, 4, 5, 6, 7}; !slices.Equal(ns, want) {
		t.Errorf("rows numbered %v, want %v", ns, want)
	}
	shown = append(shown, page(t, ctx))
	texts = append(texts, svg)
	shots(t, ctx, artifacts, "session")

	// 3. The event request's page: the stubs with their blobs.
	var detail dashboard.SessionDetail
	if err := json.Unmarshal([]byte(fetch(t, base+"/ctxguard/api/session/"+sessionKey, http.StatusOK)), &detail); err != nil {
		t.Fatal(err)
	}
	seq := detail.Points[eventAt].Seq
	run(t, ctx, "follow the request link", chromedp.Click(chromedp.CSS(fmt.Sprintf(`tr[data-seq="%d"] a`, seq))), loaded(),
		chromedp.WaitVisible(chromedp.CSS(`tr.stub`)))
	stubs := get(t, ctx, "read the stubs", chromedp.Evaluate[[]struct{ Blob, Href string }](
		`[...document.querySelectorAll("tr.stub")].map(r => ({blob: r.dataset.blob, href: r.querySelector("a.blob").getAttribute("href")}))`))
	var ids []string
	for _, s := range stubs {
		ids = append(ids, s.Blob)
		if s.Href != "/ctxguard/v1/blobs/"+s.Blob {
			t.Errorf("blob %s links to %q", s.Blob, s.Href)
		}
		content := fetch(t, base+s.Href, http.StatusOK)
		// A stub names a cleared result's blob, or a trimmed round's: the
		// round's transcript, which holds its results word for word.
		round := strings.HasPrefix(content, "=== assistant ===") &&
			slices.ContainsFunc(results, func(r string) bool { return strings.Contains(content, r) })
		if !slices.Contains(results, content) && !round {
			t.Errorf("blob %s holds %.80q, neither a tool result of the session nor a round holding one", s.Blob, content)
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, wantBlobs) {
		t.Errorf("request page shows blobs %v; the body sent names %v", ids, wantBlobs)
	}
	shown = append(shown, page(t, ctx))
	shots(t, ctx, artifacts, "request")

	// 4. The configuration page.
	run(t, ctx, "open the configuration", chromedp.Navigate(base+"/ctxguard/config"), loaded(), chromedp.WaitVisible(chromedp.CSS(`#yaml`)))
	shown = append(shown, page(t, ctx))
	shots(t, ctx, artifacts, "config")

	// 5. The client's credentials are nowhere.
	texts = append(texts, shown...)
	for _, p := range []string{"/ctxguard/api/overview", "/ctxguard/api/session/" + sessionKey, "/ctxguard/api/request/" + strconv.FormatUint(seq, 10), "/ctxguard/api/config"} {
		texts = append(texts, fetch(t, base+p, http.StatusOK))
	}
	for i, s := range texts {
		if strings.Contains(s, apiKey) || strings.Contains(s, bearerToken) {
			t.Errorf("text %d holds the client's credentials", i)
		}
	}
	for i, s := range shown {
		if strings.Contains(s, "NaN") || strings.Contains(s, "undefined") {
			t.Errorf("page %d shows NaN or undefined", i)
		}
	}
	t.Logf("screenshots in %s", artifacts)
}

// testConfig makes the clear pass clear the session's old results
// within a few requests (and leaves them to it alone).
func testConfig(t *testing.T, anthropicURL, openaiURL string) config.Config {
	cfg := config.Defaults()
	cfg.DataDir = t.TempDir()
	cfg.Upstreams = config.Upstreams{Anthropic: anthropicURL, OpenAI: openaiURL, Gemini: openaiURL}
	pass.Update(&cfg.Passes, func(s *compress.Config) { s.Enabled = false })
	pass.Update(&cfg.Passes, func(s *persist.Config) { s.Threshold = 1 << 20 })
	pass.Update(&cfg.Passes, func(s *clearing.Config) {
		s.Trigger, s.KeepTokens, s.ClearAtLeast = model.Tokens(3000), model.Tokens(1000), model.Tokens(1000)
		s.Payback = 0
	})
	return cfg
}

// start runs ctxguard with cfg and returns its base URL: the real
// `ctxguard serve` when the Guard mounts the dashboard itself (its local
// endpoints answer /ctxguard/api/overview), else the Guard's proxy in
// process with the dashboard mounted beside it as serve would.
func start(t *testing.T, cfg config.Config) string {
	g, err := ctxguard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	probe := httptest.NewRequest("GET", "/ctxguard/api/overview", nil)
	probe.RemoteAddr, probe.Host = "127.0.0.1:1", "127.0.0.1"
	w := httptest.NewRecorder()
	g.Local().ServeHTTP(w, probe)
	if w.Code == http.StatusOK {
		return startServe(t, cfg)
	}
	t.Logf("the Guard does not serve the dashboard (GET /ctxguard/api/overview: %d): mounting it in process", w.Code)
	return startInProcess(t, g, cfg)
}

// startServe builds ctxguard and runs `ctxguard serve` with cfg on a free
// loopback port.
func startServe(t *testing.T, cfg config.Config) string {
	dir := t.TempDir()
	bin := filepath.Join(dir, "ctxguard")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../../cmd/ctxguard").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	y, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "ctxguard.yaml")
	logPath := filepath.Join(dir, "serve.log")
	if err := os.WriteFile(file, y, 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--config", file)
	cmd.Stdout, cmd.Stderr = logf, logf
	if cfg.AuthToken != "" { // the YAML has it redacted
		cmd.Env = append(os.Environ(), "CTXGUARD_AUTH_TOKEN="+cfg.AuthToken)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	listening := regexp.MustCompile(`listening on http://(\S+?)"`)
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		b, _ := os.ReadFile(logPath)
		if m := listening.FindSubmatch(b); m != nil {
			t.Logf("ctxguard serve on %s", m[1])
			return "http://" + string(m[1])
		}
		select {
		case <-exited:
			t.Fatalf("ctxguard serve exited:\n%s", b)
		case <-deadline.C:
			t.Fatalf("ctxguard serve did not listen within a minute:\n%s", b)
		case <-tick.C:
		}
	}
}

// startInProcess serves g's proxy with the dashboard subscribed to g's
// records and mounted under /ctxguard/ beside the Guard's /ctxguard/v1/
// endpoints, as serve mounts it.
func startInProcess(t *testing.T, g *ctxguard.Guard, cfg config.Config) string {
	p, err := g.Handler()
	if err != nil {
		t.Fatal(err)
	}
	d := dashboard.New(dashboard.Options{
		Sessions: cfg.Dashboard.Sessions, Requests: cfg.Dashboard.Requests,
		Config:  func() []byte { b, _ := cfg.YAML(); return b },
		Model:   model.Lookup,
		BlobURL: func(id string) string { return "/ctxguard/v1/blobs/" + id },
	})
	t.Cleanup(g.Records().Subscribe(d))
	mux := http.NewServeMux()
	mux.Handle("/", p)
	mux.Handle("/ctxguard/v1/", p)
	mux.Handle("/ctxguard/", d.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// messages is a Messages request of a session whose tool calls returned
// results, in order.
func messages(results []string) []byte {
	type block map[string]any
	msgs := []map[string]any{{"role": "user", "content": "Look at the files and fix the bug."}}
	for i, r := range results {
		id := fmt.Sprintf("toolu_%02d", i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []block{{"type": "tool_use", "id": id, "name": "Read", "input": block{"file_path": fmt.Sprintf("/src/file%d.go", i)}}}},
			map[string]any{"role": "user", "content": []block{{"type": "tool_result", "tool_use_id": id, "content": r}}})
	}
	b, _ := json.Marshal(map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": true,
		"system": "You are a coding agent.", "messages": msgs,
		"tools": []block{{"name": "Read", "description": "Read a file", "input_schema": block{"type": "object"}}}})
	return b
}

// post sends one Messages request of session id with the client's
// credentials and reads its answer; it returns the answer's headers.
func post(t *testing.T, base, id string, body []byte) http.Header {
	t.Helper()
	return postTo(t, base, "/v1/messages", id, body, nil, http.StatusOK)
}

// postTo sends one request of session id to path with the client's
// credentials and the headers h, reads its answer and checks its status;
// it returns the answer's headers.
func postTo(t *testing.T, base, path, id string, body []byte, h http.Header, code int) http.Header {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-api-key", apiKey)
	req.Header.Set("Authorization", "Bearer "+bearerToken)
	req.Header.Set("User-Agent", "claude-cli/2.0.0 (external, cli)")
	req.Header.Set("X-Claude-Code-Session-Id", id)
	for k, v := range h {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != code {
		t.Fatalf("POST %s: %d %v %s; want %d", path, res.StatusCode, err, b, code)
	}
	return res.Header
}

func fetch(t *testing.T, url string, code int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != code {
		t.Fatalf("GET %s: %d %v %.300s", url, res.StatusCode, err, b)
	}
	return string(b)
}

var blobRef = regexp.MustCompile(`(?:blob |/blobs/)([a-z]{13})\b`)

// blobIDs returns the distinct blob ids a body names, sorted.
func blobIDs(body []byte) []string {
	var ids []string
	for _, m := range blobRef.FindAllSubmatch(body, -1) {
		ids = append(ids, string(m[1]))
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("header %q: %v", s, err)
	}
	return n
}

// findChromium returns Chromium's path; without one the test skips, or
// fails under CI or CTXGUARD_BROWSER.
func findChromium(t *testing.T) string {
	return testtool.Find(t, "CTXGUARD_BROWSER", "apt-get install chromium", "chromium", "chromium-browser", "google-chrome")
}

// browser starts headless Chromium for the test, with a fresh profile and
// nothing that reaches out to the network by itself.
func browser(t *testing.T, path string) context.Context {
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	// This bounds the whole browser session; every step has its own
	// deadline besides (run, get).
	tctx, cancelT := context.WithTimeout(actx, 4*time.Minute)
	ctx, cancelB := chromedp.NewContext(tctx)
	t.Cleanup(func() { cancelB(); cancelT(); cancelA() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs steps within a minute.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	get(t, ctx, what, chromedp.Steps(steps...))
}

// get runs an action within a minute and returns its value.
func get[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(c, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// loaded waits until the page's script has drawn it once.
func loaded() chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(`body[data-loaded="1"]`))
}

// page returns the page's HTML and its visible text.
func page(t *testing.T, ctx context.Context) string {
	return get(t, ctx, "read the page", chromedp.OuterHTML(chromedp.CSS("html"))) + "\n" +
		get(t, ctx, "read the text", chromedp.Evaluate[string](`document.body.innerText`))
}

// scheme emulates the system's color scheme.
func scheme(s string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia,
			emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: s}}})
		return err
	})
}

// shots saves the page in the light and the dark scheme.
func shots(t *testing.T, ctx context.Context, dir, name string) {
	for _, s := range []string{"light", "dark"} {
		run(t, ctx, "switch to "+s, scheme(s), chromedp.Reload(), loaded())
		png := get(t, ctx, "screenshot "+name+" "+s, chromedp.FullScreenshot(100))
		if err := os.WriteFile(filepath.Join(dir, name+"-"+s+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(t, ctx, "back to light", scheme("light"), chromedp.Reload(), loaded())
}
