// Package uncompact undoes, for checking, what summary compaction did to
// a request, so that the validators of every protocol can check the rest
// of a rewrite by their usual rules. It is offline tooling: only
// validators use it.
package uncompact

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// Undo undoes, for checking, what a compaction did to a request:
// when sent (a rewrite of orig) holds a compaction summary (the first user
// message, one text block starting with conversation.CompactionNote), it
// returns orig's body with the messages the summary replaced spliced out
// and the bytes of sent's summary (and the system and developer messages
// kept after it) in their place, so that the rest of the rewrite can be
// checked against it by the protocol's usual rules. ok is false when sent
// holds no summary. It fails when the summary does not replace a run of
// whole messages from orig's first user message up to an assistant
// message (so every tool call it removed took its results with it) or
// when the kept instructions are not orig's.
func Undo(oc, sc *conversation.Conversation) (body []byte, ok bool, err error) {
	first := -1
	for i := range sc.Messages {
		if sc.Messages[i].Role == conversation.RoleUser {
			first = i
			break
		}
	}
	if first < 0 {
		return nil, false, nil
	}
	sm := &sc.Messages[first]
	if len(sm.Blocks) != 1 || sm.Blocks[0].Kind != conversation.Text {
		return nil, false, nil
	}
	text, err := jsonscan.Unquote(sc.Bytes(sm.Blocks[0].Text))
	if err != nil || !strings.HasPrefix(text, conversation.CompactionNote) {
		return nil, false, nil
	}
	// The summary, then the instructions it kept, then the tail.
	k := first + 1
	for k < len(sc.Messages) && (sc.Messages[k].Role == conversation.RoleSystem || sc.Messages[k].Role == conversation.RoleDeveloper) {
		k++
	}
	if k >= len(sc.Messages) {
		return nil, true, fmt.Errorf("compaction: nothing follows the summary")
	}
	if sc.Messages[k].Role != conversation.RoleAssistant {
		return nil, true, fmt.Errorf("compaction: the summary is followed by a %s message, not an assistant one", sc.Messages[k].Role)
	}
	ofirst := -1
	for i := range oc.Messages {
		if oc.Messages[i].Role == conversation.RoleUser {
			ofirst = i
			break
		}
	}
	if ofirst != first {
		return nil, true, fmt.Errorf("compaction: the summary is message %d, the first user message was %d", first, ofirst)
	}
	// Where the tail starts in orig: the note says how many messages the
	// summary replaced, from the first user message on.
	var count int
	if _, err := fmt.Sscanf(text[len(conversation.CompactionNote):], "%d messages", &count); err != nil || count <= 0 {
		return nil, true, fmt.Errorf("compaction: the note does not say how many messages it replaced")
	}
	e := ofirst + count
	if e <= ofirst || e >= len(oc.Messages) || oc.Messages[e].Role != conversation.RoleAssistant {
		return nil, true, fmt.Errorf("compaction: the summarized span does not end before an assistant message of the original (at %d)", e)
	}
	var kept []int
	for i := ofirst + 1; i < e; i++ {
		if r := oc.Messages[i].Role; r == conversation.RoleSystem || r == conversation.RoleDeveloper {
			kept = append(kept, i)
		}
	}
	if len(kept) != k-first-1 {
		return nil, true, fmt.Errorf("compaction: %d instruction messages kept of %d", k-first-1, len(kept))
	}
	for j, i := range kept {
		if string(oc.Bytes(oc.Messages[i].Span)) != string(sc.Bytes(sc.Messages[first+1+j].Span)) {
			return nil, true, fmt.Errorf("compaction: kept message %d changed", i)
		}
	}
	out := append([]byte(nil), oc.Body[:oc.Messages[ofirst].Span.Start]...)
	out = append(out, sc.Body[sm.Span.Start:sc.Messages[k].Span.Start]...)
	out = append(out, oc.Body[oc.Messages[e].Span.Start:]...)
	return out, true, nil
}

// Bodies is Undo on bodies, parsed with parse: orig as Undo returns it, or orig itself when sent holds no compaction (or
// either does not parse: the caller's checks report that).
func Bodies(parse func([]byte) (*conversation.Conversation, error), orig, sent []byte) ([]byte, error) {
	oc, err := parse(orig)
	if err != nil {
		return orig, nil
	}
	defer oc.Release()
	sc, err := parse(sent)
	if err != nil {
		return orig, nil
	}
	defer sc.Release()
	body, ok, err := Undo(oc, sc)
	if !ok || err != nil {
		return orig, err
	}
	return body, nil
}

