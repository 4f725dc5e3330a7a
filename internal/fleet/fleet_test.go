// Package fleet tests ctxguard run as a fleet: several `ctxguard serve`
// processes on one Redis store behind a round-robin balancer must send
// upstream exactly the bytes one process sends, serve each other's blobs,
// and summarize each span once.
package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic/anthropictest"
	"github.com/ctxguard/ctxguard/config"
	"github.com/ctxguard/ctxguard/gemini/geminitest"
	"github.com/ctxguard/ctxguard/internal/auth"
	"github.com/ctxguard/ctxguard/internal/module"
	"github.com/ctxguard/ctxguard/internal/procs"
	"github.com/ctxguard/ctxguard/internal/shareddata"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/openaitest"
	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pass/compact"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/store/redis/redistest"
	"github.com/ctxguard/ctxguard/tools/transcript"
)

// publicURL is what every instance's stubs name: the balancer's address.
const publicURL = "http://ctxguard.fleet.test:8787"

// tagHeader carries "<session>#<request>" so the upstream can tell which
// request of which session it received (ctxguard forwards it).
const tagHeader = "X-Fleet-Request"

// request is one request of a shared session, as its client sends it.
type request struct {
	tag    string
	proto  string // "anthropic", "responses" or "gemini"
	path   string // Gemini's: the model is in the path
	header http.Header
	body   []byte
}

// sessions rebuilds the requests of the shared real sessions (Claude Code
// and Codex CLI), each session's in order, sessions one after another.
func sessions(t *testing.T) []request {
	t.Helper()
	var out []request
	for _, sub := range []string{"claude-code", "codex"} {
		dir := shareddata.Dir(t, sub)
		files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no sessions in %s: %v", dir, err)
		}
		sort.Strings(files)
		for _, f := range files {
			ss, err := transcript.LoadFile(f, transcript.Options{})
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for _, s := range ss {
				b, err := transcript.NewBuilder(s, transcript.BuildOptions{})
				if err != nil || b.Len() == 0 {
					continue
				}
				proto := "anthropic"
				if sub == "codex" {
					proto = "responses"
				}
				for k := range b.Len() {
					r, err := b.Request(k)
					if err != nil {
						t.Fatalf("%s request %d: %v", f, k, err)
					}
					out = append(out, request{
						tag: fmt.Sprintf("%s#%d", s.ID, k), proto: proto,
						header: clientHeader(proto, s.ID), body: r.Body,
					})
				}
			}
		}
	}
	if len(out) < 500 {
		t.Fatalf("only %d requests in the shared sessions", len(out))
	}
	return append(out, geminiSessions(t, 4)...)
}

