package replay

import (
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/transcript"
)

// codexAnswer returns what request k of a Codex rollout produced, the
// output items the rollout recorded after its input, as the assistant
// message quote retention reads ({"role":"assistant","content":[...]}):
// an assistant message's output_text parts as text blocks, a reasoning
// item's summary texts as thinking blocks, and a call's input as a
// tool_use block's input (a function_call's arguments decoded from their
// string, a custom tool's free-form input such as apply_patch's patch as
// the string it is, a local_shell_call's action). nil when the request
// wrote nothing of those, or is Codex's own compaction request (its
// answer is a summary, not the agent at work).
func codexAnswer(cx *transcript.CodexSession, k int) []byte {
	if cx == nil || k < 0 || k >= len(cx.Turns) || cx.Turns[k].Compaction {
		return nil
	}
	t := cx.Turns[k]
	out := []byte(`{"role":"assistant","content":[`)
	n := 0
	add := func(typ, key string, val []byte) {
		if n > 0 {
			out = append(out, ',')
		}
		n++
		out = append(out, `{"type":"`+typ+`","`+key+`":`...)
		out = append(out, val...)
		out = append(out, '}')
	}
	for i := t.End; i < t.Out && i < len(cx.Items); i++ {
		it := cx.Items[i]
		raw := it.Raw
		root, err := jsonscan.Root(raw)
		if err != nil {
			continue
		}
		switch it.Type {
		case "message":
			if it.Role != "assistant" {
				continue
			}
			eachPart(raw, root, "content", func(p jsonscan.Span) {
				if s, err := jsonscan.Lookup(raw, p, "text"); err == nil && jsonscan.KindOf(raw, s) == jsonscan.String {
					add("text", "text", s.Bytes(raw))
				}
			})
		case "reasoning":
			eachPart(raw, root, "summary", func(p jsonscan.Span) {
				if s, err := jsonscan.Lookup(raw, p, "text"); err == nil && jsonscan.KindOf(raw, s) == jsonscan.String {
					add("thinking", "thinking", s.Bytes(raw))
				}
			})
		case "function_call":
			if a, err := jsonscan.Lookup(raw, root, "arguments"); err == nil {
				in := a.Bytes(raw)
				if jsonscan.KindOf(raw, a) == jsonscan.String {
					if dec, err := jsonscan.Unquote(in); err == nil && jsonscan.Valid([]byte(dec)) {
						in = []byte(dec)
					}
				}
				add("tool_use", "input", in)
			}
		case "custom_tool_call":
			if in, err := jsonscan.Lookup(raw, root, "input"); err == nil {
				add("tool_use", "input", in.Bytes(raw))
			}
		case "local_shell_call":
			if in, err := jsonscan.Lookup(raw, root, "action"); err == nil {
				add("tool_use", "input", in.Bytes(raw))
			}
		}
	}
	if n == 0 {
		return nil
	}
	return append(out, "]}"...)
}

// eachPart calls fn with each element of the array under key in the
// object at root.
func eachPart(raw []byte, root jsonscan.Span, key string, fn func(jsonscan.Span)) {
	arr, err := jsonscan.Lookup(raw, root, key)
	if err != nil || jsonscan.KindOf(raw, arr) != jsonscan.Array {
		return
	}
	it := jsonscan.Elements(raw, arr)
	for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
		fn(v)
	}
}
