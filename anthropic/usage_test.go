package anthropic

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A stream shaped like the API's, with a thinking block, a tool call and
// a ping (the usage numbers differ between message_start and
// message_delta, as they do on the wire).
const realStream = "event: message_start\n" +
	`data: {"type":"message_start","message":{"model":"claude-opus-4-8","id":"msg_01","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"cache_creation_input_tokens":42203,"cache_read_input_tokens":1000,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":42203},"output_tokens":1,"service_tier":"standard"}}}` + "\n\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}` + "\n\n" +
	"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"usage: {\"input_tokens\":999}"}}` + "\n\n" +
	"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2ln"}}` + "\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: content_block_start\n" + `data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"Bash","input":{}}}` + "\n\n" +
	"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"ls\"}"}}` + "\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
	"event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":6,"cache_creation_input_tokens":42203,"cache_read_input_tokens":1000,"output_tokens":87},"context_management":{"applied_edits":[]}}` + "\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

type tapResult struct {
	U     Usage
	Found bool
}

func runTap(ct string, chunks [][]byte) tapResult {
	t := NewUsageTap(ct)
	for _, c := range chunks {
		if n, err := t.Write(c); n != len(c) || err != nil {
			panic("short write")
		}
	}
	u, ok := t.Usage()
	return tapResult{u, ok}
}

func whole(s string) [][]byte { return [][]byte{[]byte(s)} }

func bytewise(s string) [][]byte {
	out := make([][]byte, len(s))
	for i := range s {
		out[i] = []byte{s[i]}
	}
	return out
}

func randomSplit(s string, r *rand.Rand) [][]byte {
	var out [][]byte
	for len(s) > 0 {
		n := 1 + r.IntN(min(len(s), 40))
		out = append(out, []byte(s[:n]))
		s = s[n:]
	}
	return out
}

func TestUsageTapSSE(t *testing.T) {
	big := strings.Repeat("x", MaxTapLine+10)
	tests := []struct {
		name string
		in   string
		want tapResult
	}{
		{"real stream", realStream, tapResult{Usage{6, 42203, 1000, 87}, true}},
		{"CRLF", strings.ReplaceAll(realStream, "\n", "\r\n"), tapResult{Usage{6, 42203, 1000, 87}, true}},
		{"CR only", strings.ReplaceAll(realStream, "\n", "\r"), tapResult{Usage{6, 42203, 1000, 87}, true}},
		{"BOM", "\xef\xbb\xbf" + realStream, tapResult{Usage{6, 42203, 1000, 87}, true}},
		{"no event lines", "data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
			"data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n", tapResult{Usage{InputTokens: 3, OutputTokens: 9}, true}},
		{"data without space, split over lines", "event:message_start\ndata:{\"type\":\"message_start\",\ndata:\"message\":{\"usage\":{\"input_tokens\":4}}}\n\n",
			tapResult{Usage{InputTokens: 4}, true}},
		{"delta merges over start", "event: message_start\ndata: {\"message\":{\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":7,\"output_tokens\":1}}}\n\n" +
			"event: message_delta\ndata: {\"usage\":{\"output_tokens\":50,\"input_tokens\":null}}\n\n", tapResult{Usage{InputTokens: 10, CacheReadInputTokens: 7, OutputTokens: 50}, true}},
		{"comments and unknown fields", ": keepalive\nid: 7\nretry: 100\nevent: message_start\ndata: {\"message\":{\"usage\":{\"input_tokens\":2}}}\n\n", tapResult{Usage{InputTokens: 2}, true}},
		{"huge irrelevant line", "event: content_block_delta\ndata: " + big + "\n\n" + realStream, tapResult{Usage{6, 42203, 1000, 87}, true}},
		{"huge line without event name", "data: " + big + "\n\n" + realStream, tapResult{Usage{6, 42203, 1000, 87}, true}},
		{"oversized message_start is dropped", "event: message_start\ndata: {\"message\":{\"x\":\"" + big + "\",\"usage\":{\"input_tokens\":2}}}\n\n", tapResult{}},
		{"oversized first data line drops the event", "event: message_start\ndata: " + big + "\ndata: {\"message\":{\"usage\":{\"input_tokens\":2}}}\n\n", tapResult{}},
		{"incomplete event at EOF is dropped", "event: message_start\ndata: {\"message\":{\"usage\":{\"input_tokens\":2}}}\n", tapResult{}},
		{"error event", "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", tapResult{}},
		{"invalid JSON", "event: message_start\ndata: {\"message\":{\"usage\":{\"input_tokens\":2}}\n\n", tapResult{}},
		{"non-integer numbers ignored", "event: message_start\ndata: {\"message\":{\"usage\":{\"input_tokens\":2.5,\"output_tokens\":3}}}\n\n", tapResult{Usage{OutputTokens: 3}, true}},
		{"empty", "", tapResult{}},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for how, chunks := range map[string][][]byte{"whole": whole(tc.in), "bytewise": bytewise(tc.in), "random": randomSplit(tc.in, r)} {
				if diff := cmp.Diff(tc.want, runTap("text/event-stream; charset=utf-8", chunks)); diff != "" {
					t.Errorf("%s: (-want +got)\n%s", how, diff)
				}
			}
		})
	}
}

