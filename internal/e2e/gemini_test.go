//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/gemini"
	"github.com/ctxguard/ctxguard/gemini/geminitest"
)

// geminiVersion is the Gemini CLI the tests pin (the captures in
// gemini/testdata/cli and tools/transcript/testdata/gemini-cli were
// taken with it).
const geminiVersion = "0.61.0"

// geminiBinary returns the Gemini CLI to run: CTXGUARD_GEMINI_BIN, or the
// pinned version (CTXGUARD_GEMINI_VERSION) installed from npm.
func geminiBinary(t *testing.T) string {
	if bin := os.Getenv("CTXGUARD_GEMINI_BIN"); bin != "" {
		return bin
	}
	return npmBinary(t, "@google/gemini-cli", envOr("CTXGUARD_GEMINI_VERSION", geminiVersion), findGemini)
}

// findGemini returns the CLI under an npm prefix when the installed
// package is the version the prefix is named for, or "". (Running
// `gemini --version` would read and write the real home's ~/.gemini.)
func findGemini(dir string) string {
	bin := filepath.Join(dir, "node_modules", ".bin", "gemini")
	pkg, err := os.ReadFile(filepath.Join(dir, "node_modules", "@google", "gemini-cli", "package.json"))
	if err != nil {
		return ""
	}
	var meta struct{ Version string }
	if json.Unmarshal(pkg, &meta) != nil || !strings.HasSuffix(dir, "-"+meta.Version) {
		return ""
	}
	if _, err := os.Stat(bin); err != nil {
		return ""
	}
	return bin
}

// geminiHome prepares the CLI's settings in home: API-key auth (with
// GOOGLE_GEMINI_BASE_URL alone the CLI picks its "gateway" auth, which a
// headless run refuses) and no usage statistics. It returns the
// environment a run needs besides the base URL.
func geminiHome(t *testing.T, home string) []string {
	dir := filepath.Join(home, ".gemini")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	settings := `{"security":{"auth":{"selectedType":"gemini-api-key"}},"privacy":{"usageStatisticsEnabled":false}}`
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	// GEMINI_CLI_NO_RELAUNCH: one node process, not a second one with a
	// bigger heap.
	return []string{"GEMINI_API_KEY=e2e-fake-gemini-key-0000", "GEMINI_CLI_NO_RELAUNCH=true"}
}

// geminiArgs are the flags of a headless run that may use every tool.
var geminiArgs = []string{"--output-format", "json", "--approval-mode", "yolo", "--skip-trust"}

// geminiSignature is the thought signature the fake gives the first call
// of its answer n; the CLI must send it back, and ctxguard keep it.
func geminiSignature(n int) string { return fmt.Sprintf("c2lnbmF0dXJlLWUyZS0%d", n) }

// geminiStep reads a streamGenerateContent body: the text of the last
// user prompt (a user content with text and no functionResponse) and how
// many model contents follow it.
func geminiStep(r *geminitest.Request) (prompt string, step int, ok bool) {
	var body struct {
		Contents []struct {
			Role  string           `json:"role"`
			Parts []map[string]any `json:"parts"`
		} `json:"contents"`
		Tools []any `json:"tools"`
	}
	if json.Unmarshal(r.Body, &body) != nil || len(body.Tools) == 0 {
		return "", 0, false
	}
	last := -1
	for i, c := range body.Contents {
		if c.Role != "user" {
			continue
		}
		text, resp := "", false
		for _, p := range c.Parts {
			if s, ok := p["text"].(string); ok {
				text = s
			}
			_, isResp := p["functionResponse"]
			resp = resp || isResp
		}
		if text != "" && !resp {
			last, prompt = i, text
		}
	}
	for _, c := range body.Contents[last+1:] {
		if c.Role == "model" {
			step++
		}
	}
	return prompt, step, true
}

// geminiScript drives the CLI's agent loop. The model router's
// generateContent gets a low complexity score; the first prompt's loop
// reads build.log with read_file (which, unlike the shell tool, keeps
// its colours), cats huge.log with the shell and lists a missing folder,
// each call with a thought before it and a signature, then answers; any
// later prompt is answered at once.
func geminiScript(r *geminitest.Request) geminitest.Turn {
	if r.Action == "generateContent" {
		return geminitest.Turn{Parts: []geminitest.Part{geminitest.Text(`{"complexity_reasoning":"a short check","complexity_score":20}`)}}
	}
	prompt, step, ok := geminiStep(r)
	if !ok || !strings.Contains(prompt, "Check the build") {
		return geminitest.Turn{Parts: []geminitest.Part{geminitest.Text(finalText)}}
	}
	think := geminitest.Part{Text: "Looking at the logs.", Thought: true}
	switch step {
	case 0:
		return geminitest.Turn{Parts: []geminitest.Part{think, geminitest.Call("read_file", `{"file_path":"build.log"}`, geminiSignature(0))}}
	case 1:
		return geminitest.Turn{Parts: []geminitest.Part{think, geminitest.Call("run_shell_command", `{"command":"cat huge.log","description":"Show the download log"}`, geminiSignature(1))}}
	case 2:
		return geminitest.Turn{Parts: []geminitest.Part{think, geminitest.Call("list_directory", fmt.Sprintf(`{"dir_path":%q}`, missingDir), geminiSignature(2))}}
	}
	return geminitest.Turn{Parts: []geminitest.Part{geminitest.Text(finalText)}}
}

