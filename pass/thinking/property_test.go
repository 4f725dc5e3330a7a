package thinking_test

// Properties of the guard over generated sessions (tools/sessiongen)
// written in every protocol, with the request's model family switching at
// random between requests. On Gemini, a signed part that is not a
// thought is unsigned in every model content, not removed. The Guard's way of filling the cache is
// simulated: the assistant messages a request adds after the previous one
// were minted by the previous request's family. Per request, with the
// guard alone: the output is valid for its protocol; every message is
// byte-identical except the history's assistant messages, which keep
// exactly their blocks that are unsigned, unknown or of the request's
// family (a message left with none becomes one note); between two
// requests of one family, the output up to the earlier request's latest
// assistant message is repeated byte for byte (sticky). With the guard
// and the clearing pass (both removing thinking, in Compile's order):
// the pipeline never fails and the output is valid.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/gemini"
	"github.com/ctxguard/ctxguard/internal/stub"
	"github.com/ctxguard/ctxguard/model"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/pass/clearing"
	"github.com/ctxguard/ctxguard/pass/thinking"
	"github.com/ctxguard/ctxguard/pipeline"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/store"
	"github.com/ctxguard/ctxguard/tools/sessiongen"
	"github.com/ctxguard/ctxguard/tools/transcript"
	"github.com/ctxguard/ctxguard/tools/validate"
)

type wire struct {
	name  string
	proto protocol.Protocol
	valid func(orig, sent []byte) error
	// gemini: the guard unsigns a part that stands without its token
	// (conversation.Unsigner) in every model content, the latest
	// included, rather than removing it; the written sessions carry one
	// synthetic signature, made unique per part here (uniqueSignatures).
	gemini bool
}

var wires = []wire{
	{name: transcript.ProtoAnthropic, proto: anthropic.Protocol, valid: func(orig, sent []byte) error {
		o := validateOpts
		o.AllowInputEdits, o.AllowCacheMarkers, o.AllowMessageRemoval, o.AllowRoundTrimming = true, true, true, true
		return validate.Rewrite(orig, sent, o)
	}},
	{name: transcript.ProtoResponses, proto: responses.Protocol, valid: responses.ValidateRewrite},
	{name: transcript.ProtoChat, proto: chat.Protocol, valid: chat.ValidateRewrite},
	{name: transcript.ProtoGemini, proto: gemini.Protocol, valid: gemini.ValidateRewrite, gemini: true},
}

// uniqueSignatures gives each thoughtSignature of a Gemini body its own
// value, by its place: the nth signature of a session's requests is the
// same part in each (contents only grow), as a model's real signatures
// are its own.
func uniqueSignatures(body []byte) []byte {
	lit := []byte(`"thoughtSignature":"` + transcript.SyntheticThoughtSignature + `"`)
	var out []byte
	for n := 0; ; n++ {
		i := bytes.Index(body, lit)
		if i < 0 {
			return append(out, body...)
		}
		out = append(out, body[:i]...)
		out = fmt.Appendf(out, `"thoughtSignature":"c2lnLSVk-%d"`, n)
		body = body[i+len(lit):]
	}
}

// unsigned is part b of c (a signed part that is not a thought) as the
// guard sends it to a model of family fam: its signature the API's skip
// value on a Gemini model, else without the member.
func unsigned(c *conversation.Conversation, b *conversation.Block, fam string) []byte {
	part, sig := c.Bytes(b.Span), c.Bytes(b.Signature)
	if fam == "google" {
		return bytes.Replace(part, sig, []byte(gemini.SkipSignature), 1)
	}
	return bytes.Replace(part, append([]byte(`,"thoughtSignature":`), sig...), nil, 1)
}

// models names one model of each family the sessions switch between.
var models = map[string]string{"anthropic": "claude-sonnet-4-5", "openai": "gpt-5", "google": "gemini-2.5-pro"}

func TestPropertiesProtocols(t *testing.T) {
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			var st stats
			for seed := range uint64(12) {
				checkSession(t, w, rand.New(rand.NewPCG(seed, 41)), &st)
				if t.Failed() {
					return
				}
			}
			t.Logf("%+v", st)
			if w.name != transcript.ProtoChat && (st.removed == 0 || st.kept == 0 || st.sticky == 0) {
				t.Errorf("the sessions test nothing: %+v", st)
			}
		})
	}
}

// FuzzGuard drives the session, the protocol and the family switches from
// the fuzz input. Run it with
//
//	go test ./pass/thinking/ -run '^$' -fuzz FuzzGuard -fuzztime 2m
func FuzzGuard(f *testing.F) {
	for _, seed := range []string{"", "\x00", "ctxguard", "\xff\xff\xff\xff\xff\xff\xff\xff"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := rand.New(sessiongen.NewSource(data))
		checkSession(t, wires[r.IntN(len(wires))], r, &stats{})
	})
}

type stats struct{ requests, removed, kept, notes, sticky int }