// SameExcept reports whether the bytes of ow in ob and sw in sb are the
// same apart from the spans oIn and sIn (in order, within them), which
// may differ.
func SameExcept(ob []byte, ow conversation.Span, oIn []conversation.Span, sb []byte, sw conversation.Span, sIn []conversation.Span) bool {
	oAt, sAt := ow.Start, sw.Start
	for k := range oIn {
		if !bytes.Equal(ob[oAt:oIn[k].Start], sb[sAt:sIn[k].Start]) {
			return false
		}
		oAt, sAt = oIn[k].End, sIn[k].End
	}
	return bytes.Equal(ob[oAt:ow.End], sb[sAt:sw.End])
}

// Rules are what a protocol's validator knows of its messages, for
// Check: how it parses a body and validates a request, how a message may
// differ from the one it was rewritten from, and what a tool round is.
type Rules struct {
	Parse    func([]byte) (*conversation.Conversation, error)
	Validate func(*conversation.Conversation) error
	// Same reports how message s of sc differs from message o of oc
	// beyond what a rewrite may change, or nil.
	Same func(oc *conversation.Conversation, o *conversation.Message, sc *conversation.Conversation, s *conversation.Message) error
	// Round reports whether messages i and i+1 of c are a tool round
	// (calls and the results answering them), which a rewrite may drop.
	Round func(c *conversation.Conversation, i int) bool
	// Replaced reports whether messages j and j+1 of c are what trimming
	// leaves of a round in their place.
	Replaced func(c *conversation.Conversation, j int) bool
}

// Check checks that sent, a rewrite of the request orig, is a valid
// request (Validate) whose message list is orig's with compaction undone
// (Bodies), tool rounds dropped or replaced, and every other message the
// same by Same, and whose bytes around the message list are orig's.
func (r Rules) Check(orig, sent []byte) error {
	orig, err := Bodies(r.Parse, orig, sent)
	if err != nil {
		return err
	}
	o, err := r.Parse(orig)
	if err != nil {
		return fmt.Errorf("original: %w", err)
	}
	defer o.Release()
	s, err := r.Parse(sent)
	if err != nil {
		return fmt.Errorf("rewrite: %w", err)
	}
	defer s.Release()
	var errs []error
	if err := r.Validate(s); err != nil {
		errs = append(errs, err)
	}
	if !bytes.Equal(orig[:o.List.Start], sent[:s.List.Start]) || !bytes.Equal(orig[o.List.End:], sent[s.List.End:]) {
		errs = append(errs, errors.New("the rewrite changed the request outside its messages"))
	}
	if err := r.align(o, s); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// align reports whether the messages of s are those of o with tool
// rounds dropped or replaced, and else where they first part.
func (r Rules) align(o, s *conversation.Conversation) error {
	om, sm := o.Messages, s.Messages
	memo := map[[2]int]bool{}
	var ok func(i, j int) bool
	ok = func(i, j int) bool {
		if i == len(om) {
			return j == len(sm)
		}
		key := [2]int{i, j}
		if v, seen := memo[key]; seen {
			return v
		}
		v := j < len(sm) && r.Same(o, &om[i], s, &sm[j]) == nil && ok(i+1, j+1)
		if !v && r.Round(o, i) {
			// The round dropped whole, or replaced by what trimming
			// leaves.
			v = ok(i+2, j) || (j+1 < len(sm) && r.Replaced(s, j) && ok(i+2, j+2))
		}
		memo[key] = v
		return v
	}
	if ok(0, 0) {
		return nil
	}
	// Say where the messages first differ.
	for i := range om {
		if i >= len(sm) {
			return fmt.Errorf("message %d (%s) and those after it dropped", i, om[i].Role)
		}
		if err := r.Same(o, &om[i], s, &sm[i]); err != nil {
			if !r.Round(o, i) {
				err = fmt.Errorf("%w, and it is not a tool round", err)
			}
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	if len(sm) > len(om) {
		return fmt.Errorf("the rewrite has %d messages more than the original", len(sm)-len(om))
	}
	return errors.New("the messages do not align")
}
