package clearing

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/store"
	"github.com/google/go-cmp/cmp"
)

// TestReadsKept: an event keeps the newest file reads within the budget
// (a Read and a shell command that prints a file), sent as they were,
// while older output, a read a re-read superseded, a shell command that
// does more than print a file, and the reads past the budget are
// cleared; the first cleared item, not a kept read, carries the
// explanation.
func TestReadsKept(t *testing.T) {
	big := strings.Repeat("output line with some words in it\n", 120)      // ~1000 tokens
	file := strings.Repeat("     1→func main() { println(\"hi\") }\n", 60) // ~700 tokens
	other := strings.Repeat("     1→type T struct{ A, B int }\n", 60)
	rounds := []round{
		{"Read", `{"file_path":"/src/old.go"}`, file + "old", ""},       // 0: past the budget
		{"Read", `{"file_path":"/src/main.go"}`, file, ""},              // 1: superseded by 5
		{"Bash", `{"command":"make test"}`, big, ""},                    // 2
		{"Bash", `{"command":"cd /src && cat types.go"}`, other, ""},    // 3: a read
		{"Bash", `{"command":"cat types.go && make"}`, other + "x", ""}, // 4: not a read
		{"Read", `{"file_path":"/src/main.go"}`, file + "v2", ""},       // 5: a read
		{"Bash", `{"command":"go vet ./..."}`, big, ""},                 // 6
		{"Bash", `{"command":"ls -la"}`, big, ""},                       // 7
		{"Bash", `{"command":"git status"}`, big, ""},                   // 8: kept, newest
	}
	cfg := testConfig()
	cfg.KeepTokens, cfg.KeepUses, cfg.Trim.Enabled = model.Tokens(0), 1, false
	cfg.Reads = Reads{Tools: []string{"Read"}, Commands: []string{"cat"}, KeepTokens: model.Tokens(1500)}
	orig := build(`{"type":"disabled"}`, rounds)
	pl := planOf(t, cfg, orig)
	if pl.clearTo <= 2+2*6 {
		t.Fatalf("clearTo %d: the test needs rounds 0-6 before the boundary: %+v %v", pl.clearTo, pl.events, pl.kept)
	}
	res := rewrite(t, cfg, store.NewMemory(), nil, orig)
	d := decode(t, res.Body)
	var got []string // per round before the boundary: kept whole, or cleared
	for i := 0; 2+2*i < pl.clearTo; i++ {
		var b struct{ Content string }
		json.Unmarshal(d.Messages[2+2*i].Content[0], &b)
		switch {
		case b.Content == rounds[i].result:
			got = append(got, "whole")
		case strings.HasPrefix(b.Content, "[ctxguard clears old tool output"):
			got = append(got, "first stub")
		case strings.HasPrefix(b.Content, "[ctxguard cleared"):
			got = append(got, "stub")
		default:
			got = append(got, "?")
		}
	}
	want := []string{"first stub", "stub", "stub", "whole", "stub", "whole", "stub", "stub"}[:len(got)]
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("results (-want +got):\n%s", d)
	}

	// With the rule off, the same request keeps no read.
	cfg.Reads.KeepTokens = model.Tokens(0)
	d = decode(t, rewrite(t, cfg, store.NewMemory(), nil, orig).Body)
	for _, i := range []int{3, 5} {
		if strings.Contains(string(d.Messages[2+2*i].Content[0]), "func main") || strings.Contains(string(d.Messages[2+2*i].Content[0]), "type T") {
			t.Errorf("round %d kept with the rule off", i)
		}
	}
}

// TestReadsFirstStub: when the session's first clearable item is a read
// that an event keeps, the explanation goes on the first item the event
// clears, and stays there when a later event clears the read.
func TestReadsFirstStub(t *testing.T) {
	big := strings.Repeat("output line with some words in it\n", 120)
	file := strings.Repeat("     1→func main() { println(\"hi\") }\n", 60)
	cfg := testConfig()
	cfg.KeepTokens, cfg.KeepUses, cfg.Trim.Enabled = model.Tokens(0), 1, false
	cfg.Reads = Reads{Tools: []string{"Read"}, KeepTokens: model.Tokens(1000)}
	rounds := []round{
		{"Read", `{"file_path":"/src/a.go"}`, file, ""},
		{"Bash", `{"command":"make"}`, big, ""},
		{"Bash", `{"command":"make test"}`, big, ""},
		{"Bash", `{"command":"ls"}`, big, ""},
	}
	stub := func(body []byte, round int) string {
		var b struct{ Content string }
		json.Unmarshal(decode(t, body).Messages[2+2*round].Content[0], &b)
		return b.Content
	}
	st := store.NewMemory()
	first := rewrite(t, cfg, st, nil, build(`{"type":"disabled"}`, rounds))
	if got := stub(first.Body, 0); got != file {
		t.Fatalf("the read is not kept: %.80q", got)
	}
	explained := stub(first.Body, 1)
	if !strings.HasPrefix(explained, "[ctxguard clears old tool output") {
		t.Fatalf("the first cleared item does not explain: %.80q", explained)
	}
	// Newer reads fill the budget: a later event clears the old read with
	// a short stub, and the explanation stays where it was.
	for i := range 8 {
		rounds = append(rounds, round{"Read", `{"file_path":"/src/f` + string(rune('a'+i)) + `.go"}`, file + string(rune('a'+i)), ""},
			round{"Bash", `{"command":"make"}`, big + string(rune('a'+i)), ""})
	}
	later := rewrite(t, cfg, st, nil, build(`{"type":"disabled"}`, rounds))
	pl := planOf(t, cfg, build(`{"type":"disabled"}`, rounds))
	if len(pl.events) < 2 || pl.keeps(len(pl.kept)-1, 0) {
		t.Fatalf("the test needs a later event that clears the first read: %+v kept %v", pl.events, pl.kept)
	}
	if got := stub(later.Body, 1); got != explained {
		t.Errorf("the explaining stub changed: %.80q", got)
	}
	if got := stub(later.Body, 0); !strings.HasPrefix(got, "[ctxguard cleared Read result") {
		t.Errorf("the cleared read: %.80q", got)
	}
}

