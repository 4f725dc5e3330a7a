package responses

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/internal/uncompact"
)

// Validate checks a Responses request body against the API's rules that a
// rewrite could break. It is for tests and diagnostics, not the hot path.
//
//   - the body is one JSON object whose "input" is a string or an array of
//     objects;
//   - a message item has a known role and a string or array content; its
//     text parts are input_text (user, developer, system) or output_text
//     and refusal (assistant), each with a string text;
//   - function_call and custom_tool_call items have a string call_id and
//     name, and a string arguments (function_call) or input (custom);
//   - every function_call_output, custom_tool_call_output and
//     local_shell_call_output answers a call of its kind earlier in the
//     input, and has a string or array output; every call is answered
//     later in the input (the API rejects a call without its output);
//   - every reasoning item is followed by an item the model produced (the
//     API rejects a reasoning item without its successor);
//   - a compaction item has a string encrypted_content.
//
// With a previous_response_id or an item_reference the calls may be in
// the server's store, so outputs are not checked against calls.
func Validate(body []byte) error {
	var ps problems
	validate(body, &ps)
	return ps.err()
}

// problems collects what a check finds.
type problems []error

func (ps *problems) add(format string, a ...any) { *ps = append(*ps, fmt.Errorf(format, a...)) }

func (ps problems) err() error {
	if len(ps) > 8 {
		ps = append(ps[:8:8], fmt.Errorf("and %d more", len(ps)-8))
	}
	return errors.Join(ps...)
}

// request is what validate finds of a body.
type request struct {
	b     []byte
	root  span
	input span // the input value
	items []span
}

func validate(body []byte, ps *problems) *request {
	root, err := jsonscan.Root(body)
	if err != nil {
		ps.add("body: %v", err)
		return nil
	}
	if jsonscan.KindOf(body, root) != jsonscan.Object {
		ps.add("body is not an object")
		return nil
	}
	r := &request{b: body, root: root}
	continued := false
	it := jsonscan.Members(body, root)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		switch {
		case jsonscan.KeyIs(body, k, "input"):
			r.input = v
		case jsonscan.KeyIs(body, k, "previous_response_id"):
			continued = jsonscan.KindOf(body, v) != jsonscan.Null
		}
	}
	switch jsonscan.KindOf(body, r.input) {
	case jsonscan.String:
		return r
	case jsonscan.Array:
	default:
		ps.add("input is neither a string nor an array")
		return nil
	}
	el := jsonscan.Elements(body, r.input)
	for v, ok := el.NextElement(); ok; v, ok = el.NextElement() {
		r.items = append(r.items, v)
	}
	type call struct {
		kind     string
		answered bool
		at       int
	}
	calls := map[string]*call{}
	for _, s := range r.items {
		if isType(body, s, "item_reference") {
			continued = true // the calls may be among the stored items it names
		}
	}
	for i, s := range r.items {
		if jsonscan.KindOf(body, s) != jsonscan.Object {
			ps.add("input.%d is not an object", i)
			continue
		}
		f := itemFields(body, s)
		typ := string(jsonscan.Text(body, f.typ))
		if f.typ.IsZero() && !f.role.IsZero() {
			typ = "message"
		}
		str := func(x span) bool { return jsonscan.KindOf(body, x) == jsonscan.String }
		switch typ {
		case "message":
			checkMessage(body, i, f, ps)
		case "function_call", "custom_tool_call", "local_shell_call":
			id := f.callID
			if !str(id) {
				ps.add("input.%d: %s without a string call_id", i, typ)
				continue
			}
			switch {
			case typ == "function_call" && (!str(f.name) || !str(f.args)):
				ps.add("input.%d: function_call without a string name and arguments", i)
			case typ == "custom_tool_call" && (!str(f.name) || !str(f.input)):
				ps.add("input.%d: custom_tool_call without a string name and input", i)
			}
			calls[string(jsonscan.Text(body, id))] = &call{kind: typ, at: i}
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
			id := f.callID
			if typ == "local_shell_call_output" && id.IsZero() {
				id = f.id
			}
			if !str(id) {
				ps.add("input.%d: %s without a string call_id", i, typ)
				continue
			}
			if k := jsonscan.KindOf(body, f.output); k != jsonscan.String && k != jsonscan.Array {
				ps.add("input.%d: %s without a string or array output", i, typ)
			}
			c := calls[string(jsonscan.Text(body, id))]
			switch {
			case c == nil && !continued:
				ps.add("input.%d: %s %s answers no earlier call", i, typ, id.Bytes(body))
			case c != nil && c.kind+"_output" != typ:
				ps.add("input.%d: %s answers a %s", i, typ, c.kind)
			case c != nil:
				c.answered = true
			}
		case "reasoning":
			if i+1 >= len(r.items) || !produced(body, r.items[i+1]) {
				ps.add("input.%d: reasoning item without its successor", i)
			}
		case "compaction":
			if !str(f.encrypted) {
				ps.add("input.%d: compaction without a string encrypted_content", i)
			}
		}
	}
	for id, c := range calls {
		if !c.answered {
			ps.add("input.%d: %s %q has no output", c.at, c.kind, id)
		}
	}
	return r
}

