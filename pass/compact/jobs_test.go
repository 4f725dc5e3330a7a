package compact

import (
	"context"
	"testing"
	"time"

	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/store"
)

// hangingSummarizer answers only when its context ends.
type hangingSummarizer struct{ called chan struct{} }

func (h hangingSummarizer) Summarize(ctx context.Context, _ *pass.Job) (pass.Summary, error) {
	h.called <- struct{}{}
	<-ctx.Done()
	return pass.Summary{}, ctx.Err()
}

// TestCloseReleasesLease: a process that closes while its summary is
// being written gives the span's lease up, so another process on the same
// store takes the span at once rather than watching until the lease's
// deadline for a summary that will not come. Without the release, the
// second process's lease call reports the span as another's.
func TestCloseReleasesLease(t *testing.T) {
	st := store.NewMemory()
	newPass := func(sum pass.Summarizer) *Pass {
		p, err := New(Defaults(), Options{Blobs: &store.Blobs{Store: st, BaseURL: "http://x"}, Summarizer: sum})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	h := hangingSummarizer{called: make(chan struct{}, 1)}
	a := newPass(h)
	const key = "compact/test-span"
	now := time.Now()
	mine, _, err := a.jobs.lease(context.Background(), key, now)
	if err != nil || !mine {
		t.Fatalf("the first process's lease: mine=%v err=%v", mine, err)
	}
	jb := &job{done: make(chan struct{}), overdue: make(chan struct{})}
	a.jobs.mu.Lock()
	a.jobs.m[key] = jb
	a.jobs.mu.Unlock()
	a.jobs.wg.Add(1)
	go a.jobs.run(key, jb, &spanInput{}, &pass.Job{})
	<-h.called

	b := newPass(nil)
	defer b.Close()
	if mine, until, _ := b.jobs.lease(context.Background(), key, now); mine {
		t.Fatal("a second process took a lease the first still holds")
	} else if !until.After(now) {
		t.Fatalf("the held lease ends at %v, not after now", until)
	}

	a.Close() // the job ends unfinished
	mine, _, err = b.jobs.lease(context.Background(), key, now)
	if err != nil || !mine {
		t.Fatalf("after the first process closed, the second's lease: mine=%v err=%v; want it taken at once", mine, err)
	}
}
