package replay

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestTimeAwareCost replays the hand-computed fixture (report_test.go)
// at chosen times under each source of a cache lifetime. Every figure is
// worked out by hand from the fixture's token counts (requests of 100,
// 350 and 380 tokens; the rewritten third one 190, of which 154 shared
// with the second when warm):
//
//   - warm, Anthropic 5-minute writes (the time-blind figures): original
//     125 + 322.5 + 72.5 = 520, sent 125 + 322.5 + 60.4 = 507.9;
//   - request 3 cold: it writes everything, 380 and 190 tokens;
//   - 1-hour writes cost 2x: request 1 200, request 2 10 + 500 = 510,
//     request 3 warm 35 + 60 = 95 (sent 15.4 + 72 = 87.4), cold 760
//     (sent 380);
//   - OpenAI (reads 0.1, writes 1): 100 + 260 + 65 = 425, sent 100 + 260
//   - 51.4 = 411.4; request 3 cold 380 (sent 190).
//
// Money at claude-opus-4-5's rates ($5 input, $6.25 write, $10 1-hour
// write, $0.50 read per MTok) and gpt-5.2's ($1.75, read $0.175), in µ$:
// reads and writes of the whole stream, original then sent.
func TestTimeAwareCost(t *testing.T) {
	t0 := time.Date(2026, 1, 17, 4, 0, 0, 0, time.UTC)
	at := func(d ...time.Duration) []time.Time {
		out := []time.Time{}
		for _, x := range d {
			out = append(out, t0.Add(x))
		}
		return out
	}
	hour := func(b []byte) []byte {
		return bytes.ReplaceAll(b, []byte(`{"type":"ephemeral"}`), []byte(`{"type":"ephemeral","ttl":"1h"}`))
	}
	retain := func(b []byte) []byte {
		return bytes.Replace(b, []byte(`{"model":"claude-opus-4-5",`), []byte(`{"model":"claude-opus-4-5","prompt_cache_retention":"24h",`), 1)
	}
	type figures struct {
		Orig, Sent, OrigBlind, SentBlind float64
		OrigBP, SentBP                   float64
		Cold, ColdEvents                 int
		USD                              [4]float64 // µ$: orig, sent, orig blind, sent blind
	}
	anthWarm := figures{Orig: 520, Sent: 507.9, OrigBlind: 520, SentBlind: 507.9, OrigBP: 520, SentBP: 570,
		USD: [4]float64{2600, 2539.5, 2600, 2539.5}}
	for _, tc := range []struct {
		name   string
		model  string
		times  []time.Time
		body   func([]byte) []byte
		ttl    time.Duration // RunOptions.CacheTTL
		openai bool
		want   figures
	}{
		{"never expires, a day apart", "claude-opus-4-5", at(0, 24*time.Hour, 48*time.Hour), nil, NeverExpires, false, anthWarm},
		{"anthropic 5m, 4m59s gaps: warm", "claude-opus-4-5", at(0, 299*time.Second, 598*time.Second), nil, 0, false, anthWarm},
		{"unknown times: warm", "claude-opus-4-5", []time.Time{{}, {}, {}}, nil, 0, false, anthWarm},
		// Request 3 comes 6 minutes after request 2: 475 and 237.5; the
		// breakpoint model's entries (last used at request 2) are gone
		// too. Money: reads 100, writes 730 (50 + 4562.5); sent reads
		// 100, writes 540 (50 + 3375).
		{"anthropic 5m, request 3 after 6 minutes: cold", "claude-opus-4-5", at(0, time.Minute, 7*time.Minute), nil, 0, false,
			figures{Orig: 922.5, Sent: 685, OrigBlind: 520, SentBlind: 507.9, OrigBP: 922.5, SentBP: 685, Cold: 1, ColdEvents: 1,
				USD: [4]float64{4612.5, 3425, 2600, 2539.5}}},
		// Warm at 1-hour write prices. Breakpoint model: request 3's
		// sent reads A (100) and writes 90: 10 + 180. Money: original
		// reads 450, writes 380 at $10 (225 + 3800); sent reads 254,
		// writes 386 (127 + 3860).
		{"ttl 1h marker, 6 minutes: warm at 2x writes", "claude-opus-4-5", at(0, time.Minute, 7*time.Minute), hour, 0, false,
			figures{Orig: 805, Sent: 797.4, OrigBlind: 520, SentBlind: 507.9, OrigBP: 805, SentBP: 900,
				USD: [4]float64{4025, 3987, 2600, 2539.5}}},
		// Request 3 61 minutes later: 760 and 380. Money: reads 100,
		// writes 730 at $10 (50 + 7300); sent reads 100, writes 540.
		{"ttl 1h marker, 61 minutes: cold", "claude-opus-4-5", at(0, time.Minute, 62*time.Minute), hour, 0, false,
			figures{Orig: 1470, Sent: 1090, OrigBlind: 520, SentBlind: 507.9, OrigBP: 1470, SentBP: 1090, Cold: 1, ColdEvents: 1,
				USD: [4]float64{7350, 5450, 2600, 2539.5}}},
		{"fixed 10m, 6 minutes: warm", "claude-opus-4-5", at(0, time.Minute, 7*time.Minute), nil, 10 * time.Minute, false, anthWarm},
		// OpenAI in memory (5 minutes), request 3 cold: 100 + 260 + 380
		// = 740, sent 550. Money: reads 100, writes 730 (17.5 +
		// 1277.5); sent reads 100, writes 540 (17.5 + 945); blind reads
		// 450, writes 380 (78.75 + 665); sent 254, 386 (44.45 + 675.5).
		{"openai in memory, 6 minutes: cold", "gpt-5.2", at(0, time.Minute, 7*time.Minute), nil, 0, true,
			figures{Orig: 740, Sent: 550, OrigBlind: 425, SentBlind: 411.4, OrigBP: 740, SentBP: 550, Cold: 1, ColdEvents: 1,
				USD: [4]float64{1295, 962.5, 743.75, 719.95}}},
		{"openai 24h retention, 23 hours: warm", "gpt-5.2", at(0, time.Minute, 23*time.Hour), retain, 0, true,
			figures{Orig: 425, Sent: 411.4, OrigBlind: 425, SentBlind: 411.4, OrigBP: 425, SentBP: 411.4,
				USD: [4]float64{743.75, 719.95, 743.75, 719.95}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream, rw := fixture()
			for i := range stream {
				stream[i].Model, stream[i].Time = tc.model, tc.times[i]
				if tc.body != nil {
					stream[i].Body = tc.body(stream[i].Body)
				}
			}
			opt := Options{Expiry: expiry(tc.ttl)}
			if tc.openai {
				opt.Cache = OpenAICache(0.1)
			}
			st, err := Measure("fixture", stream, rw, opt)
			if err != nil {
				t.Fatal(err)
			}
			var sr SessionReport
			sr.fill(st, stream, nil, DefaultPrices(), map[string]bool{}, PriceTable{})
			s := sr.Summary
			got := figures{Orig: s.OrigCost, Sent: s.SentCost, OrigBlind: s.OrigBlindCost, SentBlind: s.SentBlindCost,
				OrigBP: s.OrigBPCost, SentBP: s.SentBPCost, Cold: s.Cold, ColdEvents: s.ColdEvents,
				USD: [4]float64{s.OrigUSD * 1e6, s.SentUSD * 1e6, s.OrigBlindUSD * 1e6, s.SentBlindUSD * 1e6}}
			if d := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-6)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			if s.CostRatio != s.SentCost/s.OrigCost || s.BlindCostRatio != s.SentBlindCost/s.OrigBlindCost {
				t.Errorf("ratios %v %v", s.CostRatio, s.BlindCostRatio)
			}
		})
	}
}

// TestParseCacheTTL checks replay's --cache-ttl values both ways.
func TestParseCacheTTL(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
		back string
	}{
		{"", 0, false, "provider"},
		{"provider", 0, false, "provider"},
		{"never", NeverExpires, false, "never"},
		{"5m", 5 * time.Minute, false, "5m0s"},
		{"1h", time.Hour, false, "1h0m0s"},
		{"0s", 0, true, ""},
		{"-5m", 0, true, ""},
		{"soon", 0, true, ""},
	} {
		got, err := ParseCacheTTL(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseCacheTTL(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
		if !tc.bad && FormatCacheTTL(got) != tc.back {
			t.Errorf("FormatCacheTTL(%v) = %q, want %q", got, FormatCacheTTL(got), tc.back)
		}
	}
}
