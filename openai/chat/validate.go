package chat

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/ctxguard/ctxguard/conversation"
	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/internal/uncompact"
)

// Validate checks a Chat Completions request against the API's rules on
// tool calls, as the API enforces them:
//
//   - every tool message answers, by tool_call_id, a tool call of the
//     assistant message just before its run of tool messages, once;
//   - every tool call of an assistant message is answered by that run,
//     before the next message of another role.
//
// Calls the adapter does not read as function calls (Opaque entries of
// tool_calls, such as custom tools) are not checked. The error joins
// every problem found, or is the parse error.
func Validate(body []byte) error {
	c, err := Parse(body)
	if err != nil {
		return err
	}
	defer c.Release()
	return validate(c)
}

func validate(c *conversation.Conversation) error {
	var errs []error
	msgs := c.Messages
	for mi := range msgs {
		m := &msgs[mi]
		switch m.Role {
		case conversation.RoleTool:
			if mi == 0 || msgs[mi-1].Role != conversation.RoleAssistant {
				errs = append(errs, fmt.Errorf("message %d: tool messages without an assistant message before them", mi))
				continue
			}
			seen := map[string]bool{}
			for bi := range m.Blocks {
				b := &m.Blocks[bi]
				id := c.String(b.ID)
				switch {
				case b.Kind != conversation.ToolResult:
					errs = append(errs, fmt.Errorf("message %d: tool message %d without a tool_call_id or content", mi, bi))
				case b.Call[0] < 0:
					errs = append(errs, fmt.Errorf("message %d: tool message for %q answers no call of the assistant message before it", mi, id))
				case seen[id]:
					errs = append(errs, fmt.Errorf("message %d: call %q answered twice", mi, id))
				}
				seen[id] = true
			}
		case conversation.RoleAssistant:
			var answered map[string]bool
			if mi+1 < len(msgs) && msgs[mi+1].Role == conversation.RoleTool {
				answered = map[string]bool{}
				for _, b := range msgs[mi+1].Blocks {
					if b.Kind == conversation.ToolResult {
						answered[c.String(b.ID)] = true
					}
				}
			}
			for bi := range m.Blocks {
				if b := &m.Blocks[bi]; b.Kind == conversation.ToolCall && !answered[c.String(b.ID)] {
					errs = append(errs, fmt.Errorf("message %d: tool call %q (%s) is not answered", mi, c.String(b.ID), c.ToolName(b)))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// ValidateRewrite checks that sent, a rewrite of the request orig, is a
// valid request (Validate) that differs from orig only in what ctxguard's
// passes may change:
//
//   - the content of tool messages (cleared, compressed, persisted);
//   - the arguments of tool calls (cleared), still a JSON string holding
//     JSON;
//   - whole tool rounds (an assistant message with tool calls and the
//     tool messages answering it) dropped, or each replaced by an
//     assistant message holding only content and a user message (the
//     note tool-round trimming leaves).
//
// Everything else is byte for byte what orig holds: the top-level members
// around messages, every other message, and in kept assistant messages
// their content, reasoning fields and tool call ids and names.
func ValidateRewrite(orig, sent []byte) error { return rewriteRules.Check(orig, sent) }

var rewriteRules = uncompact.Rules{
	Parse: Parse, Validate: validate, Same: sameMessage,
	Round:    func(c *conversation.Conversation, i int) bool { return isRound(c.Messages, i) },
	Replaced: func(c *conversation.Conversation, j int) bool { return replacedRound(c, c.Messages, j) },
}

// isRound reports whether om[i] is an assistant message with tool calls
// followed by the run of tool messages answering it.
func isRound(om []conversation.Message, i int) bool {
	if i+1 >= len(om) || om[i].Role != conversation.RoleAssistant || om[i+1].Role != conversation.RoleTool {
		return false
	}
	for _, b := range om[i].Blocks {
		if b.Kind == conversation.ToolCall {
			return true
		}
	}
	return false
}

// replacedRound reports whether sm[j], sm[j+1] are what trimming leaves of
// a round: an assistant message with content only, then a user message.
func replacedRound(c *conversation.Conversation, sm []conversation.Message, j int) bool {
	a, u := &sm[j], &sm[j+1]
	if a.Role != conversation.RoleAssistant || u.Role != conversation.RoleUser {
		return false
	}
	for _, b := range a.Blocks {
		if !a.Content.Contains(b.Span) {
			return false
		}
	}
	return true
}

// sameMessage reports how message s of sc differs from message o of oc
// beyond what ValidateRewrite allows, or nil.
func sameMessage(oc *conversation.Conversation, o *conversation.Message, sc *conversation.Conversation, s *conversation.Message) error {
	if o.Role != s.Role || len(o.Blocks) != len(s.Blocks) {
		return fmt.Errorf("a %s message of %d blocks became a %s message of %d", o.Role, len(o.Blocks), s.Role, len(s.Blocks))
	}
	var oIn, sIn []conversation.Span // spans that may differ
	for bi := range o.Blocks {
		ob, sb := &o.Blocks[bi], &s.Blocks[bi]
		if ob.Kind != sb.Kind {
			return fmt.Errorf("block %d: a %s became a %s", bi, ob.Kind, sb.Kind)
		}
		switch ob.Kind {
		case conversation.ToolResult:
			if o.Role != conversation.RoleTool {
				continue
			}
			oIn, sIn = append(oIn, ob.Content), append(sIn, sb.Content)
		case conversation.ToolCall:
			if bytes.Equal(oc.Bytes(ob.Input), sc.Bytes(sb.Input)) {
				continue
			}
			args, err := jsonscan.Unquote(sc.Bytes(sb.Input))
			if err != nil || !jsonscan.Valid([]byte(args)) {
				return fmt.Errorf("block %d: the arguments of call %s are not JSON", bi, sc.Bytes(sb.ID))
			}
			oIn, sIn = append(oIn, ob.Input), append(sIn, sb.Input)
		}
	}
	if !uncompact.SameExcept(oc.Body, o.Span, oIn, sc.Body, s.Span, sIn) {
		return errors.New("changed beyond tool results and arguments")
	}
	return nil
}
