package transcript

import (
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// ParseSWEAgent reads a SWE-agent trajectory held in data (see the package
// doc for the conversion). It fails only if data is not JSON or has no
// history array; history entries that are not objects are counted as
// malformed and skipped.
func ParseSWEAgent(data []byte, path string) (*Session, error) {
	root, err := jsonscan.Root(data)
	if err != nil {
		return nil, err
	}
	if jsonscan.KindOf(data, root) != jsonscan.Object {
		return nil, errNotTraj
	}
	hist, err := jsonscan.Lookup(data, root, "history")
	if err != nil || jsonscan.KindOf(data, hist) != jsonscan.Array {
		return nil, errNotTraj
	}
	id := baseName(path)
	s := &Session{ID: id, ClientSessionID: uuidFrom(id), Path: path, Format: SWEAgent}
	st := &s.Stats
	var system []string
	it := jsonscan.Elements(data, hist)
	idx := 0
	for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
		idx++
		st.Lines++
		if jsonscan.KindOf(data, v) != jsonscan.Object {
			st.Malformed++
			continue
		}
		raw := v.Bytes(data)
		role := str(raw, member(raw, "role"))
		content := member(raw, "content")
		var blocks []Block
		switch role {
		case "system":
			if t := plainText(raw, content); t != "" {
				system = append(system, t)
			}
			st.Ignored++
			continue
		case "user":
			blocks = textBlocks(raw, content, st)
		case "assistant":
			blocks = textBlocks(raw, content, st)
			blocks = append(blocks, toolCalls(raw, member(raw, "tool_calls"), idx, st)...)
			s.Messages = append(s.Messages, Message{Role: Assistant, Blocks: blocks, Line: idx})
			continue
		case "tool":
			blocks = toolResults(raw, content, st)
		default:
			st.Ignored++
			continue
		}
		if n := len(s.Messages); n > 0 && s.Messages[n-1].Role == User {
			s.Messages[n-1].Blocks = append(s.Messages[n-1].Blocks, blocks...)
			st.Merged++
			continue
		}
		s.Messages = append(s.Messages, Message{Role: User, Blocks: blocks, Line: idx})
	}
	s.System = strings.Join(system, "\n\n")
	normalize(s)
	return s, nil
}

