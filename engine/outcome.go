package engine

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/proxy"
	"github.com/ctxguard/ctxguard/record"
	"github.com/ctxguard/ctxguard/splice"
)

// Rewrite implements proxy.Rewriter. The rewritten body, and the
// compacted body of an overflow retry (Outcome.Recover, set when
// compaction is on), are pooled memory that the proxy hands back through
// Outcome.Release and Retry.Release once the upstream has them. body is
// the proxy's (it pools it too); nothing here keeps it past the exchange.
func (e *Engine) Rewrite(ctx context.Context, req *http.Request, proto protocol.Protocol, body []byte) proxy.Outcome {
	return e.outcome(ctx, req.Header, proto, body, &outBufs)
}

// RewriteRequest is Rewrite for a client in the same process (an SDK's
// middleware), which cannot tell when the body it sends stops being read
// (its transport may read it again, for a redirect or a retry): the
// bodies are fresh memory, and Outcome.Release and Retry.Release are nil.
// h is the request's header; body must stay unmodified until the
// exchange ends (Outcome.Recover rewrites it again).
func (e *Engine) RewriteRequest(ctx context.Context, h http.Header, proto protocol.Protocol, body []byte) proxy.Outcome {
	return e.outcome(ctx, h, proto, body, nil)
}

// outcome rewrites body under the configuration in force into memory of
// pool (nil: fresh memory), and returns what the caller sends, with the
// exchange's record and the headers that describe it.
func (e *Engine) outcome(ctx context.Context, h http.Header, proto protocol.Protocol, body []byte, pool *bufPool) proxy.Outcome {
	s := e.current()
	var out func(int) []byte
	if pool != nil {
		out = pool.get
	}
	res := e.rewrite(ctx, s, proto, h, body, out, false)
	rec := e.newRecord(proto, h, &res)
	hdr := http.Header{}
	e.describe(hdr, &res, rec)
	if res.Skipped != "" {
		hdr.Set("X-Ctxguard-Skipped", res.Skipped)
	}
	if res.Err != nil {
		hdr.Set("X-Ctxguard-Error-Id", res.ID)
	}
	oc := proxy.Outcome{Body: res.Body, AddHeader: res.Headers, RespHeader: hdr, Record: rec}
	if res.Changed && pool != nil {
		oc.Release = func() { pool.put(res.Body) }
	}
	if s.compacts && (res.Skipped == "" || res.Skipped == record.SkipDryRun) && res.Err == nil {
		oc.Recover = e.recoverer(s, proto, h.Clone(), body, res, rec, hdr, pool)
	}
	return oc
}

// describe sets the response headers that describe the body sent
// upstream, from its rewrite res and its record rec: the token estimates
// (in a dry run, of what would have been sent), the API's tokens through
// the calibration, the passes that changed it and whether it was an edit
// event.
func (e *Engine) describe(hdr http.Header, res *Result, rec *record.Exchange) {
	hdr.Set("X-Ctxguard-Tokens-Before", strconv.Itoa(rec.TokensBefore))
	hdr.Set("X-Ctxguard-Tokens-After", strconv.Itoa(rec.TokensAfter))
	if rec.DryRun() {
		// What would have been sent: the body went as it came.
		hdr.Set("X-Ctxguard-Dry-Run", "1")
		if res.WouldSend > 0 {
			hdr.Set("X-Ctxguard-Tokens-After", strconv.Itoa(res.WouldSend))
		}
	}
	if applied := rec.Applied(); res.Changed || (rec.DryRun() && len(applied) > 0) {
		hdr.Set("X-Ctxguard-Passes", strings.Join(applied, ","))
	}
	event := "0"
	if rec.Event {
		event = "1"
	}
	hdr.Set("X-Ctxguard-Edit-Event", event)
	switch {
	case res.Skipped == "":
		hdr.Set("X-Ctxguard-Tokens-Calibrated", strconv.Itoa(rec.CalibratedAfter))
	case rec.DryRun() && res.WouldSend > 0:
		would := res.WouldSend
		if rec.ModelID != "" {
			would = e.calib.Adjust(rec.ModelID, would)
		}
		hdr.Set("X-Ctxguard-Tokens-Calibrated", strconv.Itoa(would))
	}
}