func TestPrintsFile(t *testing.T) {
	progs := []string{"cat", "sed -n", "nl", "head"}
	for cmd, want := range map[string]bool{
		"cat a.go":                              true,
		"cat":                                   true,
		"  cd /src && cat a.go":                 true,
		"cd /a && cd b && sed -n '1,200p' x.md": true,
		"nl -ba x.rs | sed -n '1,420p'":         true,
		"head -100 README.md":                   true,
		"catalog list":                          false,
		"sed -i s/a/b/ x":                       false,
		"cat a.go && make":                      false,
		"cat a.go; rm a.go":                     false,
		"cat > /tmp/s.sh <<'EOF'":               false,
		"cat a.go 2>/dev/null":                  false,
		"cat $(ls)":                             false,
		"cat a || true":                         false,
		"cd /src":                               false,
		"cat a.go\nmake":                        false,
		"ssh host cat /etc/hosts":               false,
		"python -c 'print(open(\"a\").read())' cat": false,
	} {
		if got := printsFile(cmd, progs); got != want {
			t.Errorf("printsFile(%q) = %v, want %v", cmd, got, want)
		}
	}
}

func TestShellCommand(t *testing.T) {
	for in, want := range map[string]string{
		`{"command":"cat a"}`:                          "cat a",
		`{"cmd":"cat a","workdir":"/x"}`:               "cat a",
		`{"command":["bash","-lc","sed -n '1,9p' a"]}`: "sed -n '1,9p' a",
		`{"command":["cat","a"]}`:                      "cat a",
		`{"file_path":"a"}`:                            "",
		`{"command":42}`:                               "",
	} {
		body := []byte(in)
		root, err := jsonscan.Root(body)
		if err != nil {
			t.Fatal(err)
		}
		if got := shellCommand(body, root); got != want {
			t.Errorf("shellCommand(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestReadsCodexShape: a Responses request's shell call (arguments
// encoded in a string, the command an argv array) that prints a file is a
// read.
func TestReadsCodexShape(t *testing.T) {
	p, err := New(Config{Tools: []string{"*"}, Reads: Reads{Commands: []string{"cat"}}}, &store.Blobs{Store: store.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"model":"gpt-5","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]},` +
		`{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"cat src/a.rs\"]}","call_id":"c1"},` +
		`{"type":"function_call_output","call_id":"c1","output":"fn main() {}"},` +
		`{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"cargo test\"]}","call_id":"c2"},` +
		`{"type":"function_call_output","call_id":"c2","output":"ok"}]}`)
	c, err := responses.Protocol.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	var got []bool
	for _, m := range c.Messages {
		for i := range m.Blocks {
			if b := &m.Blocks[i]; b.Kind == conversation.ToolResult {
				got = append(got, p.readsCommand(c, b))
			}
		}
	}
	if d := cmp.Diff([]bool{true, false}, got); d != "" {
		t.Errorf("reads (-want +got):\n%s", d)
	}
}

func TestReadsBudget(t *testing.T) {
	for _, tc := range []struct {
		r      Reads
		window int
		want   int
	}{
		{Reads{KeepTokens: model.Tokens(10_000), MaxShare: model.Fraction(0.08)}, 200_000, 10_000},
		{Reads{KeepTokens: model.Tokens(10_000), MaxShare: model.Fraction(0.08)}, 64_000, 5_120},
		{Reads{KeepTokens: model.Tokens(10_000)}, 64_000, 10_000},
		{Reads{KeepTokens: model.Fraction(0.05), MaxShare: model.Tokens(8_000)}, 400_000, 8_000},
		{Reads{MaxShare: model.Fraction(0.08)}, 200_000, 0},
	} {
		if got := tc.r.budget(tc.window); got != tc.want {
			t.Errorf("%+v in %d: budget %d, want %d", tc.r, tc.window, got, tc.want)
		}
	}
}
