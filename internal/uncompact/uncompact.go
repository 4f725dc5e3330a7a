// Package uncompact undoes, for checking, what summary compaction did to
// a request, so that the validators of every protocol can check the rest
// of a rewrite by their usual rules. It is offline tooling: only
// validators use it.
package uncompact

import (
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
