package record

import (
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestBusOrderSeqAndCancel(t *testing.T) {
	var b Bus
	var got []string
	b.Subscribe(ObserverFunc(func(x *Exchange) { got = append(got, "a"+x.Session) }))
	cancel := b.Subscribe(ObserverFunc(func(x *Exchange) { got = append(got, "b"+x.Session) }))
	x1 := &Exchange{Session: "1"}
	b.Publish(x1)
	cancel()
	x2 := &Exchange{Session: "2"}
	b.Publish(x2)
	if want := []string{"a1", "b1", "a2"}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("observed %v, want %v", got, want)
	}
	if x1.Seq != 1 || x2.Seq != 2 {
		t.Errorf("seq %d %d, want 1 2", x1.Seq, x2.Seq)
	}
}

func TestBusConcurrent(t *testing.T) {
	var b Bus
	var mu sync.Mutex
	n := 0
	b.Subscribe(ObserverFunc(func(*Exchange) { mu.Lock(); n++; mu.Unlock() }))
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				b.Publish(&Exchange{})
			}
			b.Subscribe(ObserverFunc(func(*Exchange) {}))()
		}()
	}
	wg.Wait()
	if n != 800 {
		t.Errorf("observed %d, want 800", n)
	}
}

func TestClient(t *testing.T) {
	for ua, want := range map[string]string{
		"":                                   "",
		"claude-cli/2.1.197 (external, cli)": "claude-code",
		"codex_cli_rs/0.63.0 (Debian 12; x86_64) xterm": "codex",
		"opencode/1.0.85 ai-sdk/provider-utils/3.0.9":   "opencode",
		"Anthropic/Go 1.84.0":                           "anthropic-sdk",
		"OpenAI/Python 2.8.1":                           "openai-sdk",
		"curl/8.5.0":                                    "curl",
		"Mozilla/5.0":                                   "other",
	} {
		if got := Client(ua); got != want {
			t.Errorf("Client(%q) = %q, want %q", ua, got, want)
		}
	}
}

func TestApplied(t *testing.T) {
	x := &Exchange{Passes: []Pass{{Name: "compress", Edits: 2}, {Name: "persist"}, {Name: "clear", Edits: 1}}, TokensBefore: 10, TokensAfter: 4}
	if got := x.Applied(); len(got) != 2 || got[0] != "compress" || got[1] != "clear" {
		t.Errorf("Applied() = %v", got)
	}
	if x.Saved() != 6 {
		t.Errorf("Saved() = %d", x.Saved())
	}
}

func TestStubText(t *testing.T) {
	long := `"` + strings.Repeat("ab\\n", 400) + `"`
	for _, tc := range []struct{ repl, want string }{
		{`"[ctxguard: cleared 1,234 bytes \u2014 blob at http://x/y]\n\"q\""`, "[ctxguard: cleared 1,234 bytes \u2014 blob at http://x/y]\n\"q\""},
		{`[{"type":"text","text":"x"}]`, `[{"type":"text","text":"x"}]`},
		{`"cut in an escape \`, "cut in an escape "},
		{`"cut in \u00`, "cut in "},
		{`"surrogate \ud83d\ude00"`, "surrogate \ufffd\ufffd"},
		{"", ""},
	} {
		if got := StubText([]byte(tc.repl)); got != tc.want {
			t.Errorf("StubText(%q) = %q, want %q", tc.repl, got, tc.want)
		}
	}
	if got := StubText([]byte(long)); len(got) > StubTextMax || !strings.HasPrefix(got, "ab\nab\n") {
		t.Errorf("long stub: %d bytes, %q...", len(got), got[:10])
	}
	multi := `"` + strings.Repeat("é", 300) + `"`
	if got := StubText([]byte(multi)); !utf8.ValidString(got) || len(got) > StubTextMax {
		t.Errorf("multi-byte head invalid or too long: %d", len(got))
	}
	raw := strings.Repeat("[é", 300)
	if got := StubText([]byte(raw)); !utf8.ValidString(got) || len(got) > StubTextMax {
		t.Errorf("raw head invalid or too long: %d", len(got))
	}
}

func FuzzStubText(f *testing.F) {
	f.Add([]byte(`"a\nb\u00e9"`))
	f.Add([]byte(`[{"text":"x"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := StubText(b)
		if len(got) > StubTextMax || !utf8.ValidString(got) {
			t.Fatalf("StubText: %d bytes, valid %v", len(got), utf8.ValidString(got))
		}
	})
}
