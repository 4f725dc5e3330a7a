package clearing

// The properties of property_test.go over the conversations of every
// protocol: the same generated sessions (tools/sessiongen) rendered as
// Anthropic Messages, OpenAI Responses, OpenAI Chat Completions and
// Gemini requests (transcript.BuildOptions.Protocol), parsed by the
// protocol's adapter, rewritten by the pipeline and the clearing pass
// (trimming included), and each checked by its protocol's validator:
// validate.Rewrite, responses.ValidateRewrite (every output keeps its
// call, a kept reasoning item keeps its successor), chat.ValidateRewrite
// (every tool message answers a tool_call_id of the assistant message
// before it), gemini.ValidateRewrite (every functionResponse answers a
// functionCall of the content before it, a kept part keeps its
// thoughtSignature). Per request: reproducibility from an empty store (1),
// validity (2), at most 4 markers (3), thinking (4: reasoning items and
// reasoning_content), stubs naming blobs that hold the original (5), the
// plan's events and the edit-event note (6); between consecutive
// requests, on the parsed conversations: stickiness, byte for byte up to
// the message the client re-sent differently, unless the plan has an
// event (7), and monotonicity: the plan replays, a cleared result or
// input keeps its stub, a dropped round stays dropped (8).
//
// CTXGUARD_PROPERTY_LONG=1 runs many more sessions (200 per protocol and
// configuration), and long full-profile sessions under the shipped
// defaults.

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/ctxguard/ctxguard/anthropic"
	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/gemini"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/openai/chat"
	"github.com/ctxguard/ctxguard/openai/responses"
	"github.com/ctxguard/ctxguard/protocol"
	"github.com/ctxguard/ctxguard/tools/sessiongen"
	"github.com/ctxguard/ctxguard/tools/transcript"
	"github.com/ctxguard/ctxguard/tools/validate"
)

// wire is one protocol the properties are checked in: its adapter and
// its validator.
type wire struct {
	name  string // transcript.BuildOptions.Protocol
	proto protocol.Protocol
	valid func(pc propConfig, orig, sent []byte) error
}

var anthropicWire = wire{transcript.ProtoAnthropic, anthropic.Protocol, func(pc propConfig, orig, sent []byte) error {
	return validate.Rewrite(orig, sent, pc.validateOptions())
}}

// wires are the protocols, in the order the tests run them.
var wires = []wire{
	anthropicWire,
	{transcript.ProtoResponses, responses.Protocol, func(_ propConfig, orig, sent []byte) error { return responses.ValidateRewrite(orig, sent) }},
	{transcript.ProtoChat, chat.Protocol, func(_ propConfig, orig, sent []byte) error { return chat.ValidateRewrite(orig, sent) }},
	{transcript.ProtoGemini, gemini.Protocol, func(_ propConfig, orig, sent []byte) error { return gemini.ValidateRewrite(orig, sent) }},
}

// inputJSON is a tool call's input as JSON: the input itself, or the
// string an encoded input (OpenAI's "arguments") holds.
func inputJSON(c *conversation.Conversation, b *conversation.Block) []byte {
	if !b.InputEncoded {
		return c.Bytes(b.Input)
	}
	in, err := jsonscan.AppendUnquote(nil, c.Bytes(b.Input))
	if err != nil {
		return nil
	}
	return in
}

// clientExtends reports whether the client's request cur is its request
// prev plus appended turns: by the prompt cache's segments where the
// protocol has them (Anthropic), else on the parsed conversations: every
// message of prev but the last byte-identical in cur (the client may
// re-encode its last message), and no fewer messages.
func clientExtends(prev, cur *requested) bool {
	if prev.origSegs != nil && cur.origSegs != nil {
		return segmentsExtend(prev.origSegs, cur.origSegs)
	}
	po, co := prev.origC.Messages, cur.origC.Messages
	if len(co) < len(po) {
		return false
	}
	for i := 0; i < len(po)-1; i++ {
		if string(prev.origC.Bytes(po[i].Span)) != string(cur.origC.Bytes(co[i].Span)) {
			return false
		}
	}
	return true
}