// vfields are the members of an item the validator reads.
type vfields struct {
	fields
	encrypted span
}

func itemFields(b []byte, s span) vfields {
	var f vfields
	it := jsonscan.Members(b, s)
	for k, v, ok := it.NextMember(); ok; k, v, ok = it.NextMember() {
		var dst *span
		switch string(jsonscan.Text(b, k)) {
		case "type":
			dst = &f.typ
		case "role":
			dst = &f.role
		case "call_id":
			dst = &f.callID
		case "id":
			dst = &f.id
		case "name":
			dst = &f.name
		case "arguments":
			dst = &f.args
		case "input":
			dst = &f.input
		case "content":
			dst = &f.content
		case "output":
			dst = &f.output
		case "encrypted_content":
			dst = &f.encrypted
		default:
			continue
		}
		*dst = v
	}
	return f
}

// produced reports whether the item at s is one the model produces (what
// may follow a reasoning item): an assistant message or a call.
func produced(b []byte, s span) bool {
	if jsonscan.KindOf(b, s) != jsonscan.Object {
		return false
	}
	f := itemFields(b, s)
	t := jsonscan.Text(b, f.typ)
	if f.typ.IsZero() || string(t) == "message" {
		return jsonscan.StringIs(b, f.role, "assistant")
	}
	k := classify(t)
	return k == itemReasoning || k == itemFunctionCall || k == itemCustomCall || k == itemShellCall || k == itemCallOther
}

// checkMessage checks a message item's role and content parts.
func checkMessage(b []byte, i int, f vfields, ps *problems) {
	role := string(jsonscan.Text(b, f.role))
	switch role {
	case "user", "assistant", "system", "developer":
	default:
		ps.add("input.%d: message with role %q", i, role)
		return
	}
	switch jsonscan.KindOf(b, f.content) {
	case jsonscan.String:
		return
	case jsonscan.Array:
	default:
		ps.add("input.%d: message content is neither a string nor an array", i)
		return
	}
	el := jsonscan.Elements(b, f.content)
	j := 0
	for v, ok := el.NextElement(); ok; v, ok = el.NextElement() {
		if jsonscan.KindOf(b, v) != jsonscan.Object {
			ps.add("input.%d.content.%d is not an object", i, j)
			continue
		}
		t, _ := jsonscan.Lookup(b, v, "type")
		typ := string(jsonscan.Text(b, t))
		text := role == "assistant" && (typ == typeOutputText || typ == "refusal") ||
			role != "assistant" && typ == typeInputText
		if typ == typeInputText || typ == typeOutputText || typ == "refusal" {
			if !text {
				ps.add("input.%d.content.%d: %s in a %s message", i, j, typ, role)
			}
			key := "text"
			if typ == "refusal" {
				key = "refusal"
			}
			if x, err := jsonscan.Lookup(b, v, key); err != nil || jsonscan.KindOf(b, x) != jsonscan.String {
				ps.add("input.%d.content.%d: %s without a string %s", i, j, typ, key)
			}
		}
		j++
	}
}

