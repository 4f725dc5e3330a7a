package gemini

import (
	"errors"
	"fmt"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/internal/uncompact"
)

// Validate checks a Gemini request against the API's rules on contents,
// function calls and thought signatures, as the API enforces them:
//
//   - every content has a role the API knows (user, model; the legacy
//     function) and at least one part;
//   - functionCall and thought parts are the model's, functionResponse
//     parts the user's;
//   - a content holding functionResponse parts comes right after a model
//     content with functionCall parts and answers each of its calls: each
//     response pairs with a call (by id, or by name and position), and no
//     call is left without one. A response repeated by id is allowed: the
//     Gemini CLI repeats the responses of a resumed session's history;
//   - a model content with calls that is not the last content is
//     answered by the content after it;
//   - when the request carries thought signatures at all (the client
//     talks to a model that mints them), every model content of the
//     current turn (after the last user content that is not function
//     responses) whose parts include a functionCall has a
//     thoughtSignature on its first functionCall, as Gemini 3 models
//     require.
//
// The error joins every problem found, or is the parse error.
func Validate(body []byte) error {
	c, err := Parse(body)
	if err != nil {
		return err
	}
	defer c.Release()
	return validate(c)
}

func validate(c *conversation.Conversation) error { return check(c, true) }

// check is validate, with the signature rule or without it (sigs).
func check(c *conversation.Conversation, sigs bool) error {
	var errs []error
	msgs := c.Messages
	signed := false
	for mi := range msgs {
		m := &msgs[mi]
		if m.Role == conversation.RoleOther {
			errs = append(errs, fmt.Errorf("content %d: a role the API does not know", mi))
		}
		if len(m.Blocks) == 0 {
			errs = append(errs, fmt.Errorf("content %d: no parts", mi))
		}
		for bi := range m.Blocks {
			b := &m.Blocks[bi]
			signed = signed || !b.Signature.IsZero()
			switch {
			case m.Role != conversation.RoleAssistant && (b.Type == "functionCall" || b.Kind == conversation.Thinking || b.Kind == conversation.RedactedThinking):
				errs = append(errs, fmt.Errorf("content %d: a %s part in a %s content", mi, b.Type, m.Role))
			case m.Role == conversation.RoleAssistant && b.Type == "functionResponse":
				errs = append(errs, fmt.Errorf("content %d: a functionResponse part in a model content", mi))
			case b.Type == "functionResponse" && b.Kind != conversation.ToolResult:
				errs = append(errs, fmt.Errorf("content %d: functionResponse %d without a name or a response object", mi, bi))
			case b.Type == "functionCall" && b.Kind != conversation.ToolCall:
				errs = append(errs, fmt.Errorf("content %d: functionCall %d without a name or with args that are not an object", mi, bi))
			}
		}
		if m.Role == conversation.RoleUser {
			errs = append(errs, answers(c, mi)...)
		}
		if m.Role == conversation.RoleAssistant && calls(m) > 0 && mi+1 < len(msgs) && responses(&msgs[mi+1]) == 0 {
			errs = append(errs, fmt.Errorf("content %d: %d function calls and no response after them", mi, calls(m)))
		}
	}
	if signed && sigs {
		errs = append(errs, signatures(c)...)
	}
	return errors.Join(errs...)
}

// calls counts the functionCall parts of m.
func calls(m *conversation.Message) int { return count(m, "functionCall") }

// responses counts the functionResponse parts of m.
func responses(m *conversation.Message) int { return count(m, "functionResponse") }

func count(m *conversation.Message, typ string) int {
	n := 0
	for bi := range m.Blocks {
		if m.Blocks[bi].Type == typ {
			n++
		}
	}
	return n
}

// answers checks the function responses of user content mi against the
// calls of the content before it.
func answers(c *conversation.Conversation, mi int) []error {
	m := &c.Messages[mi]
	n := responses(m)
	if n == 0 {
		return nil
	}
	if mi == 0 || c.Messages[mi-1].Role != conversation.RoleAssistant || calls(&c.Messages[mi-1]) == 0 {
		return []error{fmt.Errorf("content %d: function responses that do not follow a content of function calls", mi)}
	}
	var errs []error
	answered := map[int]bool{}
	for bi := range m.Blocks {
		b := &m.Blocks[bi]
		switch {
		case b.Kind == conversation.ToolResult && b.Call[0] < 0:
			errs = append(errs, fmt.Errorf("content %d: the response of %s %s answers no call", mi, c.Bytes(b.Name), c.Bytes(b.ID)))
		case b.Kind == conversation.ToolResult:
			answered[b.Call[1]] = true
		}
	}
	prev := &c.Messages[mi-1]
	for bi := range prev.Blocks {
		if b := &prev.Blocks[bi]; b.Kind == conversation.ToolCall && !answered[bi] {
			errs = append(errs, fmt.Errorf("content %d: the call of %s %s is not answered", mi, c.Bytes(b.Name), c.Bytes(b.ID)))
		}
	}
	return errs
}