// geminiCall reports whether a request is one of the model calls
// ctxguard rewrites (generateContent, streamGenerateContent).
func geminiCall(e *exchange) bool {
	return gemini.Protocol.Rewritable(e.Method, e.Path)
}

// geminiDiff checks that two Gemini bodies differ only in function
// responses' response objects (and function calls' args), part by part,
// and returns how many parts differ.
func geminiDiff(t *testing.T, sent, got []byte) int {
	n := 0
	listDiff(t, sent, got, "contents", func(x, y map[string]any, k string) bool {
		xp, _ := x["parts"].([]any)
		yp, _ := y["parts"].([]any)
		if k != "parts" || len(xp) != len(yp) {
			return false
		}
		for i := range xp {
			a, _ := xp[i].(map[string]any)
			b, _ := yp[i].(map[string]any)
			for _, pk := range sameExcept(a, b) {
				fa, _ := a[pk].(map[string]any)
				fb, _ := b[pk].(map[string]any)
				inner := sameExcept(fa, fb)
				if !(pk == "functionResponse" && reflect.DeepEqual(inner, []string{"response"}) ||
					pk == "functionCall" && reflect.DeepEqual(inner, []string{"args"})) {
					t.Errorf("part %d: %s changed (%v)", i, pk, inner)
					return false
				}
				n++
			}
		}
		return true
	})
	return n
}

// TestGeminiCLI runs the real Gemini CLI through ctxguard against the fake
// Gemini API (SSE streams): a prompt whose agent loop makes three tool
// calls, then a second prompt in the same session (--resume latest, whose
// requests carry the CLI's resumed history). Every body reaches the
// upstream as the CLI sent it except the tool results a rule rewrote; the
// build log's colours are compressed away; the signatures go back to the
// model untouched; headers, query and answers pass unchanged.
func TestGeminiCLI(t *testing.T) {
	bin := geminiBinary(t)
	fake := geminitest.New(geminitest.Options{Script: geminiScript})
	s := newHopSetup(t, fake)
	env := append(geminiHome(t, s.home), "GOOGLE_GEMINI_BASE_URL="+s.hopURL)
	var res struct {
		Response string `json:"response"`
		Error    any    `json:"error"`
	}
	out := s.run(t, env, bin, append([]string{"-p", "Check the build: show build.log and huge.log, then list " + missingDir + "."}, geminiArgs...)...)
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Response != finalText || res.Error != nil {
		t.Errorf("first prompt: %v, response %q, error %v\n%s", err, res.Response, res.Error, out)
	}
	out = s.run(t, env, bin, append([]string{"-p", "Now say goodbye.", "--resume", "latest"}, geminiArgs...)...)
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Response != finalText || res.Error != nil {
		t.Errorf("second prompt: %v, response %q, error %v\n%s", err, res.Response, res.Error, out)
	}
	streams, routed := 0, 0
	for _, r := range fake.Requests() {
		switch r.Action {
		case "streamGenerateContent":
			streams++
			if r.Query != "alt=sse" {
				t.Errorf("stream request with query %q, want alt=sse", r.Query)
			}
		case "generateContent":
			routed++
		}
	}
	if streams < 5 || routed < 2 {
		t.Errorf("%d streams and %d router calls reached the upstream, want at least 5 (4 + 1) and 2", streams, routed)
	}
	// The first prompt's last request holds every signature the model
	// gave, byte for byte, upstream as the CLI sent it.
	// (Resumed, the CLI has lost them: its history from disk carries
	// its stand-in signature instead.)
	for _, e := range s.hopRec.exchanges() {
		if geminiCall(e) && strings.Contains(string(e.Body), `"`+geminiSignature(2)+`"`) {
			for n := range 3 {
				if !strings.Contains(string(e.Body), `"thoughtSignature":"`+geminiSignature(n)+`"`) {
					t.Errorf("the CLI's last request of prompt 1 lacks signature %d", n)
				}
			}
		}
	}
	s.checkCalls(t, geminiCall, geminiDiff)
	got := s.upRec.exchanges()
	for _, e := range got {
		if geminiCall(e) && strings.Contains(string(e.Body), `"`+geminiSignature(2)+`"`) && !strings.Contains(string(e.Body), `"thoughtSignature":"`+geminiSignature(0)+`"`) {
			t.Errorf("a request reached the upstream without the first call's signature")
		}
	}
}