// geminiSessions rebuilds the first n shared Claude Code sessions of 20
// to 100 requests as the Gemini CLI would have sent them
// (transcript.ProtoGemini), each request to its model's path, with no
// session header: the instances find the session by the start of its
// contents.
func geminiSessions(t *testing.T, n int) []request {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(shareddata.Dir(t, "claude-code"), "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var out []request
	for _, f := range files {
		if n == 0 {
			break
		}
		ss, err := transcript.LoadFile(f, transcript.Options{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, s := range ss {
			b, err := transcript.NewBuilder(s, transcript.BuildOptions{Protocol: transcript.ProtoGemini})
			if err != nil || b.Len() < 20 || b.Len() > 100 || n == 0 {
				continue
			}
			n--
			for k := range b.Len() {
				r, err := b.Request(k)
				if err != nil {
					t.Fatalf("%s request %d as Gemini: %v", f, k, err)
				}
				out = append(out, request{
					tag: fmt.Sprintf("gemini:%s#%d", s.ID, k), proto: "gemini", path: r.Path,
					header: clientHeader("gemini", s.ID), body: r.Body,
				})
			}
		}
	}
	if n > 0 {
		t.Fatalf("%d sessions short of Claude Code sessions to write as Gemini requests", n)
	}
	return out
}

// clientHeader is what the client of proto sends (Claude Code 2.1,
// Codex CLI 0.169), its session header included.
func clientHeader(proto, session string) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	switch proto {
	case "anthropic":
		h.Set("Anthropic-Version", "2023-06-01")
		h.Set("Anthropic-Beta", "claude-code-20250219,context-management-2025-06-27,interleaved-thinking-2025-05-14")
		h.Set("X-Api-Key", "sk-ant-fleet-not-a-real-key")
		h.Set("User-Agent", "claude-cli/2.1.197 (external, cli)")
		h.Set("X-Claude-Code-Session-Id", session)
	case "responses":
		h.Set("Authorization", "Bearer sk-fleet-not-a-real-key")
		h.Set("Originator", "codex_exec")
		h.Set("User-Agent", "codex_exec/0.169.0 (Linux; x86_64) (codex_exec; 0.169.0)")
		h.Set("Session-Id", session)
	case "gemini":
		h.Set("X-Goog-Api-Key", "AIza-fleet-not-a-real-key")
		h.Set("X-Goog-Api-Client", "google-genai-sdk/1.30.0 gl-node/v20.20.2")
		h.Set("User-Agent", "GeminiCLI/0.61.0/gemini-3.1-pro-preview (linux; x64)")
	}
	return h
}

// upstream is the fake model API: every protocol, the exact wire format
// (anthropictest, openaitest, geminitest), remembering of each request only the
// SHA-256 of the body it received, by tag, and the summarizer calls.
type upstream struct {
	ant *anthropictest.Server
	oai *openaitest.Server
	gem *geminitest.Server
	srv *http.Server
	url string

	mu        sync.Mutex
	got       map[string][32]byte // tag → body hash
	summaries map[[32]byte]int    // summarizer request body → times asked
	blobs     map[string]bool     // blob ids named by stubs
	carried   map[string]bool     // tags of requests that carried a model's summary
	compacted int                 // requests that carried a compaction
	gemini    int                 // Gemini requests that carried one
	signed    int                 // requests that name a blob with its signature
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{
		ant: anthropictest.New(anthropictest.Options{Script: summaryScript}),
		oai: openaitest.New(openaitest.Options{}),
		gem: geminitest.New(geminitest.Options{Script: func(r *geminitest.Request) geminitest.Turn {
			if isSummarizer(r.Body) {
				return geminitest.Turn{Parts: []geminitest.Part{geminitest.Text(fleetSummary)}}
			}
			return geminitest.Turn{Parts: []geminitest.Part{geminitest.Text("ok")}}
		}}),
	}
	u.take()
	ts := httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(ts.Close)
	u.url = ts.URL
	return u
}

// summaryScript answers the summarizer with a summary and everything else
// with a short text.
func summaryScript(r *anthropictest.Request) anthropictest.Turn {
	if isSummarizer(r.Decoded) {
		return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text(fleetSummary)}}
	}
	return anthropictest.Turn{Blocks: []anthropictest.Block{anthropictest.Text("ok")}}
}

// fleetSummary is the summary the fake summarizer writes.
const fleetSummary = "1. User requests (verbatim): the fleet's summary."

func isSummarizer(body []byte) bool {
	return bytes.Contains(body, []byte("You summarize the earlier part of a long working session"))
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	sum := sha256.Sum256(body)
	u.mu.Lock()
	if isSummarizer(body) {
		u.summaries[sum]++
	} else if tag := r.Header.Get(tagHeader); tag != "" {
		u.got[tag] = sum
		for _, m := range blobRef.FindAllSubmatch(body, -1) {
			u.blobs[string(m[1])+string(m[2])] = true
		}
		if bytes.Contains(body, []byte(fleetSummary)) {
			u.carried[tag] = true
		}
		if bytes.Contains(body, []byte("ctxguard compacted the first")) {
			u.compacted++
			if strings.HasPrefix(tag, "gemini:") {
				u.gemini++
			}
		}
		if signedRef.Match(body) {
			u.signed++
		}
	}
	u.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if strings.HasPrefix(r.URL.Path, "/v1/responses") {
		u.oai.ServeHTTP(w, r)
		u.oai.Reset()
		return
	}
	if strings.HasPrefix(r.URL.Path, "/v1beta/") {
		u.gem.ServeHTTP(w, r)
		u.gem.Reset()
		return
	}
	u.ant.ServeHTTP(w, r)
	u.ant.Reset()
}

// received is what the upstream received in one run.
type received struct {
	got       map[string][32]byte
	summaries map[[32]byte]int
	blobs     map[string]bool
	carried   map[string]bool
	compacted int
	gemini    int
	signed    int
}

// take returns what the upstream received since the last take.
func (u *upstream) take() received {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := received{u.got, u.summaries, u.blobs, u.carried, u.compacted, u.gemini, u.signed}
	u.got, u.summaries, u.blobs, u.carried, u.compacted, u.gemini, u.signed = map[string][32]byte{}, map[[32]byte]int{}, map[string]bool{}, map[string]bool{}, 0, 0, 0
	return r
}

// fleet is ctxguard serve processes on one Redis database.
type fleet struct {
	t     *testing.T
	bin   string
	conf  string
	token string // auth_token, sent with every request; "" for none
	env   []string
	proc  []*procs.Proc
	next  int
}