// signatures checks that the model contents of the current turn that
// call functions carry a thoughtSignature on their first call.
func signatures(c *conversation.Conversation) []error {
	start := 0
	for mi := range c.Messages {
		m := &c.Messages[mi]
		if m.Role == conversation.RoleUser && responses(m) == 0 {
			start = mi + 1
		}
	}
	var errs []error
	for mi := start; mi < len(c.Messages); mi++ {
		m := &c.Messages[mi]
		if m.Role != conversation.RoleAssistant {
			continue
		}
		for bi := range m.Blocks {
			if b := &m.Blocks[bi]; b.Type == "functionCall" {
				if b.Signature.IsZero() {
					errs = append(errs, fmt.Errorf("content %d: the first function call (%s) of the current turn has no thoughtSignature", mi, c.Bytes(b.Name)))
				}
				break
			}
		}
	}
	return errs
}

// ValidateRewrite checks that sent, a rewrite of the request orig, is a
// valid request (Validate) that differs from orig only in what ctxguard's
// passes may change:
//
//   - the response value of a functionResponse (cleared, compressed,
//     persisted);
//   - the args of a functionCall (cleared), still an object;
//   - a part replaced by a text part (an image's placeholder; a thought
//     removed by the thinking guard, whose content keeps a note);
//   - whole tool rounds (a model content with function calls and the
//     user content answering it) dropped, or replaced by what trimming
//     leaves: a model content and a user content without calls or
//     responses;
//   - a thoughtSignature the thinking guard unsigned: its value
//     replaced by SkipSignature, or the member removed;
//   - the contents a compaction summary replaced.
//
// Everything else is byte for byte what orig holds: the members around
// contents, every other content, and in the contents kept, every part's
// thoughtSignature but those the guard unsigned (a part kept is kept
// whole). The rewrite is valid by Validate's rules but the signature rule
// of the current turn: ValidateRewrite does not know the model, and for
// a model of another family the guard removes a signature.
func ValidateRewrite(orig, sent []byte) error { return rewriteRules.Check(orig, sent) }

// rewriteRules check a rewrite without the signature rule of the
// current turn: a rewrite does not know its model, and the thinking
// guard removes a signature for a model of another family, where the
// rule does not hold; what may happen to a signature is samePart's.
var rewriteRules = uncompact.Rules{
	Parse: Parse, Validate: func(c *conversation.Conversation) error { return check(c, false) }, Same: sameContent,
	Round: func(c *conversation.Conversation, i int) bool { return isRound(c.Messages, i) },
	Replaced: func(c *conversation.Conversation, j int) bool {
		sm := c.Messages
		return sm[j].Role == conversation.RoleAssistant && sm[j+1].Role == conversation.RoleUser && calls(&sm[j]) == 0 && responses(&sm[j+1]) == 0
	},
}

// isRound reports whether om[i] is a model content with function calls
// followed by the user content answering it.
func isRound(om []conversation.Message, i int) bool {
	return i+1 < len(om) && om[i].Role == conversation.RoleAssistant && calls(&om[i]) > 0 &&
		om[i+1].Role == conversation.RoleUser && responses(&om[i+1]) > 0
}

// sameContent reports how content s of sc differs from content o of oc
// beyond what ValidateRewrite allows, or nil: the bytes around the parts
// are the same, and each part is the same but for what samePart allows.
// A content that lost parts may have lost thoughts (thoughtsRemoved).
func sameContent(oc *conversation.Conversation, o *conversation.Message, sc *conversation.Conversation, s *conversation.Message) error {
	if o.Role != s.Role {
		return fmt.Errorf("a %s content became a %s one", o.Role, s.Role)
	}
	if len(o.Blocks) != len(s.Blocks) {
		return thoughtsRemoved(oc, o, sc, s)
	}
	oIn, sIn := make([]conversation.Span, len(o.Blocks)), make([]conversation.Span, len(s.Blocks))
	for bi := range o.Blocks {
		if err := samePart(oc, &o.Blocks[bi], sc, &s.Blocks[bi]); err != nil {
			return fmt.Errorf("part %d: %w", bi, err)
		}
		oIn[bi], sIn[bi] = o.Blocks[bi].Span, s.Blocks[bi].Span
	}
	if !uncompact.SameExcept(oc.Body, o.Span, oIn, sc.Body, s.Span, sIn) {
		return errors.New("changed around its parts")
	}
	return nil
}