func TestUsageTapJSON(t *testing.T) {
	answer := `{"model":"claude-opus-4-8","id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"a \"usage\": {\"input_tokens\": 1} } ] \\"},{"type":"tool_use","id":"t","name":"x","input":{"usage":{"input_tokens":2}}}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":30,"output_tokens":6}}`
	tests := []struct {
		name string
		in   string
		want tapResult
	}{
		{"answer", answer, tapResult{Usage{12, 0, 30, 6}, true}},
		{"pretty", "  {\n  \"usage\" :  {\"input_tokens\" : 1 , \"output_tokens\":2}\n}\n", tapResult{Usage{InputTokens: 1, OutputTokens: 2}, true}},
		{"usage first", `{"usage":{"output_tokens":4},"content":[]}`, tapResult{Usage{OutputTokens: 4}, true}},
		{"escaped key", `{"us\u0061ge":{"output_tokens":4}}`, tapResult{Usage{OutputTokens: 4}, true}},
		{"nested only", `{"a":{"usage":{"output_tokens":4}}}`, tapResult{}},
		{"last wins", `{"usage":{"output_tokens":4},"usage":{"input_tokens":1}}`, tapResult{Usage{InputTokens: 1}, true}},
		{"later non-object", `{"usage":{"output_tokens":4},"usage":null}`, tapResult{}},
		{"error body", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`, tapResult{}},
		{"array", `[{"usage":{"output_tokens":4}}]`, tapResult{}},
		{"truncated", `{"usage":{"output_tokens":4}`, tapResult{}},
		{"key with backslashes", `{"a\\":"\\","usage":{"output_tokens":5}}`, tapResult{Usage{OutputTokens: 5}, true}},
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for how, chunks := range map[string][][]byte{"whole": whole(tc.in), "bytewise": bytewise(tc.in), "random": randomSplit(tc.in, r)} {
				if diff := cmp.Diff(tc.want, runTap("application/json", chunks)); diff != "" {
					t.Errorf("%s: (-want +got)\n%s", how, diff)
				}
			}
			if json.Valid([]byte(tc.in)) {
				if diff := cmp.Diff(oracleJSON([]byte(tc.in)), runTap("application/json", whole(tc.in))); diff != "" {
					t.Errorf("disagrees with encoding/json: (-oracle +tap)\n%s", diff)
				}
			}
		})
	}
}

func TestUsageTapOtherTypes(t *testing.T) {
	for _, ct := range []string{"", "text/plain", "application/octet-stream", "garbage;;"} {
		if got := runTap(ct, whole(realStream)); got.Found {
			t.Errorf("%q: found usage in a non-JSON, non-SSE body", ct)
		}
	}
	tap := NewUsageTap("text/event-stream")
	tap.Write([]byte(realStream))
	tap.Reset("application/json")
	tap.Write([]byte(`{"usage":{"output_tokens":1}}`))
	if u, ok := tap.Usage(); !ok || u != (Usage{OutputTokens: 1}) {
		t.Errorf("after Reset: %+v %v", u, ok)
	}
}

func TestPromptTokens(t *testing.T) {
	if got := (Usage{1, 2, 3, 4}).PromptTokens(); got != 6 {
		t.Errorf("PromptTokens = %d", got)
	}
}

// oracleJSON computes what the tap should report for a valid JSON body,
// with encoding/json's tokenizer: the last top-level "usage" member wins;
// inside it, each known field takes the last integer value it is given.
func oracleJSON(b []byte) tapResult {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return tapResult{}
	}
	var res tapResult
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return tapResult{}
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return tapResult{}
		}
		if kt.(string) != "usage" {
			continue
		}
		res = tapResult{}
		ud := json.NewDecoder(bytes.NewReader(raw))
		ud.UseNumber()
		if t, err := ud.Token(); err != nil || t != json.Delim('{') {
			continue
		}
		res.Found = true
		for ud.More() {
			k, _ := ud.Token()
			var v json.RawMessage
			if err := ud.Decode(&v); err != nil {
				return tapResult{}
			}
			n, err := strconv.Atoi(string(v))
			if err != nil {
				continue
			}
			switch k.(string) {
			case "input_tokens":
				res.U.InputTokens = n
			case "cache_creation_input_tokens":
				res.U.CacheCreationInputTokens = n
			case "cache_read_input_tokens":
				res.U.CacheReadInputTokens = n
			case "output_tokens":
				res.U.OutputTokens = n
			}
		}
	}
	if _, err := dec.Token(); err != nil && err != io.EOF {
		return tapResult{}
	}
	return res
}

// splits cuts in at the positions the fuzzer's seed picks.
func splits(in []byte, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out [][]byte
	for len(in) > 0 {
		n := 1 + r.IntN(len(in))
		if r.IntN(3) == 0 {
			n = 1
		}
		out = append(out, in[:n])
		in = in[n:]
	}
	return out
}

func FuzzUsageTapSSE(f *testing.F) {
	f.Add([]byte(realStream), uint64(1))
	f.Add([]byte(strings.ReplaceAll(realStream, "\n", "\r\n")), uint64(2))
	f.Add([]byte("\xef\xbb\xbfdata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\r\r"), uint64(3))
	f.Add([]byte("event: message_start\ndata:{\"message\":{\"usage\":{\"input_tokens\":1}}}\n\nevent: ping\ndata: x\n\n"), uint64(4))
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		want := runTap("text/event-stream", [][]byte{in})
		if got := runTap("text/event-stream", splits(in, seed)); got != want {
			t.Fatalf("split result %+v, whole %+v", got, want)
		}
	})
}

func FuzzUsageTapJSON(f *testing.F) {
	f.Add([]byte(`{"id":"m","content":[{"type":"text","text":"{\"usage\":1}"}],"usage":{"input_tokens":12,"output_tokens":6}}`), uint64(1))
	f.Add([]byte(`{"us\u0061ge":{"output_tokens":4},"usage":{"input_tokens":null}}`), uint64(2))
	f.Add([]byte(` {"a":[{"b":"\\\""}],"usage" : { "output_tokens" : 7 } } `), uint64(3))
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		want := runTap("application/json", [][]byte{in})
		if got := runTap("application/json", splits(in, seed)); got != want {
			t.Fatalf("split result %+v, whole %+v", got, want)
		}
		if json.Valid(in) && len(in) < 1<<14 {
			if o := oracleJSON(in); o != want {
				t.Fatalf("tap %+v, encoding/json %+v", want, o)
			}
		}
	})
}
