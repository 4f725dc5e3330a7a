package transcript

import (
	"fmt"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
)

// RepairNote starts the text of every block a repair inserts, so that a
// measure can tell them from what the session itself said.
const RepairNote = "[ctxguard replay: "

// Texts of the blocks repairs insert. They say what happened so that a
// replayed request explains itself.
const (
	placeholderUserText    = RepairNote + "no user message was recorded here]"
	placeholderRemovedText = RepairNote + "tool results without a recorded call were removed]"
	missingResultText      = RepairNote + "the transcript holds no result for this tool call]"
)

func placeholderBlock(text string) Block {
	return textBlock(quote(text))
}

func missingResult(id string) Block {
	raw := []byte(`{"type":"tool_result","tool_use_id":`)
	raw = jsonscan.AppendQuote(raw, id)
	raw = append(raw, `,"content":`...)
	raw = jsonscan.AppendQuote(raw, missingResultText)
	raw = append(raw, `,"is_error":true}`...)
	return Block{Type: "tool_result", Raw: raw, ID: id}
}

// setString replaces the string value of the top-level member key of the
// block object raw with s.
func setString(raw []byte, key, s string) []byte {
	v := member(raw, key)
	if v.IsZero() {
		return raw
	}
	return replaceSpan(raw, v, quote(s))
}

func isEmptyText(b Block) bool {
	if b.Type != "text" {
		return false
	}
	v := member(b.Raw, "text")
	return jsonscan.KindOf(b.Raw, v) == jsonscan.String && v.Len() == 2
}

// normalize applies the repairs described in the package doc, in place.
func normalize(s *Session) {
	rp := &s.Stats.Repairs

	// Pass 1: drop empty text blocks and messages left empty; merge user
	// messages that became adjacent.
	msgs := make([]Message, 0, len(s.Messages))
	carryReset, carryGaps, carryRepaired := false, 0, false
	for _, m := range s.Messages {
		m.Reset = m.Reset || carryReset
		m.Gaps += carryGaps
		m.Repaired = m.Repaired || carryRepaired
		carryReset, carryGaps, carryRepaired = false, 0, false
		kept := make([]Block, 0, len(m.Blocks))
		for _, b := range m.Blocks {
			misplaced := m.Role == Assistant && b.Type == "tool_result" || m.Role == User && b.Type == "tool_use"
			if b.bad || misplaced {
				rp.BadBlock++
				m.Repaired = true
				continue
			}
			if isEmptyText(b) {
				rp.EmptyText++
				m.Repaired = true
				continue
			}
			kept = append(kept, b)
		}
		m.Blocks = kept
		if len(m.Blocks) == 0 {
			// What it stood for is gone: the next message says so.
			rp.EmptyMessage++
			carryReset, carryGaps, carryRepaired = m.Reset, m.Gaps, true
			continue
		}
		if n := len(msgs); n > 0 && !m.Reset && m.Role == User && msgs[n-1].Role == User {
			prev := &msgs[n-1]
			prev.Blocks = append(prev.Blocks, m.Blocks...)
			prev.Gaps += m.Gaps
			prev.Repaired = prev.Repaired || m.Repaired
			continue
		}
		msgs = append(msgs, m)
	}

	// Pass 2: alternation and tool pairing.
	out := make([]Message, 0, len(msgs)+2)
	seen := map[string]bool{}        // tool_use ids used in this history
	var pending []string             // ids the last assistant message asked for
	renamed := map[string][]string{} // original id -> new ids, for the next user message
	lastRole := func() Role {
		if len(out) == 0 {
			return ""
		}
		return out[len(out)-1].Role
	}
	for _, m := range msgs {
		if m.Reset {
			clear(seen)
			clear(renamed)
			pending = nil
		}
		if m.Role == Assistant {
			if len(out) == 0 || m.Reset || lastRole() == Assistant {
				u := Message{Role: User, Reset: m.Reset, Repaired: true}
				if !m.Reset && len(pending) > 0 {
					for _, id := range pending {
						u.Blocks = append(u.Blocks, missingResult(id))
					}
					rp.MissingResult += len(pending)
				} else {
					u.Blocks = []Block{placeholderBlock(placeholderUserText)}
					rp.MissingUser++
				}
				m.Reset = false
				out = append(out, u)
				clear(renamed)
			}
			pending = nil
			for i := range m.Blocks {
				b := &m.Blocks[i]
				if b.Type != "tool_use" {
					continue
				}
				if seen[b.ID] {
					nid := uniqueID(b.ID, seen)
					renamed[b.ID] = append(renamed[b.ID], nid)
					b.Raw = setString(b.Raw, "id", nid)
					b.ID = nid
					rp.DuplicateID++
					m.Repaired = true
				}
				seen[b.ID] = true
				pending = append(pending, b.ID)
			}
			out = append(out, m)
			continue
		}

		// A user message: answer exactly the pending calls.
		expect := map[string]bool{}
		if lastRole() == Assistant {
			for _, id := range pending {
				expect[id] = true
			}
		}
		answered := map[string]bool{}
		var results, others []Block
		late := false
		for _, b := range m.Blocks {
			if b.Type != "tool_result" {
				others = append(others, b)
				continue
			}
			id := b.ID
			switch {
			case expect[id] && !answered[id]:
			case len(renamed[id]) > 0:
				nid := renamed[id][0]
				renamed[id] = renamed[id][1:]
				b.Raw = setString(b.Raw, "tool_use_id", nid)
				b.ID, id = nid, nid
				m.Repaired = true
			case answered[id]:
				rp.DuplicateResult++
				m.Repaired = true
				continue
			default:
				rp.OrphanResult++
				m.Repaired = true
				continue
			}
			if len(others) > 0 {
				late = true
			}
			answered[id] = true
			results = append(results, b)
		}
		if lastRole() == Assistant {
			for _, id := range pending {
				if !answered[id] {
					results = append(results, missingResult(id))
					rp.MissingResult++
					m.Repaired = true
				}
			}
		}
		if late {
			rp.Reordered++
			m.Repaired = true
		}
		m.Blocks = append(results, others...)
		if len(m.Blocks) == 0 {
			m.Blocks = []Block{placeholderBlock(placeholderRemovedText)}
		}
		pending = nil
		clear(renamed)
		out = append(out, m)
	}
	s.Messages = out
}

func uniqueID(id string, seen map[string]bool) string {
	for n := 1; ; n++ {
		c := fmt.Sprintf("%s_dup%d", id, n)
		if !seen[c] {
			return c
		}
	}
}