// samePart reports how part s differs from part o beyond what a rewrite
// may change, or nil: a functionResponse's response value, a
// functionCall's args (still an object), an image or a thought replaced
// by a text part, and the thoughtSignature the thinking guard replaced
// by the skip value or removed (sigEdit).
func samePart(oc *conversation.Conversation, ob *conversation.Block, sc *conversation.Conversation, sb *conversation.Block) error {
	var oIn, sIn []conversation.Span // spans that may differ, in order
	switch {
	case ob.Kind == conversation.ToolResult && sb.Kind == conversation.ToolResult:
		oIn, sIn = append(oIn, ob.Content), append(sIn, sb.Content)
	case ob.Kind == conversation.ToolCall && sb.Kind == conversation.ToolCall:
		if ob.Input.IsZero() || sb.Input.IsZero() {
			break // no args: the call is compared whole
		}
		if jsonscan.KindOf(sc.Body, sb.Input) != jsonscan.KindOf(oc.Body, ob.Input) {
			return fmt.Errorf("the args of call %s changed kind", sc.Bytes(sb.Name))
		}
		oIn, sIn = append(oIn, ob.Input), append(sIn, sb.Input)
	case ob.Kind != sb.Kind && sb.Kind == conversation.Text && (ob.Kind == conversation.Image || ob.Kind == conversation.Thinking):
		return nil
	case ob.Kind != sb.Kind:
		return fmt.Errorf("a %s became a %s", ob.Kind, sb.Kind)
	}
	if os, ss, ok := sigEdit(oc, ob, sc, sb); ok {
		if len(oIn) > 0 && os.Start < oIn[0].Start {
			oIn, sIn = append([]conversation.Span{os}, oIn...), append([]conversation.Span{ss}, sIn...)
		} else {
			oIn, sIn = append(oIn, os), append(sIn, ss)
		}
	}
	if !uncompact.SameExcept(oc.Body, ob.Span, oIn, sc.Body, sb.Span, sIn) {
		return fmt.Errorf("the %s part changed beyond what a rewrite may change", ob.Type)
	}
	return nil
}

// sigEdit returns the spans of o and s that differ where the thinking
// guard unsigned part s (Dialect.Unsign): its thoughtSignature's value
// replaced by SkipSignature, or the member removed with its separator
// (from the comma before it, or to the comma after it when it came
// first). ok is false when the signature is as it was.
func sigEdit(oc *conversation.Conversation, ob *conversation.Block, sc *conversation.Conversation, sb *conversation.Block) (os, ss conversation.Span, ok bool) {
	if ob.Signature.IsZero() {
		return os, ss, false
	}
	if !sb.Signature.IsZero() {
		if string(sc.Bytes(sb.Signature)) == SkipSignature && string(oc.Bytes(ob.Signature)) != SkipSignature {
			return ob.Signature, sb.Signature, true
		}
		return os, ss, false
	}
	it := jsonscan.Members(oc.Body, ob.Span)
	var prevEnd int
	for k, v, more := it.NextMember(); more; k, v, more = it.NextMember() {
		if v != ob.Signature {
			prevEnd = v.End
			continue
		}
		if prevEnd > 0 {
			// ,"thoughtSignature":"..." goes; s has nothing where it was,
			// as far from the part's end (what comes before, the call's
			// args, may have changed).
			at := sb.Span.End - (ob.Span.End - v.End)
			return conversation.Span{Start: prevEnd, End: v.End}, conversation.Span{Start: at, End: at}, true
		}
		// The first member: it goes with the comma after it.
		end := jsonscan.SkipSpace(oc.Body, v.End)
		if end < ob.Span.End && oc.Body[end] == ',' {
			end = jsonscan.SkipSpace(oc.Body, end+1)
		}
		at := sb.Span.Start + (k.Start - ob.Span.Start)
		return conversation.Span{Start: k.Start, End: end}, conversation.Span{Start: at, End: at}, true
	}
	return os, ss, false
}

// thoughtsRemoved reports whether s is o without some of its thought
// parts (every other part the same but for what samePart allows), or
// o's thoughts replaced by one text part when they were all it held.
func thoughtsRemoved(oc *conversation.Conversation, o *conversation.Message, sc *conversation.Conversation, s *conversation.Message) error {
	j := 0
	for bi := range o.Blocks {
		ob := &o.Blocks[bi]
		if j < len(s.Blocks) && s.Blocks[j].Kind == ob.Kind && samePart(oc, ob, sc, &s.Blocks[j]) == nil {
			j++
			continue
		}
		if ob.Kind != conversation.Thinking && ob.Kind != conversation.RedactedThinking {
			return fmt.Errorf("part %d (%s) dropped, and it is not a thought", bi, ob.Type)
		}
	}
	if j == len(s.Blocks) || (j == 0 && len(s.Blocks) == 1 && s.Blocks[0].Kind == conversation.Text) {
		return nil
	}
	return fmt.Errorf("a content of %d parts became one of %d", len(o.Blocks), len(s.Blocks))
}
