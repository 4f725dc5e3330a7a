package compact

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ctxguard/ctxguard/pass"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tokens"
)

// retryAfter is how long a span whose summary failed waits before a model
// is asked again (meanwhile the extractive summary serves if needed).
const retryAfter = 5 * time.Minute

// jobs runs summaries in the background, one per span at a time: two
// requests of one session share one call, and so do processes on one
// store. Before asking a model, a process takes the span's lease (a record
// "<span>/lease" naming it and a deadline, written with PutIfAbsent); a
// process that finds another's lease in force does not ask, but watches
// the store for the summary until the lease's deadline. A lease whose
// deadline passed (its process died) is taken over.
//
// A summarizer with a breaker (pass.Breaker) is asked before a job starts: a
// job starts only when a call would be made, and a request waits for a
// job only while the breaker is closed. A request that waited for a job
// as long as it may (Config.Wait) tells the summarizer (Job.Overdue).
type jobs struct {
	p       *Pass
	timeout time.Duration
	owner   string // this process's name in leases
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu     sync.Mutex
	m      map[string]*job      // running, by span name
	failed map[string]time.Time // span name → when a model may be asked again
}

// job is one summary being written. rec is set before done is closed.
type job struct {
	done chan struct{}
	rec  *record
	// probe: the job's call is the probe of a summarizer whose breaker
	// opened; no request waits for it.
	probe bool
	// overdue is closed (once) when a request stopped waiting for the
	// job (Job.Overdue); nil for a job that watches another process's.
	overdue     chan struct{}
	overdueOnce sync.Once
}

// allows asks the summarizer's breaker, if it has one, whether a call
// for a session's request (its protocol and model) would be made now,
// and whether it would be a probe; with count, a refusal is counted.
func (p *Pass) allows(proto, model string, count bool) (ok, probe bool) {
	b, isB := p.sum.(pass.Breaker)
	if !isB {
		return true, false
	}
	return b.Allows(&pass.Job{Protocol: proto, Model: model}, count)
}

func (j *jobs) init(p *Pass, timeout time.Duration) {
	j.p, j.timeout = p, timeout
	var b [8]byte
	rand.Read(b[:])
	j.owner = hex.EncodeToString(b[:])
	j.ctx, j.cancel = context.WithCancel(context.Background())
	j.m, j.failed = map[string]*job{}, map[string]time.Time{}
}

// close cancels the running jobs and waits for them.
func (j *jobs) close() {
	j.cancel()
	j.wg.Wait()
}

// start returns the job writing the summary of s's pending span, starting
// it if none runs. It returns nil when there is no model to ask, or a
// model failed on this span recently.
func (j *jobs) start(s *planState, env *pipeline.Env) *job {
	p := j.p
	if p.sum == nil {
		return nil
	}
	key := s.pending.key
	j.mu.Lock()
	defer j.mu.Unlock()
	if jb := j.m[key]; jb != nil {
		return jb
	}
	now := p.now()
	if t, ok := j.failed[key]; ok {
		if now.Before(t) {
			return nil // before asking the store: this runs on every request until then
		}
		delete(j.failed, key)
	}
	ok, probe := p.allows(env.Protocol, s.r.Conv.Model, false)
	if !ok {
		return nil // the summarizer is known to fail: no call, no wait
	}
	if rec, err := p.get(s.r.Context(), key); err != nil || rec != nil {
		return nil // written already (by another process on the store)
	}
	for k, t := range j.failed {
		if !now.Before(t) {
			delete(j.failed, k)
		}
	}
	ctx := s.r.Context()
	mine, until, err := j.lease(ctx, key, now)
	if err != nil {
		p.log.Warn("compact: taking a summary's lease", "span", key, "err", err)
		return nil
	}
	if !mine {
		// Another process asks a model for this span: watch for its
		// summary.
		jb := &job{done: make(chan struct{})}
		j.m[key] = jb
		j.wg.Add(1)
		go j.watch(key, jb, until)
		return jb
	}
	in, err := s.input()
	if err != nil {
		p.log.Warn("compact: reading the span to summarize", "err", err)
		return nil
	}
	jb := &job{done: make(chan struct{}), probe: probe, overdue: make(chan struct{})}
	j.m[key] = jb
	req := &pass.Job{
		Protocol:  env.Protocol,
		Model:     s.r.Conv.Model,
		Header:    env.Header.Clone(),
		System:    systemPrompt(p.modelTarget(in)),
		Input:     userPrompt(in.prevSummary, s.r.Conv, in.from, in.to),
		MaxTokens: in.budget,
		Overdue:   jb.overdue,
	}
	j.wg.Add(1)
	go j.run(key, jb, in, req)
	return jb
}

// modelTarget is the length a model's summary of in is asked for: the
// budget less the summary message's note and the appendix of facts that
// follows the summary (at most half of what is left).
func (p *Pass) modelTarget(in *spanInput) int {
	blob := ""
	if len(in.transcript) > 0 {
		blob = store.ID(in.transcript) // the blob newRecord keeps them in
	}
	f := merge(in.prev, in.cur, blob)
	var blobs []string
	for _, b := range f.Spans {
		if b != "" {
			blobs = append(blobs, b)
		}
	}
	budget := summaryBudget(in.budget, p.note(in.count, blobs))
	return budget - min(tokens.EstimateText(f.render(appendix)), budget/2)
}