// plainText decodes a string content, or joins the text parts of an array
// content with newlines.
func plainText(raw []byte, content span) string {
	switch jsonscan.KindOf(raw, content) {
	case jsonscan.String:
		return str(raw, content)
	case jsonscan.Array:
		var parts []string
		it := jsonscan.Elements(raw, content)
		for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
			if jsonscan.KindOf(raw, v) == jsonscan.Object {
				if t := member(v.Bytes(raw), "text"); !t.IsZero() {
					parts = append(parts, str(v.Bytes(raw), t))
				}
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// textBlocks makes text blocks from a string content or from the text
// parts of an array content, keeping the raw string bytes. Other parts
// are dropped and counted as ignored.
func textBlocks(raw []byte, content span, st *Stats) []Block {
	switch jsonscan.KindOf(raw, content) {
	case jsonscan.String:
		if content.Len() == 2 {
			return nil // "": nothing to send
		}
		return []Block{textBlock(content.Bytes(raw))}
	case jsonscan.Array:
		var out []Block
		it := jsonscan.Elements(raw, content)
		for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
			part := v.Bytes(raw)
			t := member(part, "text")
			if jsonscan.KindOf(raw, v) != jsonscan.Object || jsonscan.KindOf(part, t) != jsonscan.String {
				st.Ignored++
				continue
			}
			out = append(out, textBlock(t.Bytes(part)))
		}
		return out
	}
	return nil
}

// toolCalls converts OpenAI tool_calls into tool_use blocks.
func toolCalls(raw []byte, calls span, idx int, st *Stats) []Block {
	if jsonscan.KindOf(raw, calls) != jsonscan.Array {
		return nil
	}
	var out []Block
	it := jsonscan.Elements(raw, calls)
	j := 0
	for v, ok := it.NextElement(); ok; v, ok = it.NextElement() {
		j++
		c := v.Bytes(raw)
		if jsonscan.KindOf(raw, v) != jsonscan.Object {
			st.Ignored++
			continue
		}
		idSpan := member(c, "id")
		var idRaw []byte
		if jsonscan.KindOf(c, idSpan) == jsonscan.String && idSpan.Len() > 2 {
			idRaw = compact(idSpan.Bytes(c))
		} else {
			idRaw = quote(fmt.Sprintf("toolu_traj_%d_%d", idx, j))
		}
		fn := member(c, "function")
		var nameRaw, input []byte
		if jsonscan.KindOf(c, fn) == jsonscan.Object {
			f := fn.Bytes(c)
			if n := member(f, "name"); jsonscan.KindOf(f, n) == jsonscan.String {
				nameRaw = compact(n.Bytes(f))
			}
			input = toolInput(f, member(f, "arguments"), st)
		}
		if nameRaw == nil {
			nameRaw = quote("unknown")
		}
		if input == nil {
			input = []byte("{}")
		}
		b := []byte(`{"type":"tool_use","id":`)
		b = append(b, idRaw...)
		b = append(b, `,"name":`...)
		b = append(b, nameRaw...)
		b = append(b, `,"input":`...)
		b = append(b, input...)
		b = append(b, '}')
		id, _ := jsonscan.Unquote(idRaw)
		out = append(out, Block{Type: "tool_use", Raw: b, ID: id})
	}
	return out
}

// toolInput returns the input object for OpenAI function arguments: the
// JSON text of a string argument, or an object argument, compacted. Any
// other shape is wrapped as {"arguments": <value>} and counted.
func toolInput(f []byte, args span, st *Stats) []byte {
	switch jsonscan.KindOf(f, args) {
	case jsonscan.Object:
		return compact(args.Bytes(f))
	case jsonscan.String:
		text, err := jsonscan.Unquote(args.Bytes(f))
		if err == nil {
			tb := []byte(text)
			if r, err := jsonscan.Root(tb); err == nil && jsonscan.KindOf(tb, r) == jsonscan.Object {
				return compact(r.Bytes(tb))
			}
		}
	case jsonscan.Invalid:
		return nil
	}
	st.Repairs.BadInput++
	w := []byte(`{"arguments":`)
	w = append(w, compact(args.Bytes(f))...)
	return append(w, '}')
}

// toolResults converts a role "tool" message into tool_result blocks, one
// per id in tool_call_id / tool_call_ids. Without an id the observation
// becomes plain text.
func toolResults(raw []byte, content span, st *Stats) []Block {
	var ids [][]byte
	if v := member(raw, "tool_call_id"); jsonscan.KindOf(raw, v) == jsonscan.String {
		ids = append(ids, compact(v.Bytes(raw)))
	}
	if v := member(raw, "tool_call_ids"); jsonscan.KindOf(raw, v) == jsonscan.Array {
		it := jsonscan.Elements(raw, v)
		for e, ok := it.NextElement(); ok; e, ok = it.NextElement() {
			if jsonscan.KindOf(raw, e) == jsonscan.String {
				ids = append(ids, compact(e.Bytes(raw)))
			}
		}
	}
	if len(ids) == 0 {
		return textBlocks(raw, content, st)
	}
	var body []byte
	switch jsonscan.KindOf(raw, content) {
	case jsonscan.String:
		body = compact(content.Bytes(raw))
	default:
		body = []byte{'['}
		for i, b := range textBlocks(raw, content, st) {
			if i > 0 {
				body = append(body, ',')
			}
			body = append(body, b.Raw...)
		}
		body = append(body, ']')
	}
	var out []Block
	for i, idRaw := range ids {
		b := []byte(`{"type":"tool_result","tool_use_id":`)
		b = append(b, idRaw...)
		b = append(b, `,"content":`...)
		if i == 0 {
			b = append(b, body...)
		} else {
			b = jsonscan.AppendQuote(b, "(output shown with the first call of this step)")
		}
		b = append(b, '}')
		id, _ := jsonscan.Unquote(idRaw)
		out = append(out, Block{Type: "tool_result", Raw: b, ID: id})
	}
	return out
}

// uuidFrom derives a stable, UUID-shaped session id from a name.
func uuidFrom(name string) string {
	h := sha256.Sum256([]byte(name))
	return uuidShaped(h[:16], 4)
}

// uuidShaped formats 16 hash bytes as a UUID of the given version.
func uuidShaped(h []byte, version byte) string {
	h[6] = h[6]&0x0f | version<<4
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}
