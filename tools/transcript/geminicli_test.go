package transcript

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// checkGemini checks a Gemini request the way the API judges one: valid
// JSON; roles user and model only, never two contents of one role in a
// row; every functionCall of a model content answered, by id, by a
// functionResponse of the user content right after it, and no
// functionResponse answering anything else; the first functionCall of
// each model content carrying a thoughtSignature.
func checkGemini(body []byte) error {
	var req struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				FunctionCall *struct {
					ID   string          `json:"id"`
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
				FunctionResponse *struct {
					ID       string          `json:"id"`
					Name     string          `json:"name"`
					Response json.RawMessage `json:"response"`
				} `json:"functionResponse"`
				ThoughtSignature *string `json:"thoughtSignature"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return err
	}
	if len(req.Contents) == 0 {
		return fmt.Errorf("no contents")
	}
	open := map[string]string{}
	for i, c := range req.Contents {
		if c.Role != "user" && c.Role != "model" {
			return fmt.Errorf("content %d: role %q", i, c.Role)
		}
		if i > 0 && c.Role == req.Contents[i-1].Role {
			return fmt.Errorf("content %d: two %s contents in a row", i, c.Role)
		}
		if len(c.Parts) == 0 {
			return fmt.Errorf("content %d has no parts", i)
		}
		if c.Role == "user" {
			for _, p := range c.Parts {
				if r := p.FunctionResponse; r != nil {
					if name, ok := open[r.ID]; !ok || name != r.Name {
						return fmt.Errorf("content %d: functionResponse %q (%s) answers no call", i, r.ID, r.Name)
					}
					delete(open, r.ID)
					if !bytes.HasPrefix(r.Response, []byte("{")) {
						return fmt.Errorf("content %d: response %s is not an object", i, r.Response)
					}
				}
			}
			if len(open) > 0 {
				return fmt.Errorf("content %d: calls %v unanswered", i, open)
			}
			continue
		}
		if len(open) > 0 {
			return fmt.Errorf("content %d: calls %v unanswered", i, open)
		}
		first := true
		for _, p := range c.Parts {
			if p.FunctionResponse != nil {
				return fmt.Errorf("content %d: functionResponse in a model content", i)
			}
			if f := p.FunctionCall; f != nil {
				if first && (p.ThoughtSignature == nil || *p.ThoughtSignature == "") {
					return fmt.Errorf("content %d: first functionCall without a thoughtSignature", i)
				}
				first = false
				if !bytes.HasPrefix(f.Args, []byte("{")) {
					return fmt.Errorf("content %d: args %s are not an object", i, f.Args)
				}
				open[f.ID] = f.Name
			}
		}
	}
	return nil
}

var signatureRE = regexp.MustCompile(`"thoughtSignature":"[^"]*"`)

// TestGeminiCLICapture rebuilds the requests of a real Gemini CLI 0.61.0
// session (two prompts in one live session, driven over --acp against a
// fake API; testdata/gemini-cli) from the CLI's own recording and
// compares them with the bodies the CLI sent, byte for byte, given the
// system instruction and tools of the capture. The one difference the
// recording forces: it keeps no thought signatures, so the rebuilt
// function calls carry the CLI's stand-in where the CLI sent the real
// ones.
func TestGeminiCLICapture(t *testing.T) {
	ss, err := LoadFile("testdata/gemini-cli/session-2026-11-27T20-18-f7a6f1c4.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 || ss[0].Format != GeminiCLI {
		t.Fatalf("not loaded as one Gemini CLI session: %d sessions", len(ss))
	}
	s := ss[0]
	if s.ID != "f7a6f1c4-1df7-4080-a4b2-b2a6b9791f5b" || s.Requests() != 6 || s.Model != "gemini-3.8-flash" {
		t.Fatalf("session %s: %d requests, model %s; want 6 requests of gemini-3.8-flash", s.ID, s.Requests(), s.Model)
	}
	first, err := os.ReadFile("testdata/gemini-cli/acp-02.body.json")
	if err != nil {
		t.Fatal(err)
	}
	var captured struct {
		SystemInstruction struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"systemInstruction"`
		Tools json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(first, &captured); err != nil {
		t.Fatal(err)
	}
	p := DefaultProfile()
	p.GeminiSystem = captured.SystemInstruction.Parts[0].Text
	p.GeminiTools = captured.Tools
	b, err := NewBuilder(s, BuildOptions{Profile: &p})
	if err != nil {
		t.Fatal(err)
	}
	// Requests 02-04 of the capture are prompt 1's, 06-08 prompt 2's
	// (01 and 05 are the CLI's model-routing calls, not recorded).
	for k, name := range map[int]string{0: "acp-02", 2: "acp-04", 3: "acp-06", 5: "acp-08"} {
		want, err := os.ReadFile("testdata/gemini-cli/" + name + ".body.json")
		if err != nil {
			t.Fatal(err)
		}
		want = signatureRE.ReplaceAll(want, []byte(`"thoughtSignature":"`+SyntheticThoughtSignature+`"`))
		r, err := b.Request(k)
		if err != nil {
			t.Fatal(err)
		}
		if r.Model != "gemini-3.8-flash" || r.Usage == nil || r.Reset {
			t.Errorf("request %d: model %q, usage %v, reset %v", k, r.Model, r.Usage, r.Reset)
		}
		if d := cmp.Diff(string(want), string(r.Body)); d != "" {
			t.Errorf("request %d differs from %s (-sent +rebuilt):\n%s", k, name, d)
		}
	}
	checkRendered(t, s, ProtoGemini)
	r0, _ := b.Request(0)
	if want := (&Usage{InputTokens: 11754 - 5877, CacheReadInputTokens: 5877, OutputTokens: 9 + 12}); !cmp.Equal(r0.Usage, want) {
		t.Errorf("usage of request 0 = %+v, want %+v (input less cached; output plus thoughts)", r0.Usage, want)
	}
}

// The same session recorded across a --resume: two processes, one file.
// The recording holds prompt 2's history as prompt 1 left it, so the
// rebuilt requests extend each other (what the CLI sends after a resume
// differs: see geminicli.go).
func TestGeminiCLIResumed(t *testing.T) {
	ss, err := LoadFile("testdata/gemini-cli/session-2026-11-27T20-15-c6f3224c.jsonl", Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := ss[0]
	if s.Requests() != 6 {
		t.Fatalf("%d requests, want 6", s.Requests())
	}
	checkRendered(t, s, ProtoGemini)
	b, _ := NewBuilder(s, BuildOptions{})
	r, _ := b.Request(5)
	for _, want := range []string{`"Check the folder again and read hello.txt once more."`, `"id":"list_directory_1795810540242_0"`, `{"text":"The folder has hello.txt; it says hello. Done (prompt 1)."}`} {
		if !bytes.Contains(r.Body, []byte(want)) {
			t.Errorf("last request lacks %s", want)
		}
	}
	if bytes.Contains(r.Body, []byte(`list_directory__`)) {
		t.Error("a stored call id prefix reached the request")
	}
	if _, err := NewBuilder(s, BuildOptions{Protocol: ProtoChat}); err == nil {
		t.Error("a Gemini CLI session written as chat")
	}
}

func gl(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

const gmeta = `{"sessionId":"S1","projectHash":"H","startTime":"2026-01-01T00:00:00Z","kind":"main"}`

func guser(id, text string) string {
	return `{"id":"` + id + `","timestamp":"2026-01-01T00:00:01Z","type":"user","content":[{"text":"` + text + `"}]}`
}

func ggem(id, content, extra string) string {
	return `{"id":"` + id + `","timestamp":"2026-01-01T00:00:02Z","type":"gemini","content":` + content + `,"model":"gemini-3-pro-preview","tokens":{"input":100,"output":5,"cached":40,"thoughts":2}` + extra + `}`
}

const gcalls = `,"toolCalls":[{"id":"ls__ls_1_0","name":"ls","args":{"d":"."},"result":[{"functionResponse":{"id":"ls__ls_1_0","name":"ls","response":{"output":"a b"}}}],"status":"success"}]`

const gresp = `{"id":"r1","type":"user","content":[{"functionResponse":{"id":"ls__ls_1_0","name":"ls","response":{"output":"a b"}}}]}`

// contentsOf returns the contents of each request of s, compactly.
func contentsOf(t *testing.T, s *Session) []string {
	t.Helper()
	b, err := NewBuilder(s, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range b.Len() {
		r, _ := b.Request(k)
		body := string(r.Body)
		end := strings.Index(body, `],"systemInstruction"`)
		c := strings.TrimPrefix(body[:end], `{"contents":[`)
		if r.Reset {
			c = "RESET " + c
		}
		out = append(out, c)
	}
	return out
}

func TestParseGeminiCLICases(t *testing.T) {
	const (
		u1   = `{"parts":[{"text":"hi"}],"role":"user"}`
		call = `{"parts":[{"functionCall":{"id":"ls_1_0","args":{"d":"."},"name":"ls"},"thoughtSignature":"skip_thought_signature_validator"}],"role":"model"}`
		resp = `{"parts":[{"functionResponse":{"name":"ls","response":{"output":"a b"},"id":"ls_1_0"}}],"role":"user"}`
	)
	cases := []struct {
		name  string
		data  []byte
		want  []string
		stats Stats
	}{
		{
			name: "a tool round: the gemini record re-written with its calls, then the results",
			data: gl(gmeta, guser("u1", "hi"), ggem("g1", `""`, ""), ggem("g1", `""`, gcalls), gresp, ggem("g2", `"done"`, "")),
			want: []string{u1, u1 + "," + call + "," + resp},
		},
		{
			name: "no results record (older versions): the results come from toolCalls",
			data: gl(gmeta, guser("u1", "hi"), ggem("g1", `""`, gcalls), ggem("g2", `"done"`, "")),
			want: []string{u1, u1 + "," + call + "," + resp},
		},
		{
			name: "thoughts dropped, consecutive user contents merged, a string content",
			data: gl(gmeta, `{"$set":{"messages":[{"id":"c","type":"user","content":"ctx"}]}}`, guser("u1", "hi"),
				ggem("g1", `[{"text":"plan","thought":true},{"text":"ok"}]`, ""), guser("u2", "more"), ggem("g2", `"x"`, "")),
			want: []string{`{"parts":[{"text":"ctx"},{"text":"hi"}],"role":"user"}`,
				`{"parts":[{"text":"ctx"},{"text":"hi"}],"role":"user"},{"parts":[{"text":"ok"}],"role":"model"},{"parts":[{"text":"more"}],"role":"user"}`},
		},
		{
			name: "a $set of messages rewrites the history: the next request is a reset",
			data: gl(gmeta, guser("u1", "hi"), ggem("g1", `"a"`, ""), guser("u2", "q"),
				`{"$set":{"messages":[{"id":"s","type":"user","content":[{"text":"summary"}]}],"lastUpdated":"x"}}`, guser("u3", "next"), ggem("g2", `"b"`, "")),
			want: []string{u1, `RESET {"parts":[{"text":"summary"},{"text":"next"}],"role":"user"}`},
		},
		{
			name: "a rewind drops the history from the message on",
			data: gl(gmeta, guser("u1", "hi"), ggem("g1", `"a"`, ""), guser("u2", "q"), `{"$rewindTo":"g1"}`, guser("u3", "again"), ggem("g2", `"b"`, "")),
			want: []string{u1, `{"parts":[{"text":"hi"},{"text":"again"}],"role":"user"}`},
		},
		{
			name:  "notes, unknown records and malformed lines are skipped",
			data:  gl(gmeta, `{"id":"i","type":"info","content":"x"}`, `{"what":1}`, `{bad`, `[]`, guser("u1", "hi"), ggem("g1", `"a"`, "")),
			want:  []string{u1},
			stats: Stats{Lines: 7, Malformed: 2, Ignored: 2},
		},
		{
			name: "calls kept in the content, with their own signature",
			data: gl(gmeta, guser("u1", "hi"), ggem("g1", `[{"functionCall":{"name":"ls","args":{},"id":"ls__x"},"thoughtSignature":"REAL"},{"functionCall":{"name":"ls","args":{},"id":"ls__y"}}]`, ""),
				`{"id":"r","type":"user","content":[{"functionResponse":{"id":"ls__x","name":"ls","response":{}}},{"functionResponse":{"id":"ls__y","name":"ls","response":{}}}]}`, ggem("g2", `"b"`, "")),
			want: []string{u1, u1 + `,{"parts":[{"functionCall":{"id":"x","args":{},"name":"ls"},"thoughtSignature":"REAL"},{"functionCall":{"id":"y","args":{},"name":"ls"}}],"role":"model"},` +
				`{"parts":[{"functionResponse":{"name":"ls","response":{},"id":"x"}},{"functionResponse":{"name":"ls","response":{},"id":"y"}}],"role":"user"}`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := ParseGeminiCLI(c.data, "session-x.jsonl")
			if d := cmp.Diff(c.want, contentsOf(t, s)); d != "" {
				t.Errorf("contents (-want +got):\n%s", d)
			}
			if c.stats.Lines > 0 {
				got := s.Stats
				got.Merged = 0
				if d := cmp.Diff(c.stats, got); d != "" {
					t.Errorf("stats (-want +got):\n%s", d)
				}
			}
			checkRendered(t, s, ProtoGemini)
		})
	}
}

// A file that re-writes an early message after every answer makes each
// history a copy of the last: the copies stop at maxGeminiMessages, the
// records left counted as ignored, and what was read still builds.
func TestGeminiCLIBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(gmeta + "\n" + guser("u0", "hi") + "\n")
	n := 0
	for ; n < 2000; n++ {
		fmt.Fprintf(&b, "%s\n%s\n", ggem(fmt.Sprintf("g%d", n), `"a"`, ""), guser("u0", fmt.Sprintf("hi %d", n)))
	}
	s := ParseGeminiCLI([]byte(b.String()), "session-x.jsonl")
	if got := len(s.Gemini.Messages); got > maxGeminiMessages+n || s.Stats.Ignored == 0 {
		t.Fatalf("%d messages kept, %d records ignored: want at most %d (the cap and one history) kept and the rest ignored", got, s.Stats.Ignored, maxGeminiMessages+n)
	}
	if s.Requests() < 1000 || s.Requests() >= n {
		t.Errorf("%d requests read of %d", s.Requests(), n)
	}
	bl, _ := NewBuilder(s, BuildOptions{})
	if r, err := bl.Request(bl.Len() - 1); err != nil || !json.Valid(r.Body) {
		t.Errorf("last request: %v", err)
	}
}

func TestIsGeminiCLI(t *testing.T) {
	dir := t.TempDir()
	legacy := filepath.Join(dir, "session-old.json")
	os.WriteFile(legacy, []byte("{\n  \"sessionId\": \"L\",\n  \"projectHash\": \"h\",\n  \"messages\": [\n"+
		"  {\"id\":\"u\",\"type\":\"user\",\"content\":\"hi\"},\n  {\"id\":\"g\",\"type\":\"gemini\",\"content\":\"yo\",\"model\":\"gemini-2.5-pro\"},\n"+
		"  {\"id\":\"u2\",\"type\":\"user\",\"content\":\"more\"},\n  {\"id\":\"g2\",\"type\":\"gemini\",\"content\":\"ok\"}]\n}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "other.json"), []byte(`{"sessionId":"x","projectHash":"y"}`), 0o644)
	ss, err := Load([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 || ss[0].Format != GeminiCLI || ss[0].ID != "L" {
		t.Fatalf("loaded %d sessions from the folder, want the legacy session-old.json alone", len(ss))
	}
	// A legacy file's history is complete: one request per answer, each
	// with the messages before it.
	if got := contentsOf(t, ss[0]); len(got) != 2 || !strings.Contains(got[1], `"more"`) || strings.Contains(got[1], `"ok"`) {
		t.Errorf("legacy requests: %q", got)
	}
	for _, c := range []struct {
		path, data string
		want       bool
	}{
		{"a.jsonl", gmeta + "\n", true},
		{"a.jsonl", `{"sessionId":"s","type":"user"}` + "\n", false}, // Claude Code
		{"a.jsonl", `{bad`, false},
		{"a.json", "{\n\"sessionId\":\"s\",\n\"projectHash\":\"p\"}", true},
	} {
		if got := IsGeminiCLI(c.path, []byte(c.data)); got != c.want {
			t.Errorf("IsGeminiCLI(%s, %.30q) = %v", c.path, c.data, got)
		}
	}
}

func FuzzParseGeminiCLI(f *testing.F) {
	for _, c := range [][]byte{
		gl(gmeta, guser("u1", "hi"), ggem("g1", `""`, gcalls), gresp, ggem("g2", `"done"`, "")),
		gl(gmeta, `{"$set":{"messages":[{"id":"a","type":"gemini","content":[{"functionCall":{"name":"x"}}]}]}}`, `{"$rewindTo":"zz"}`, ggem("g", `[1,"s",{"text":""}]`, "")),
		gl(`{"id":"g","type":"gemini","toolCalls":[{"name":"n","result":"str"},{"result":{}},7]}`, `{"id":"g","type":"gemini","content":{"text":"x"}}`),
	} {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := ParseGeminiCLI(data, "fuzz.jsonl")
		if s.Requests() > 40 {
			return
		}
		b, err := NewBuilder(s, BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for k := range b.Len() {
			r, _ := b.Request(k)
			if !json.Valid(r.Body) {
				t.Fatalf("request %d is not valid JSON: %s", k, r.Body)
			}
		}
	})
}
