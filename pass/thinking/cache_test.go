package thinking

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable clock for the cache.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time             { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration)    { c.ns.Add(int64(d)) }
func sig(i int) []byte                      { return fmt.Appendf(nil, `"sig-%d"`, i) }
func family(s *Signatures, b []byte) string { f, _ := s.Family(b); return f }

func TestSignaturesTTL(t *testing.T) {
	clk := newClock()
	s := NewSignatures(Config{TTL: 2 * time.Hour, MaxEntries: 100}, clk.now)
	s.Record("anthropic", sig(1))
	s.Record("openai", sig(2))
	if f, ok := s.Family(sig(1)); !ok || f != "anthropic" {
		t.Fatalf("Family = %q, %v; want anthropic", f, ok)
	}
	if _, ok := s.Family(sig(3)); ok {
		t.Fatal("an unknown signature is known")
	}
	// Sliding: looked up every 90 minutes, sig 1 outlives many TTLs;
	// sig 2, never looked up, expires.
	for range 5 {
		clk.advance(90 * time.Minute)
		if family(s, sig(1)) != "anthropic" {
			t.Fatal("a signature in use expired")
		}
	}
	if _, ok := s.Family(sig(2)); ok {
		t.Fatal("an unused signature outlived its TTL")
	}
	// Exactly TTL after the last use it is gone.
	clk.advance(2 * time.Hour)
	if _, ok := s.Family(sig(1)); ok {
		t.Fatal("a signature unused for the TTL is still known")
	}
	// Record refreshes too, and may change the family.
	s.Record("anthropic", sig(4))
	clk.advance(time.Hour)
	s.Record("google", sig(4))
	clk.advance(90 * time.Minute)
	if f := family(s, sig(4)); f != "google" {
		t.Fatalf("re-recorded signature: %q, want google", f)
	}
	// Empty inputs are ignored.
	s.Record("", sig(5))
	s.Record("openai", nil)
	if _, ok := s.Family(sig(5)); ok {
		t.Fatal("a signature recorded without a family is known")
	}
	if _, ok := s.Family(nil); ok {
		t.Fatal("the empty signature is known")
	}
}

// TestSignaturesBound: never more than MaxEntries, and an entry in use
// survives any number of newer ones.
func TestSignaturesBound(t *testing.T) {
	clk := newClock()
	const max = 10
	s := NewSignatures(Config{TTL: time.Hour, MaxEntries: max}, clk.now)
	s.Record("anthropic", []byte(`"live"`))
	for i := range 1000 {
		clk.advance(time.Millisecond)
		s.Record("openai", sig(i))
		if n := s.Len(); n > max {
			t.Fatalf("after %d records: %d entries, max %d", i+1, n, max)
		}
		if i%3 == 0 && family(s, []byte(`"live"`)) != "anthropic" {
			t.Fatalf("after %d records the signature in use was evicted", i+1)
		}
	}
	if family(s, sig(999)) != "openai" {
		t.Error("the newest entry was evicted")
	}
	if _, ok := s.Family(sig(0)); ok {
		t.Error("the oldest unused entry is still there")
	}
	// The newest MaxEntries/2 survive whatever the order of use.
	for i := 1000 - max/2; i < 1000; i++ {
		if _, ok := s.Family(sig(i)); !ok {
			t.Errorf("sig %d, among the %d newest, was evicted", i, max/2)
		}
	}
}

func TestSignaturesDefaults(t *testing.T) {
	s := NewSignatures(Config{}, nil)
	if s.ttl != 2*time.Hour || s.half != 50_000 {
		t.Errorf("zero Config: ttl %v, %d a generation; want the defaults", s.ttl, s.half)
	}
	if err := (Config{TTL: time.Hour}).Validate(); err == nil {
		t.Error("max_entries 0 validates")
	}
	if err := Defaults().Validate(); err != nil {
		t.Error(err)
	}
}

// TestSignaturesConcurrent runs records and lookups from several
// goroutines (meant for -race). With room for every signature none is
// lost; with a small cache, whose generations turn over all the time, the
// bound holds and a lookup finds the family recorded or nothing, never
// another one.
func TestSignaturesConcurrent(t *testing.T) {
	for _, tc := range []struct {
		max    int
		strict bool
	}{{4 * 3000, true}, {200, false}} {
		clk := newClock()
		s := NewSignatures(Config{TTL: time.Hour, MaxEntries: tc.max}, clk.now)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fam := []string{"anthropic", "openai", "google", "x"}[w]
				for i := range 3000 {
					b := fmt.Appendf(nil, `"%d-%d"`, w, i)
					s.Record(fam, b)
					clk.advance(time.Microsecond)
					f, ok := s.Family(b)
					if ok && f != fam || !ok && tc.strict {
						t.Errorf("max %d: goroutine %d looked up %s: %q, %v", tc.max, w, b, f, ok)
						return
					}
					if n := s.Len(); n > tc.max {
						t.Errorf("%d entries, max %d", n, tc.max)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}

// TestSignaturesMemory measures what a full cache holds: the bound
// stated in the Signatures documentation (about 50 bytes an entry).
func TestSignaturesMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a full default cache")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := NewSignatures(Defaults(), nil)
	for i := range 250_000 {
		s.Record("anthropic", sig(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / float64(s.Len())
	t.Logf("%d entries: %.0f bytes an entry, %.1f MiB", s.Len(), per, float64(after.HeapAlloc-before.HeapAlloc)/(1<<20))
	if s.Len() > Defaults().MaxEntries || per > 80 {
		t.Errorf("%d entries of %.0f bytes: over the documented bound", s.Len(), per)
	}
	runtime.KeepAlive(s)
}

func BenchmarkSignaturesFamily(b *testing.B) {
	s := NewSignatures(Defaults(), nil)
	sigs := make([][]byte, 1000)
	for i := range sigs {
		sigs[i] = fmt.Appendf(nil, `"%0400d"`, i) // the size of a real signature
		s.Record("anthropic", sigs[i])
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Family(sigs[i%len(sigs)])
	}
}
