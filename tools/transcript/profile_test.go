package transcript

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// The default profile is of the sizes Claude Code sends: about 7 KB of
// system text in three blocks, about 30 KB of tool schemas for a dozen or
// so tools, and a system message of a few KB.
func TestDefaultProfileSizes(t *testing.T) {
	p := DefaultProfile()
	sys := len(p.System[0]) + len(p.System[1]) + len(p.System[2])
	if sys < 6000 || sys > 8000 {
		t.Errorf("system text %d bytes", sys)
	}
	if n := len(p.SystemMessage); n < 2000 || n > 7000 {
		t.Errorf("system message %d bytes", n)
	}
	var tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal(p.Tools, &tools); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools {
		names[tl.Name] = true
		if tl.Description == "" || len(tl.InputSchema) == 0 {
			t.Errorf("tool %q incomplete", tl.Name)
		}
	}
	for _, want := range []string{"Bash", "Read", "Write", "Edit", "Glob", "Grep", "TodoWrite", "WebFetch", "WebSearch", "Task", "NotebookEdit", "BashOutput"} {
		if !names[want] {
			t.Errorf("tool %s missing", want)
		}
	}
	if n := len(compact(p.Tools)); n < 27000 || n > 33000 {
		t.Errorf("tool schemas %d bytes compact", n)
	}
	if len(tools) < 12 || len(tools) > 16 {
		t.Errorf("%d tools", len(tools))
	}
}

func TestLoadProfile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.json")
	if err := os.WriteFile(path, []byte(`{"system_message":"","reminder":"","tools":[{"name":"Only","description":"d","input_schema":{"type":"object"}}],"effort":""}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if p.System != DefaultProfile().System || p.MaxTokens != 64000 {
		t.Error("fields the file does not set lost their defaults")
	}
	s := parseOne(t, jsonl(u(str1("hi")), a("m1", txt("ok"))))
	b, err := NewBuilder(s, BuildOptions{Profile: &p, Model: "claude-haiku-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := b.Request(0)
	c, err := anthropic.Parse(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Messages) != 1 || c.Model != "claude-haiku-4-5" || bytes.Contains(r.Body, []byte("output_config")) {
		t.Errorf("messages %d model %s body %.200s", len(c.Messages), c.Model, r.Body)
	}
	n := 0
	it := jsonscan.Elements(r.Body, c.Tools)
	for _, ok := it.NextElement(); ok; _, ok = it.NextElement() {
		n++
	}
	if n != 1 {
		t.Errorf("%d tools", n)
	}
	for _, bad := range []string{`{"tools":{}}`, `{"max_tokens":0}`, `{"system_message_index":-1}`, `{"tools":[`, `nope`} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadProfile(path); err == nil {
			t.Errorf("profile %s accepted", bad)
		}
	}
	if _, err := LoadProfile(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestSystemMessagePosition(t *testing.T) {
	s := parseOne(t, jsonl(u(str1("a")), a("m1", tu("t1")), u(arr(tr("t1", "x"))), a("m2", txt("ok"))))
	for _, tc := range []struct {
		index int
		roles string
	}{
		{0, "system user assistant user"},
		{1, "user system assistant user"},
		{3, "user assistant user system"},
		{9, "user assistant user system"},
	} {
		p := DefaultProfile()
		p.SystemMessageIndex = tc.index
		b, _ := NewBuilder(s, BuildOptions{Profile: &p})
		r, _ := b.Request(1)
		c, err := anthropic.Parse(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		var roles []string
		for _, m := range c.Messages {
			roles = append(roles, m.Role.String())
		}
		if got := joinWords(roles); got != tc.roles {
			t.Errorf("index %d: roles %s, want %s", tc.index, got, tc.roles)
		}
		if c.CacheMarkers != 3 {
			t.Errorf("index %d: %d markers", tc.index, c.CacheMarkers)
		}
	}
}

func joinWords(w []string) string {
	var b bytes.Buffer
	for i, s := range w {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s)
	}
	return b.String()
}
