package sessiongen

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/tools/validate"
)

// TestGenerate: generated sessions load without repairs, are
// deterministic, and every request is valid and repeats the previous one
// up to its moving marker.
func TestGenerate(t *testing.T) {
	var requests, bytesTotal int
	for seed := range uint64(30) {
		s, err := Generate(rand.New(rand.NewPCG(seed, 7)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		again, _ := Generate(rand.New(rand.NewPCG(seed, 7)), Options{})
		if !bytes.Equal(s.JSONL, again.JSONL) {
			t.Fatalf("seed %d: not deterministic", seed)
		}
		if r := s.Session.Stats.Repairs; r.Total() != 0 {
			t.Errorf("seed %d: loading repaired the transcript: %+v", seed, r)
		}
		reqs, err := s.Requests()
		if err != nil {
			t.Fatal(err)
		}
		for k, r := range reqs {
			requests++
			bytesTotal += len(r.Body)
			if err := validate.Request(r.Body); err != nil {
				t.Fatalf("seed %d request %d: %v", seed, k, err)
			}
			if k > 0 && !bytes.HasPrefix(r.Body, reqs[k-1].Body[:reqs[k-1].Stable]) && r.Model == reqs[k-1].Model {
				t.Fatalf("seed %d request %d does not repeat request %d", seed, k, k-1)
			}
		}
	}
	t.Logf("%d requests, %d MB", requests, bytesTotal>>20)
}

func TestNewSource(t *testing.T) {
	a := rand.New(NewSource([]byte("0123456789")))
	b := rand.New(NewSource([]byte("0123456789")))
	for range 10 {
		if a.Uint64() != b.Uint64() {
			t.Fatal("not deterministic")
		}
	}
	if got := NewSource([]byte{1}).Uint64(); got != 1 {
		t.Errorf("first value %d, want 1", got)
	}
	if _, err := Generate(rand.New(NewSource(nil)), Options{}); err != nil {
		t.Fatal(err)
	}
}

// The same generated sessions rendered as OpenAI requests: every
// Responses request passes the Responses adapter's Validate, every Chat
// request is JSON, and each request repeats the previous one up to the
// end of its history.
func TestGenerateOpenAI(t *testing.T) {
	for seed := range uint64(12) {
		for _, proto := range []string{"responses", "chat"} {
			s, err := Generate(rand.New(rand.NewPCG(seed, 7)), Options{Protocol: proto, MaxResult: 20_000})
			if err != nil {
				t.Fatal(err)
			}
			reqs, err := s.Requests()
			if err != nil {
				t.Fatal(err)
			}
			for k, r := range reqs {
				if proto == "responses" {
					if err := responses.Validate(r.Body); err != nil {
						t.Fatalf("seed %d request %d: %v", seed, k, err)
					}
				} else if !json.Valid(r.Body) {
					t.Fatalf("seed %d chat request %d is not JSON", seed, k)
				}
				if k > 0 && !bytes.HasPrefix(r.Body, reqs[k-1].Body[:reqs[k-1].Stable]) && r.Model == reqs[k-1].Model {
					t.Fatalf("seed %d %s request %d does not repeat request %d", seed, proto, k, k-1)
				}
			}
		}
	}
}
