package record

import (
	"sync"
	"testing"
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