// RewriteBody rewrites one request body of protocol proto (one of
// Options.Protocols). h is the request's header (may be nil). It never fails: on
// any problem the result carries the original body. Its record
// (Records), with no transport figures, is published before it returns.
func (e *Engine) RewriteBody(ctx context.Context, proto protocol.Protocol, h http.Header, body []byte) (res Result) {
	start := time.Now()
	res = e.rewrite(ctx, e.current(), proto, h, body, nil, false)
	rec := e.newRecord(proto, h, &res)
	rec.Start, rec.Rewrite, rec.BytesIn, rec.BytesOut = start, time.Since(start), int64(len(body)), int64(len(res.Body))
	e.Publish(rec)
	return res
}

// newRecord starts the record of a request from its rewrite's result.
func (e *Engine) newRecord(proto protocol.Protocol, h http.Header, res *Result) *record.Exchange {
	x := &record.Exchange{
		Protocol:     proto.Name(),
		Client:       record.Client(h.Get("User-Agent")),
		Session:      res.Session,
		Model:        res.RequestModel,
		Family:       model.Family(res.RequestModel),
		Window:       res.Model.Window,
		MaxOutput:    res.Model.MaxOutput,
		Skipped:      res.Skipped,
		ErrorID:      res.ID,
		Passes:       res.Passes,
		Notes:        res.Notes,
		Event:        res.Event,
		Cause:        res.Cause,
		Cold:         res.Cold,
		CacheTTL:     res.CacheTTL,
		Compaction:   res.Compaction,
		Stubs:        res.Stubs,
		TokensBefore: res.TokensBefore,
		TokensAfter:  res.TokensAfter,
		TokensAdded:  res.TokensAdded,
		WouldSend:    res.WouldSend,
		WouldAdd:     res.WouldAdd,
	}
	if res.Model.ID != "" && res.RequestModel != "" {
		x.ModelID = res.Model.ID
	}
	switch {
	case res.Err != nil:
		x.Outcome, x.Error = record.FailedOpen, res.Err.Error()
	case res.Skipped != "" && res.Skipped != record.SkipDryRun:
		x.Outcome = record.Bypassed
	case res.Changed:
		x.Outcome = record.Rewritten
	default:
		x.Outcome = record.Unchanged
	}
	if cfg := e.current().cfg; cfg.Dashboard.ShowBodies || cfg.Log.DumpBodies {
		x.Bodies = &record.Bodies{Before: bytes.Clone(res.original), After: bytes.Clone(res.Body)}
	}
	e.calibrate(x)
	return x
}

// calibrate sets a record's calibrated token figures from its estimates,
// through the calibration learned so far; Publish replaces them with the
// API's count when the answer reports usage.
func (e *Engine) calibrate(x *record.Exchange) {
	x.CalibratedBefore, x.CalibratedAfter = x.TokensBefore, x.TokensAfter
	if x.ModelID != "" {
		x.CalibratedBefore = e.calib.Adjust(x.ModelID, x.TokensBefore)
		x.CalibratedAfter = e.calib.Adjust(x.ModelID, x.TokensAfter)
	}
}

// Publish completes a record with the API's count of the prompt, when
// the answer reported usage, and hands it to the observers of Records.
// It is the proxy's record hook (proxy.Options.Record); x must not be
// modified afterwards.
func (e *Engine) Publish(x *record.Exchange) {
	if x.Usage != nil && x.Status/100 == 2 && x.TokensAfter > 0 {
		// The API counted the prompt it got; the one the client sent is
		// scaled by the same ratio.
		x.CalibratedAfter = x.Usage.PromptTokens()
		x.CalibratedBefore = int(int64(x.TokensBefore) * int64(x.CalibratedAfter) / int64(x.TokensAfter))
	}
	e.bus.Publish(x)
}

// stubs turns the edits that name blobs into the record's stubs (at most
// record.MaxStubs): one per blob, the edit's sizes and head on its first.
// The heads are copied into one allocation: they are decoded only when
// someone looks (record.Stub.Text).
func stubs(edits []splice.Edit) []record.Stub {
	if len(edits) == 0 {
		return nil
	}
	size := 0
	for _, e := range edits {
		size += min(len(e.Repl), record.StubHeadMax)
	}
	heads := make([]byte, 0, size)
	out := make([]record.Stub, 0, min(len(edits), record.MaxStubs))
	for _, e := range edits {
		first := true
		for id := range strings.FieldsSeq(e.Blob) {
			if len(out) == record.MaxStubs {
				return out
			}
			st := record.Stub{Blob: id}
			if first {
				at := len(heads)
				heads = append(heads, e.Repl[:min(len(e.Repl), record.StubHeadMax)]...)
				st.Bytes, st.Sent, st.Head = e.Span.Len(), len(e.Repl), heads[at:len(heads):len(heads)]
				first = false
			}
			out = append(out, st)
		}
	}
	return out
}