// config is the configuration every instance runs with: a small window so
// the long sessions are compacted, the shared store, the public URL.
func fleetConfig(t *testing.T, up *upstream, storeURL, summarizer string) string {
	cfg := config.Defaults()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.Upstreams = config.AllUpstreams(up.url)
	cfg.PublicURL = publicURL
	cfg.Store = storeURL
	pass.Update(&cfg.Passes, func(s *compact.Config) {
		s.Summarizer.Mode = summarizer
		s.Wait = 10 * time.Second
	})
	small := model.Limits{Window: 40_000, MaxOutput: 4_000, LongWindow: 40_000}
	cfg.Models.Default = small
	cfg.Models.Overrides = map[string]model.Limits{}
	for _, in := range model.Default().Models() {
		cfg.Models.Overrides[in.ID] = small
	}
	y, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ctxguard.yaml")
	if err := os.WriteFile(file, y, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func startFleet(t *testing.T, bin, conf string, n int, token string) *fleet {
	f := &fleet{t: t, bin: bin, conf: conf, token: token, env: append(os.Environ(), "HOME="+t.TempDir())}
	if token != "" {
		f.env = append(f.env, "CTXGUARD_AUTH_TOKEN="+token) // the YAML has it redacted
	}
	for i := range n {
		f.proc = append(f.proc, f.start(i))
	}
	t.Cleanup(func() {
		for _, p := range f.proc {
			p.Stop()
		}
	})
	return f
}

func (f *fleet) start(i int) *procs.Proc {
	p, err := procs.Start(fmt.Sprint("ctxguard-", i), f.bin, f.env, "serve", "--listen", "127.0.0.1:0", "--config", f.conf)
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// restart stops instance i (SIGTERM: it drains) and starts it again, on
// another port.
func (f *fleet) restart(i int) {
	if err := f.proc[i].Stop(); err != nil {
		f.t.Logf("stopping instance %d: %v", i, err)
	}
	f.proc[i] = f.start(i)
}

// send sends r to the next instance, round robin, and checks the answer.
func (f *fleet) send(c *http.Client, r request) {
	p := f.proc[f.next%len(f.proc)]
	f.next++
	path := "/v1/messages?beta=true"
	switch r.proto {
	case "responses":
		path = "/v1/responses"
	case "gemini":
		path = r.path + "?alt=sse"
	}
	req, err := http.NewRequest(http.MethodPost, p.URL+path, bytes.NewReader(r.body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header = r.header.Clone()
	req.Header.Set(tagHeader, r.tag)
	if f.token != "" {
		req.Header.Set("X-Ctxguard-Token", f.token)
	}
	resp, err := c.Do(req)
	if err != nil {
		f.t.Fatalf("%s via %s: %v", r.tag, p.Name, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		f.t.Fatalf("%s via %s: %s: %.300s\n%s", r.tag, p.Name, resp.Status, b, p.Tail())
	}
}

// run sends every request through f, restarting instance restart (if >= 0)
// when half are sent, and returns what the upstream received.
func run(t *testing.T, f *fleet, up *upstream, reqs []request, restart int) received {
	c := &http.Client{Timeout: 2 * time.Minute}
	for i, r := range reqs {
		if restart >= 0 && i == len(reqs)/2 {
			f.restart(restart)
		}
		f.send(c, r)
	}
	return up.take()
}

func build(t *testing.T) string {
	root, err := module.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bins, err := procs.Build(ctx, root, t.TempDir(), "./cmd/ctxguard")
	if err != nil {
		t.Fatal(err)
	}
	return bins[0]
}

// blobRef matches a blob named by a stub or a compaction's note;
// signedRef one named with its signature (auth_token).
var (
	blobRef   = regexp.MustCompile(`\bblobs? ([a-z]{13})\b|/ctxguard/v1/blobs/([a-z]{13})\b`)
	signedRef = regexp.MustCompile(`(?:\bblob |/ctxguard/v1/blobs/)[a-z]{13}/[a-z]{22}\b`)
)

// TestFleetSameBytes replays the shared sessions (Claude Code and Codex
// CLI, and some Claude Code sessions written as Gemini CLI requests)
// through one instance, then through two instances on another Redis
// database taking requests in turn, one restarted midway: the upstream
// must receive the same bytes for every request. Summaries are extractive
// (no model), so each one sent is decided by the request alone and the
// two runs can be compared byte for byte. Then every blob a stub names is
// fetched from both instances. It runs without auth_token, and with one:
// then the stubs name blobs with their signatures, which every instance
// computes alike, and each blob's signed link opens it, with no header,
// at both instances.
func TestFleetSameBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("the fleet test replays every shared session three times")
	}
	reqs := sessions(t)
	bin := build(t)
	rs := redistest.Start(t)
	for i, token := range []string{"", "fleet-auth-token-8e21c4a7"} {
		name := "no token"
		if token != "" {
			name = "auth_token"
		}
		t.Run(name, func(t *testing.T) {
			up := newUpstream(t)
			one := startFleet(t, bin, fleetConfig(t, up, rs.URL(3*i), "none"), 1, token)
			ref := run(t, one, up, reqs, -1)
			two := startFleet(t, bin, fleetConfig(t, up, rs.URL(3*i+1), "none"), 2, token)
			fl := run(t, two, up, reqs, 1)
			want, got := ref.got, fl.got

			if len(want) != len(reqs) || len(got) != len(reqs) {
				t.Fatalf("the upstream saw %d requests from one instance and %d from two, of %d sent", len(want), len(got), len(reqs))
			}
			diff := 0
			for _, r := range reqs {
				if want[r.tag] != got[r.tag] {
					if diff++; diff <= 5 {
						t.Errorf("%s: the fleet sent other bytes than one instance", r.tag)
					}
				}
			}
			if diff > 0 {
				t.Fatalf("%d of %d requests differ", diff, len(reqs))
			}
			if fl.compacted == 0 || fl.compacted != ref.compacted || fl.gemini == 0 {
				t.Fatalf("requests carrying a compaction: %d through one instance, %d through two (%d Gemini); want the same, not 0", ref.compacted, fl.compacted, fl.gemini)
			}
			if (fl.signed > 0) != (token != "") {
				t.Fatalf("%d requests name a blob with its signature; want some exactly when auth_token is set", fl.signed)
			}

			// Every blob a stub names is served by both instances, the
			// one that wrote it and the other.
			if len(fl.blobs) < 20 {
				t.Fatalf("only %d blobs named by stubs: the sessions were hardly rewritten", len(fl.blobs))
			}
			c := &http.Client{Timeout: time.Minute}
			keys := auth.New(token)
			for id := range fl.blobs {
				var first []byte
				for _, p := range two.proc {
					path := "/ctxguard/v1/blobs/" + id
					if keys != nil {
						path += "/" + keys.SignBlob(id) // the link the stubs give, no header
					}
					b := getBlob(t, c, p, path)
					if store.ID(b) != id {
						t.Fatalf("blob %s from %s: content address %s", id, p.Name, store.ID(b))
					}
					if first != nil && !bytes.Equal(first, b) {
						t.Fatalf("blob %s differs between instances", id)
					}
					first = b
				}
			}
			t.Logf("%d requests, the same bytes; %d carried a compaction (%d Gemini), %d named signed blobs; %d blobs served by both instances",
				len(reqs), fl.compacted, fl.gemini, fl.signed, len(fl.blobs))
		})
	}
}

// TestFleetSummarizesOnce: two instances on one store, taking a session's
// requests in turn, with summaries written by a model (the fake upstream):
// the model is asked for each span's summary once, and requests through
// both instances carry it.
func TestFleetSummarizesOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("the fleet test replays shared sessions")
	}
	var reqs []request
	for _, r := range sessions(t) {
		if r.proto == "anthropic" {
			reqs = append(reqs, r)
		}
	}
	bin := build(t)
	rs := redistest.Start(t)
	up := newUpstream(t)
	two := startFleet(t, bin, fleetConfig(t, up, rs.URL(2), "session"), 2, "")
	fl := run(t, two, up, reqs, 0)
	if len(fl.summaries) == 0 {
		t.Fatal("no summary was asked for: the sessions were not compacted")
	}
	for _, n := range fl.summaries {
		if n != 1 {
			t.Fatalf("a span's summary was asked for %d times", n)
		}
	}
	// Requests alternate: even positions went to instance 0, odd ones to
	// instance 1. Both must have sent the model's summary.
	pos := map[string]int{}
	for i, r := range reqs {
		pos[r.tag] = i
	}
	var by [2]int
	for tag := range fl.carried {
		by[pos[tag]%2]++
	}
	if by[0] == 0 || by[1] == 0 {
		t.Fatalf("requests carrying the model's summary: %d through instance 0, %d through instance 1", by[0], by[1])
	}
	t.Logf("%d summaries asked for, each once; %d and %d requests carried one", len(fl.summaries), by[0], by[1])
}

// getBlob fetches the blob at path from p.
func getBlob(t *testing.T, c *http.Client, p *procs.Proc, path string) []byte {
	t.Helper()
	resp, err := c.Get(p.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s from %s: %s, %v: %.200s", path, p.Name, resp.Status, err, b)
	}
	return b
}
