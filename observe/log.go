package observe

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/ctxguard/ctxguard/record"
)

// Log returns the log's observer of the exchange records: one line
// per exchange ("exchange"), at info, or warn when a pass failed open, an
// overflow recovery failed (with its reason) or ctxguard answered with
// its own error; with log.format json it is one
// JSON object. The error_id is the one the client saw in its error body
// (refused) or the one of the log line with the failure's detail
// (failed_open). At debug level the line adds the pass decisions: every
// pass's edits and bytes, the passes' notes and the stubs' blobs.
func Log(log *slog.Logger) record.Observer {
	return record.ObserverFunc(func(x *record.Exchange) { logExchange(log, x) })
}

// logExchange writes x's line to log (see Log).
func logExchange(log *slog.Logger, x *record.Exchange) {
	ctx := context.Background()
	level := slog.LevelInfo
	if x.Outcome == record.FailedOpen || x.Outcome == record.RecoveryFailed || x.Outcome == record.Refused {
		level = slog.LevelWarn
	}
	if !log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 32)
	str := func(k, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(k, v))
		}
	}
	attrs = append(attrs, slog.Uint64("seq", x.Seq))
	str("protocol", x.Protocol)
	str("route", x.Route)
	str("path", x.Path)
	str("client", x.Client)
	str("session", x.Session)
	str("model", x.Model)
	attrs = append(attrs, slog.String("outcome", string(x.Outcome)))
	str("skipped", x.Skipped)
	str("error_id", x.ErrorID)
	str("error", x.Error)
	str("reason", x.Reason)
	attrs = append(attrs, slog.Int("status", x.Status),
		slog.Int("tokens_before", x.TokensBefore), slog.Int("tokens_after", x.TokensAfter),
		slog.Int("calibrated_before", x.CalibratedBefore), slog.Int("calibrated_after", x.CalibratedAfter))
	if x.TokensAdded != 0 {
		attrs = append(attrs, slog.Int("tokens_added", x.TokensAdded))
	}
	if x.DryRun() && x.WouldSend > 0 {
		attrs = append(attrs, slog.Int("would_send", x.WouldSend))
	}
	if a := x.Applied(); len(a) > 0 {
		attrs = append(attrs, slog.String("passes", strings.Join(a, ",")))
	}
	if x.Event {
		attrs = append(attrs, slog.Bool("event", true))
	}
	str("compaction", x.Compaction)
	if len(x.Stubs) > 0 {
		attrs = append(attrs, slog.Int("stubs", len(x.Stubs)))
	}
	attrs = append(attrs,
		slog.Float64("read_ms", ms(x.Read)), slog.Float64("rewrite_ms", ms(x.Rewrite)),
		slog.Float64("first_byte_ms", ms(x.FirstByte)), slog.Float64("total_ms", ms(x.Total)),
		slog.Int64("bytes_in", x.BytesIn), slog.Int64("bytes_out", x.BytesOut), slog.Int64("bytes_resp", x.BytesResp))
	if u := x.Usage; u != nil {
		attrs = append(attrs, slog.Group("usage", slog.Int("input", u.Input), slog.Int("cache_read", u.CacheRead),
			slog.Int("cache_write", u.CacheWrite), slog.Int("output", u.Output)))
	}
	if log.Enabled(ctx, slog.LevelDebug) {
		// The pass decisions.
		ps := make([]string, len(x.Passes))
		for i, p := range x.Passes {
			ps[i] = p.Name + ":" + strconv.Itoa(p.Edits) + " edits:" + strconv.Itoa(p.Saved) + " bytes"
			if p.Added != 0 {
				ps[i] += ":" + strconv.Itoa(p.Added) + " bytes added"
			}
		}
		attrs = append(attrs, slog.Any("pass_decisions", ps))
		if len(x.Notes) > 0 {
			attrs = append(attrs, slog.Any("notes", x.Notes))
		}
		if len(x.Stubs) > 0 {
			ids := make([]string, 0, min(len(x.Stubs), 50))
			for _, s := range x.Stubs[:min(len(x.Stubs), 50)] {
				ids = append(ids, s.Blob+":"+strconv.Itoa(s.Bytes))
			}
			attrs = append(attrs, slog.Any("stub_blobs", ids))
		}
	}
	log.LogAttrs(ctx, level, "exchange", attrs...)
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
