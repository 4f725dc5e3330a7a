package clearing

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/store/storetest"
	"github.com/google/go-cmp/cmp"
)

// TestStubMemoBlobs: a memoized stub names the same blobs as a fresh one,
// and once Blobs.Use finds those blobs gone, the next rewrite renders the
// stubs again and so stores the blobs again (the memo is keyed by the
// store's epoch), with the same bytes.
func TestStubMemoBlobs(t *testing.T) {
	big := strings.Repeat("output line with some words in it\n", 120)
	file := strings.Repeat("package main // source\n", 100)
	var rounds []round
	for i := range 6 {
		rounds = append(rounds, round{"Bash", `{"command":"step ` + string(rune('a'+i)) + `"}`, big + string(rune('a'+i)), ""})
	}
	rounds[1] = round{"Write", `{"file_path":"/a.go","content":` + q(file) + `,"note":` + q(file+"2") + `}`, "ok", ""}
	orig := build(`{"type":"adaptive"}`, rounds)

	const ttl = time.Hour
	clk := storetest.NewClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	d := storetest.TempDir(t, ttl, clk.Now)
	blobs := &store.Blobs{Store: d, TTL: ttl, Now: clk.Now}
	p, err := New(testConfig(), blobs)
	if err != nil {
		t.Fatal(err)
	}
	run := func() pipeline.Result {
		t.Helper()
		c, err := anthropic.Parse(orig)
		if err != nil {
			t.Fatal(err)
		}
		res := pipeline.New(nil, p).Run(&pipeline.Request{Conv: c, Env: &pipeline.Env{Window: 200_000}})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return res
	}
	first := run()
	// The Write input's two large fields are two blobs of one edit.
	for _, s := range []string{file, file + "2", big + "a"} {
		if id := store.ID([]byte(s)); !strings.Contains(strings.Join(first.Blobs, " "), id) {
			t.Errorf("Blobs %v lack %s", first.Blobs, id)
		}
	}
	again := run() // from the memo
	if d := cmp.Diff(first.Blobs, again.Blobs); d != "" || !bytes.Equal(first.Body, again.Body) {
		t.Fatalf("a memoized rewrite differs; Blobs (-first +again):\n%s", d)
	}

	for _, id := range first.Blobs {
		if err := os.Remove(d.BlobPath(id)); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(store.RefreshInterval(ttl))
	if m := blobs.Use(context.Background(), first.Blobs); m != len(first.Blobs) {
		t.Fatalf("Use found %d of %d missing", m, len(first.Blobs))
	}
	healed := run()
	if !bytes.Equal(first.Body, healed.Body) {
		t.Error("the rewrite after the loss sends other bytes")
	}
	for _, id := range first.Blobs {
		if !d.HasBlob(context.Background(), id) {
			t.Errorf("blob %s was not stored again", id)
		}
	}
}