func checkSession(t *testing.T, w wire, r *rand.Rand, st *stats) {
	s, err := sessiongen.Generate(r, sessiongen.Options{Protocol: w.name, Turns: 3 + r.IntN(20), MaxResult: 4000})
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := s.Requests()
	if err != nil {
		t.Fatal(err)
	}
	sigs := thinking.NewSignatures(thinking.Defaults(), nil)
	guard, err := thinking.New(sigs)
	if err != nil {
		t.Fatal(err)
	}
	cc := clearing.Defaults()
	cc.Trigger, cc.KeepTokens, cc.ClearAtLeast, cc.Payback = model.Tokens(2000), model.Tokens(500), model.Tokens(500), 0
	cc.Trim.Enabled = r.IntN(2) == 0
	cl, err := clearing.New(cc, &store.Blobs{Store: store.NewMemory()})
	if err != nil {
		t.Fatal(err)
	}
	alone, both := pipeline.New(nil, guard), pipeline.New(nil, guard, cl)
	env := &pipeline.Env{Binding: r.IntN(2) == 0}

	minted := map[string]string{} // signature -> family, the test's own record
	var prev, prevOut *conversation.Conversation
	prevFam, fam := "", []string{"anthropic", "openai", "google"}[r.IntN(3)]
	for k, rq := range reqs {
		where := fmt.Sprintf("%s request %d", w.name, k)
		if w.gemini {
			rq.Body = uniqueSignatures(rq.Body)
		}
		c, err := w.proto.Parse(rq.Body)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if rq.Reset {
			prev = nil
		}
		if prev != nil { // the Guard's recording
			for mi := len(prev.Messages); mi < len(c.Messages); mi++ {
				for _, b := range c.Messages[mi].Blocks {
					if c.Messages[mi].Role == conversation.RoleAssistant && thinking.Signed(&b) {
						sigs.Record(prevFam, c.Bytes(b.Signature))
						minted[string(c.Bytes(b.Signature))] = prevFam
					}
				}
			}
		}
		if r.IntN(3) == 0 {
			fam = []string{"anthropic", "openai", "google"}[r.IntN(3)]
		}
		c.Model = models[fam]
		st.requests++

		res := alone.Run(&pipeline.Request{Ctx: context.Background(), Conv: c, Env: env})
		if res.Err != nil {
			t.Fatalf("%s: %v", where, res.Err)
		}
		if err := w.valid(rq.Body, res.Body); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		out, err := w.proto.Parse(bytes.Clone(res.Body))
		if err != nil {
			t.Fatalf("%s: the output does not parse: %v", where, err)
		}
		checkEdits(t, where, w, c, out, fam, minted, st)
		if prevOut != nil && !rq.Reset && fam == prevFam {
			// Sticky: the messages before the previous request's latest
			// answer went out the same, where the client sent them the
			// same.
			for mi := range prevOut.LastAssistant() {
				if mi >= len(c.Messages) || !bytes.Equal(prev.Bytes(prev.Messages[mi].Span), c.Bytes(c.Messages[mi].Span)) {
					break
				}
				if !bytes.Equal(prevOut.Bytes(prevOut.Messages[mi].Span), out.Bytes(out.Messages[mi].Span)) {
					t.Fatalf("%s: not sticky: message %d went out differently than in the previous request", where, mi)
				}
				st.sticky++
			}
		}

		res = both.Run(&pipeline.Request{Ctx: context.Background(), Conv: c, Env: env})
		if res.Err != nil {
			t.Fatalf("%s, with clear: %v", where, res.Err)
		}
		if err := w.valid(rq.Body, res.Body); err != nil {
			t.Fatalf("%s, with clear: %v", where, err)
		}
		prev, prevOut, prevFam = c, out, fam
	}
}

// checkEdits checks out, the guard's output for c as family fam, message
// by message against what the test recorded of who minted what.
func checkEdits(t *testing.T, where string, w wire, c, out *conversation.Conversation, fam string, minted map[string]string, st *stats) {
	t.Helper()
	if len(out.Messages) != len(c.Messages) {
		t.Fatalf("%s: %d messages, had %d", where, len(out.Messages), len(c.Messages))
	}
	last := c.LastAssistant()
	for mi := range c.Messages {
		m, om := &c.Messages[mi], &out.Messages[mi]
		if m.Role != conversation.RoleAssistant || (mi == last && !w.gemini) {
			if !bytes.Equal(c.Bytes(m.Span), out.Bytes(om.Span)) {
				t.Fatalf("%s: message %d (%s) changed", where, mi, m.Role)
			}
			continue
		}
		var want [][]byte
		for bi := range m.Blocks {
			b := &m.Blocks[bi]
			if thinking.Signed(b) {
				thought := b.Kind == conversation.Thinking || b.Kind == conversation.RedactedThinking
				switch f, ok := minted[string(c.Bytes(b.Signature))]; {
				case !ok || f == fam || (thought && mi == last):
					st.kept++
				case w.gemini && !thought:
					st.removed++
					want = append(want, unsigned(c, b, fam))
					continue
				default:
					st.removed++
					continue
				}
			}
			want = append(want, c.Bytes(b.Span))
		}
		var got [][]byte
		for _, b := range om.Blocks {
			got = append(got, out.Bytes(b.Span))
		}
		if len(want) == 0 {
			st.notes++
			if len(om.Blocks) != 1 || om.Blocks[0].Kind != conversation.Text || string(out.Bytes(om.Blocks[0].Text)) != stub.RemovedReasoning {
				t.Fatalf("%s: message %d, emptied, is %s", where, mi, out.Bytes(om.Span))
			}
			continue
		}
		if len(got) != len(want) {
			t.Fatalf("%s: message %d has %d blocks, want %d:\n%s", where, mi, len(got), len(want), out.Bytes(om.Span))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("%s: message %d block %d:\n got %s\nwant %s", where, mi, i, got[i], want[i])
			}
		}
	}
}