// wireSessions is how many generated sessions each protocol is checked
// on, per configuration.
func wireSessions() int {
	if longRun() {
		return 200
	}
	return 6
}

// generatedIn returns the request stream of a generated session written
// in protocol w.
func generatedIn(t testing.TB, w wire, seed uint64, opt sessiongen.Options) []streamReq {
	t.Helper()
	opt.Protocol = w.name
	return generated(t, rand.New(rand.NewPCG(seed, 5)), opt)
}

// TestPropertiesProtocols checks every property on the same generated
// sessions in every protocol, under the configurations of
// propConfigs and trimConfig.
func TestPropertiesProtocols(t *testing.T) {
	t.Parallel()
	pcs := append(propConfigs()[1:5], trimConfig())
	readsFrom := len(pcs) // the read rule's configurations follow
	pcs = append(pcs, readsConfigs()...)
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			var total, reads propStats
			for i, pc := range pcs {
				for seed := range uint64(wireSessions()) {
					reqs := generatedIn(t, w, seed, sessiongen.Options{MaxResult: 30_000})
					st := checkWireStream(t, w, pc, fmt.Sprintf("%s seed %d", w.name, seed), reqs)
					total.add(st)
					if i >= readsFrom {
						reads.add(st)
					}
					if t.Failed() {
						return
					}
				}
			}
			// The read rule's cases: reads kept past the boundary, and
			// later cleared.
			if reads.keptReads == 0 || reads.releasedReads == 0 {
				t.Errorf("%s: %d reads kept, %d released under %d read configurations: the rule is not tested", w.name, reads.keptReads, reads.releasedReads, len(readsConfigs()))
			}
			if longRun() {
				// The shipped defaults on long sessions with Claude
				// Code's full-size profile, where they fire events.
				for seed := range uint64(10) {
					opt := sessiongen.Options{Turns: 90 + int(seed%3)*30, MaxResult: 60_000, FullProfile: true}
					reqs := generatedIn(t, w, seed, opt)
					total.add(checkWireStream(t, w, propConfigs()[seed%2*5], fmt.Sprintf("%s long seed %d", w.name, seed), reqs))
					if t.Failed() {
						return
					}
				}
			}
			t.Logf("%s: %v", w.name, total)
			if total.events == 0 || total.compared == 0 {
				t.Errorf("%s: %d events, %d requests compared: the thresholds test nothing", w.name, total.events, total.compared)
			}
		})
	}
}

// checkFuzzProtocols is checkFuzzInput with the protocol drawn from data
// too (FuzzClearProtocols).
func checkFuzzProtocols(t *testing.T, data []byte) {
	r := rand.New(sessiongen.NewSource(data))
	w := wires[r.IntN(len(wires))]
	pc := fuzzConfig(r, true)
	opt := sessiongen.Options{Turns: 2 + r.IntN(30), MaxResult: 500 << r.IntN(7), TrailingImages: r.IntN(2) == 0, Protocol: w.name}
	reqs := generated(t, r, opt)
	checkWireStream(t, w, pc, fmt.Sprintf("fuzz %s %+v %+v", w.name, pc, opt), reqs)
}

// TestPropertiesProtocolsReal checks every property on the real Claude
// Code sessions in tools/transcript/testdata (and in $CTXGUARD_SESSIONS)
// written as Responses, Chat Completions and Gemini requests (TestPropertiesReal
// checks them as sent).
func TestPropertiesProtocolsReal(t *testing.T) {
	dirs := []string{"../../tools/transcript/testdata/claude-code"}
	if d := os.Getenv("CTXGUARD_SESSIONS"); d != "" {
		dirs = append(dirs, d)
	}
	for _, w := range wires[1:] {
		var total propStats
		for _, dir := range dirs {
			streams := realStreams(t, dir, w.name)
			for _, pc := range append(propConfigs(), trimConfig()) {
				for _, id := range slices.Sorted(maps.Keys(streams)) {
					total.add(checkWireStream(t, w, pc, w.name+" "+id, streams[id]))
					if t.Failed() {
						return
					}
				}
			}
		}
		t.Logf("%s: %v", w.name, total)
	}
}