// run writes one summary and stores it (unless another record landed
// first: then that one stands).
func (j *jobs) run(key string, jb *job, in *spanInput, req *pass.Job) {
	defer j.wg.Done()
	p := j.p
	ctx, cancel := context.WithTimeout(j.ctx, j.timeout)
	defer cancel()
	sum, err := p.sum.Summarize(ctx, req)
	inTok := tokens.EstimateText(req.System) + tokens.EstimateText(req.Input)
	req = nil // the credentials go with it
	var rec *record
	if err == nil {
		if sum.InputTokens > 0 {
			inTok = sum.InputTokens
		}
		if strings.TrimSpace(sum.Text) == "" {
			p.log.Warn("compact: the summarizer answered with no text; the extractive summary serves", "span", key)
		}
		// An empty answer, or one over the budget, gives way to the
		// extractive summary (newRecord).
		rec, err = p.put(ctx, key, p.newRecord(ctx, in, sum.Text, sum.Model, inTok, sum.OutputTokens))
	}
	if rec == nil && j.ctx.Err() != nil {
		j.release(key) // closed before the summary was stored
	}
	j.mu.Lock()
	switch {
	case errors.Is(err, pass.ErrBreakerOpen):
		// Not this span's failure: it is asked for again once the
		// breaker lets calls through.
		p.log.Debug("compact: the summarizer's breaker is open; the extractive summary serves if the session reaches the overflow line", "span", key, "err", err)
	case err != nil:
		j.failed[key] = p.now().Add(retryAfter)
		p.log.Warn("compact: the summarizer failed; the extractive summary serves if the session reaches the overflow line", "span", key, "err", err)
	}
	jb.rec = rec
	delete(j.m, key)
	j.mu.Unlock()
	close(jb.done)
}

// lease takes the lease of the span named key, as of now, unless another
// process holds it: then it returns false and the lease's deadline. The
// lease lasts the job timeout.
func (j *jobs) lease(ctx context.Context, key string, now time.Time) (mine bool, until time.Time, err error) {
	st := j.p.blobs.Store
	deadline := now.Add(j.timeout)
	val := []byte(j.owner + " " + strconv.FormatInt(deadline.UnixMilli(), 10))
	cur, stored, err := st.PutIfAbsent(ctx, key+"/lease", val)
	if err != nil || stored {
		return stored, deadline, err
	}
	owner, ms, _ := strings.Cut(string(cur), " ")
	held, perr := strconv.ParseInt(ms, 10, 64)
	until = time.UnixMilli(held)
	if owner != j.owner && perr == nil && now.Before(until) {
		return false, until, nil
	}
	// Ours from an earlier try, expired, or not a lease: take it, and
	// read it back in case another process took it at the same time.
	if err := st.Put(ctx, key+"/lease", val); err != nil {
		return false, deadline, err
	}
	cur, err = st.Get(ctx, key+"/lease")
	if err != nil {
		return false, deadline, err
	}
	return string(cur) == string(val), deadline, nil
}

// releaseTimeout bounds giving a lease up when the pass closes.
const releaseTimeout = 2 * time.Second

// release gives up the lease of the span named key if this process holds
// it: a job that ends unfinished because the pass closes (a restart, a
// shutdown) leaves no lease behind, so another process on the store asks
// for the summary at once instead of watching, until the lease's
// deadline (the job timeout), for a summary that will not come. The lease
// is ended, not removed: its deadline is set in the past.
func (j *jobs) release(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	st := j.p.blobs.Store
	cur, err := st.Get(ctx, key+"/lease")
	if err != nil || !strings.HasPrefix(string(cur), j.owner+" ") {
		return
	}
	if err := st.Put(ctx, key+"/lease", []byte(j.owner+" 0")); err != nil {
		j.p.log.Warn("compact: giving up a summary's lease", "span", key, "err", err)
	}
}

// leasePoll is how often a process watching another's summary looks for
// it in the store.
const leasePoll = 250 * time.Millisecond

// watch waits for the summary of the span named key that another process
// writes, until its lease ends (or the job timeout, or Close).
func (j *jobs) watch(key string, jb *job, until time.Time) {
	defer j.wg.Done()
	p := j.p
	ctx, cancel := context.WithTimeout(j.ctx, j.timeout)
	defer cancel()
	t := time.NewTicker(leasePoll)
	defer t.Stop()
	var rec *record
	for rec == nil && p.now().Before(until) {
		select {
		case <-ctx.Done():
			until = time.Time{}
			continue
		case <-t.C:
		}
		var err error
		if rec, err = p.get(ctx, key); err != nil {
			p.log.Warn("compact: reading a summary another process writes", "span", key, "err", err)
		}
	}
	j.mu.Lock()
	jb.rec = rec
	delete(j.m, key)
	j.mu.Unlock()
	close(jb.done)
}

// wait returns the job's record once written, or nil when it failed, ctx
// ended or d passed first; when d passed, the job is overdue.
func (jb *job) wait(ctx context.Context, d time.Duration) *record {
	if ctx == nil {
		ctx = context.Background()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-jb.done:
		return jb.rec
	case <-ctx.Done():
	case <-t.C:
		if jb.overdue != nil {
			jb.overdueOnce.Do(func() { close(jb.overdue) })
		}
	}
	return nil
}

// WaitIdle waits until no summary is being written (tests, replays).
func (p *Pass) WaitIdle() {
	for {
		p.jobs.mu.Lock()
		var jb *job
		for _, v := range p.jobs.m {
			jb = v
			break
		}
		p.jobs.mu.Unlock()
		if jb == nil {
			return
		}
		<-jb.done
	}
}