// ValidateRewrite checks that sent is a rewrite of orig that ctxguard may
// make: sent is valid (Validate) if orig is; every member of the body but
// "input" is byte-identical; and the input items are orig's, in order,
// where only these changes are allowed:
//
//   - a tool output item's "output", a function_call's "arguments" and a
//     custom_tool_call's "input" may change (everything else in the item
//     stays byte-identical);
//   - calls, their outputs and reasoning items may be dropped (Validate
//     then checks that no call or output is left without the other), but
//     a reasoning item that is kept keeps the item it preceded, right
//     after it;
//   - message items holding only text parts may be added (the notes and
//     placeholders of dropped rounds).
//
// Every other item (messages, compaction, reasoning that is kept, unknown
// types) is byte-identical when kept, and messages and compaction items
// are never dropped.
func ValidateRewrite(orig, sent []byte) error {
	orig, err := uncompact.Bodies(Parse, orig, sent)
	if err != nil {
		return err
	}
	var ps problems
	var po problems
	o := validate(orig, &po)
	s := validate(sent, &ps)
	if len(po) > 0 && len(ps) > 0 {
		ps = nil // sent need be no better than orig; the rest still holds
	}
	if o == nil || s == nil {
		if o == nil && s != nil {
			ps.add("orig is not a request")
		}
		return ps.err()
	}
	if !bytes.Equal(orig[:o.input.Start], sent[:s.input.Start]) || !bytes.Equal(orig[o.input.End:], sent[s.input.End:]) {
		ps.add("members other than input changed")
	}
	if jsonscan.KindOf(orig, o.input) == jsonscan.String || jsonscan.KindOf(sent, s.input) == jsonscan.String {
		if !bytes.Equal(o.input.Bytes(orig), s.input.Bytes(sent)) {
			ps.add("a string input changed")
		}
		return ps.err()
	}
	// at[k] is where original item k is in the rewrite, or -1.
	at := make([]int, len(o.items))
	for k := range at {
		at[k] = -1
	}
	j := 0
	for i, si := range s.items {
		k := j
		for k < len(o.items) && !sameItem(orig, o.items[k], sent, si) {
			k++
		}
		if k == len(o.items) {
			if !addedNote(sent, si) {
				ps.add("input.%d of the rewrite is neither an item of the original nor a note", i)
			}
			continue
		}
		for ; j < k; j++ {
			if !droppable(orig, o.items[j]) {
				ps.add("original input.%d was dropped", j)
			}
		}
		at[k] = i
		j = k + 1
	}
	for ; j < len(o.items); j++ {
		if !droppable(orig, o.items[j]) {
			ps.add("original input.%d was dropped", j)
		}
	}
	// A kept reasoning item keeps the item it preceded, right after it.
	for k, i := range at {
		if i < 0 || k+1 >= len(o.items) || !isType(orig, o.items[k], "reasoning") {
			continue
		}
		if at[k+1] != i+1 {
			ps.add("original input.%d, a reasoning item, is kept without its successor", k)
		}
	}
	return ps.err()
}

// editable names the member of an item of type typ a rewrite may change.
func editable(typ []byte) string {
	switch string(typ) {
	case "function_call":
		return "arguments"
	case "custom_tool_call":
		return "input"
	case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
		return "output"
	}
	return ""
}

// sameItem reports whether the rewrite's item y is the original item x,
// as it is or with its editable member changed.
func sameItem(ob []byte, x span, rb []byte, y span) bool {
	if bytes.Equal(x.Bytes(ob), y.Bytes(rb)) {
		return true
	}
	if jsonscan.KindOf(ob, x) != jsonscan.Object || jsonscan.KindOf(rb, y) != jsonscan.Object {
		return false
	}
	t, _ := jsonscan.Lookup(ob, x, "type")
	ed := editable(jsonscan.Text(ob, t))
	if ed == "" {
		return false
	}
	xi, yi := jsonscan.Members(ob, x), jsonscan.Members(rb, y)
	for {
		xk, xv, xok := xi.NextMember()
		yk, yv, yok := yi.NextMember()
		if xok != yok {
			return false
		}
		if !xok {
			return xi.Err() == nil && yi.Err() == nil
		}
		if !bytes.Equal(xk.Bytes(ob), yk.Bytes(rb)) {
			return false
		}
		if jsonscan.KeyIs(ob, xk, ed) {
			k := jsonscan.KindOf(rb, yv)
			if k != jsonscan.String && (ed != "output" || k != jsonscan.Array) {
				return false
			}
			continue
		}
		if !bytes.Equal(xv.Bytes(ob), yv.Bytes(rb)) {
			return false
		}
	}
}

// droppable reports whether a rewrite may drop the item: calls, their
// outputs and reasoning.
func droppable(b []byte, s span) bool {
	if jsonscan.KindOf(b, s) != jsonscan.Object {
		return false
	}
	t, _ := jsonscan.Lookup(b, s, "type")
	switch classify(jsonscan.Text(b, t)) {
	case itemReasoning, itemFunctionCall, itemCustomCall, itemShellCall,
		itemFunctionOut, itemCustomOut, itemShellOut:
		return true
	}
	return false
}

// addedNote reports whether an item is one a rewrite may add: a message
// item of only text parts.
func addedNote(b []byte, s span) bool {
	if jsonscan.KindOf(b, s) != jsonscan.Object {
		return false
	}
	f := itemFields(b, s)
	if !jsonscan.StringIs(b, f.typ, "message") || jsonscan.KindOf(b, f.content) != jsonscan.Array {
		return false
	}
	el := jsonscan.Elements(b, f.content)
	n := 0
	for v, ok := el.NextElement(); ok; v, ok = el.NextElement() {
		t, _ := jsonscan.Lookup(b, v, "type")
		if !jsonscan.StringIs(b, t, typeInputText) && !jsonscan.StringIs(b, t, typeOutputText) {
			return false
		}
		n++
	}
	return n > 0 && el.Err() == nil
}

// isType reports whether the item at s has the given type.
func isType(b []byte, s span, typ string) bool {
	if jsonscan.KindOf(b, s) != jsonscan.Object {
		return false
	}
	t, _ := jsonscan.Lookup(b, s, "type")
	return jsonscan.StringIs(b, t, typ)
}
