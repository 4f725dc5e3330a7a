package thinking

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestSignatures(t *testing.T) {
	now := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	s := NewSignatures(Config{TTL: 2 * time.Hour, MaxEntries: 10}, func() time.Time { return now })
	s.Record("anthropic", []byte("sig-a"))
	if f, ok := s.Family([]byte("sig-a")); !ok || f != "anthropic" {
		t.Fatalf("Family = %q, %v", f, ok)
	}
	if _, ok := s.Family([]byte("sig-b")); ok {
		t.Fatal("an unknown signature is known")
	}
	// A lookup refreshes: used every hour, it never expires.
	for range 5 {
		now = now.Add(time.Hour)
		if _, ok := s.Family([]byte("sig-a")); !ok {
			t.Fatal("a signature in use expired")
		}
	}
	now = now.Add(2 * time.Hour)
	if _, ok := s.Family([]byte("sig-a")); ok {
		t.Fatal("an unused signature outlived its TTL")
	}
	// Bounded: never more than MaxEntries.
	for i := range 50 {
		now = now.Add(time.Second)
		s.Record("openai", []byte(fmt.Sprint("s", i)))
		if s.Len() > 10 {
			t.Fatalf("%d entries, max 10", s.Len())
		}
	}
	if _, ok := s.Family([]byte("s49")); !ok {
		t.Fatal("the newest entry was evicted")
	}
}

func TestSignaturesConcurrent(t *testing.T) {
	s := NewSignatures(Defaults(), nil)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				sig := []byte(fmt.Sprint(w, "-", i))
				s.Record("anthropic", sig)
				if f, ok := s.Family(sig); !ok || f != "anthropic" {
					t.Errorf("lost %s", sig)
					return
				}
			}
		}()
	}
	wg.Wait()
}
