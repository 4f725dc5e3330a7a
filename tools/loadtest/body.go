package loadtest

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ctxguard/ctxguard/internal/jsonscan"
	"github.com/ctxguard/ctxguard/tools/transcript"
)

// DefaultSessions returns where the request bodies come from when
// Options.Sessions is empty: the shared data folder beside the module
// (root/../shared/data/claude-code, real Claude Code sessions, when it
// holds any .jsonl file), else the transcripts in the repository
// (root/tools/transcript/testdata/claude-code).
func DefaultSessions(root string) []string {
	shared := filepath.Join(root, "..", "shared", "data", "claude-code")
	if m, _ := filepath.Glob(filepath.Join(shared, "*.jsonl")); len(m) > 0 {
		return []string{filepath.Clean(shared)}
	}
	return []string{filepath.Join(root, "tools", "transcript", "testdata", "claude-code")}
}

// Source makes Claude Code-shaped request bodies of a chosen size from one
// real session. Its zero value is not usable; build it with NewSource.
type Source struct {
	// Session is the session the bodies are made of.
	Session *transcript.Session
	// Rounds is the number of tool rounds (an assistant message and the
	// user message answering it) the session has.
	Rounds int

	first  transcript.Message      // the first user message
	rounds [][2]transcript.Message // the session's rounds, in order
}

// NewSource loads the sessions at paths (files or folders, see
// transcript.Load) and picks one: the session whose ID starts with id, or
// when id is "" the main (not subagent) session holding the most bytes of
// content, ties broken by ID. It fails when nothing fits or the chosen
// session has no round.
func NewSource(paths []string, id string) (*Source, error) {
	ss, err := transcript.Load(paths, transcript.Options{})
	if err != nil {
		return nil, err
	}
	var best *transcript.Session
	bestSize := -1
	for _, s := range ss {
		if id != "" {
			if strings.HasPrefix(s.ID, id) {
				best = s
				break
			}
			continue
		}
		if s.Sidechain || len(rounds(s)) == 0 {
			continue
		}
		n := contentBytes(s)
		if n > bestSize || (n == bestSize && s.ID < best.ID) {
			best, bestSize = s, n
		}
	}
	if best == nil {
		if id != "" {
			return nil, fmt.Errorf("loadtest: no session %q in %s", id, strings.Join(paths, ", "))
		}
		return nil, fmt.Errorf("loadtest: no session with a tool round in %s", strings.Join(paths, ", "))
	}
	src := &Source{Session: best, rounds: rounds(best)}
	if len(src.rounds) == 0 || best.Messages[0].Role != transcript.User {
		return nil, fmt.Errorf("loadtest: session %s has no round after a user message", best.ID)
	}
	src.first = best.Messages[0]
	src.Rounds = len(src.rounds)
	return src, nil
}

func contentBytes(s *transcript.Session) int {
	n := 0
	for _, m := range s.Messages {
		for _, b := range m.Blocks {
			n += len(b.Raw)
		}
	}
	return n
}

// rounds returns the session's (assistant, user) message pairs.
func rounds(s *transcript.Session) [][2]transcript.Message {
	var out [][2]transcript.Message
	for i := 1; i+1 < len(s.Messages); i++ {
		if s.Messages[i].Role == transcript.Assistant && s.Messages[i+1].Role == transcript.User {
			out = append(out, [2]transcript.Message{s.Messages[i], s.Messages[i+1]})
		}
	}
	return out
}

// Body is one request body.
type Body struct {
	Data []byte
	// Rounds is how many tool rounds its history holds; Copies how many
	// times the session's rounds were gone through to reach the size
	// (1 when the session alone was large enough).
	Rounds, Copies int
}

// Body returns the request of protocol p (the Messages API as Claude Code
// sends it, or the session rendered in the Responses API or Chat
// Completions) with the session's first user message followed by n
// rounds: the session's rounds in order, then again from the first with
// fresh tool ids (suffix "_r<copy>") for as long as needed.
// clientSession is the session id the client puts in the body (Claude
// Code's metadata.user_id, the Responses prompt_cache_key); stream false
// sets the top-level "stream" to false. The same arguments always give
// the same bytes.
func (s *Source) Body(p Protocol, n int, clientSession string, stream bool) ([]byte, error) {
	sess := &transcript.Session{
		ID:              s.Session.ID,
		ClientSessionID: clientSession,
		Format:          transcript.ClaudeCode,
		Model:           s.Session.Model,
		Messages:        make([]transcript.Message, 0, 2*n+2),
	}
	first := s.first
	first.Reset = false
	sess.Messages = append(sess.Messages, first)
	for i := range n {
		copyNo := i / len(s.rounds)
		for _, m := range s.rounds[i%len(s.rounds)] {
			m.Reset = false
			if copyNo > 0 {
				m = freshIDs(m, "_r"+strconv.Itoa(copyNo))
			}
			sess.Messages = append(sess.Messages, m)
		}
	}
	// The request that produced this closing answer holds everything
	// before it.
	sess.Messages = append(sess.Messages, transcript.Message{Role: transcript.Assistant, Model: s.Session.Model,
		Blocks: []transcript.Block{{Type: "text", Raw: []byte(`{"type":"text","text":"Done."}`)}}})
	b, err := transcript.NewBuilder(sess, buildOptions(p))
	if err != nil {
		return nil, err
	}
	r, err := b.Request(b.Len() - 1)
	if err != nil {
		return nil, err
	}
	body := r.Body
	if !stream {
		return setStream(body, false)
	}
	return body, nil
}

// setStream returns body with its top-level "stream" member set to v.
func setStream(body []byte, v bool) ([]byte, error) {
	root, err := jsonscan.Root(body)
	if err != nil {
		return nil, err
	}
	sp, err := jsonscan.Lookup(body, root, "stream")
	if err != nil {
		return nil, errors.New("loadtest: built body has no top-level stream member")
	}
	out := make([]byte, 0, len(body)+1)
	out = append(out, body[:sp.Start]...)
	out = strconv.AppendBool(out, v)
	return append(out, body[sp.End:]...), nil
}

// freshIDs returns m with every tool_use id and tool_result tool_use_id
// suffixed, in the block's ID and its raw JSON alike. The blocks are
// copied; m's own are not modified.
func freshIDs(m transcript.Message, suffix string) transcript.Message {
	blocks := make([]transcript.Block, len(m.Blocks))
	copy(blocks, m.Blocks)
	for i := range blocks {
		b := &blocks[i]
		var key string
		switch b.Type {
		case "tool_use":
			key = `"id":`
		case "tool_result":
			key = `"tool_use_id":`
		default:
			continue
		}
		if b.ID == "" {
			continue
		}
		// Tool ids are plain ASCII, which strconv.Quote writes as JSON does.
		oldID, newID := strconv.Quote(b.ID), strconv.Quote(b.ID+suffix)
		if bytes.Contains(b.Raw, []byte(key+oldID)) {
			oldID, newID = key+oldID, key+newID
		} // else: keys not as expected; rename the first quoted id
		b.ID += suffix
		b.Raw = bytes.Replace(b.Raw, []byte(oldID), []byte(newID), 1)
	}
	m.Blocks = blocks
	return m
}

// Sized finds the number of rounds whose body comes closest to size
// bytes (never below one round) and returns that body, with stream true
// and clientSession as in Body.
func (s *Source) Sized(p Protocol, size int, clientSession string) (Body, error) {
	build := func(n int) ([]byte, error) { return s.Body(p, n, clientSession, true) }
	// Grow until the body reaches the size, then bisect.
	lo, hi := 0, 1
	var hiBody []byte
	for {
		b, err := build(hi)
		if err != nil {
			return Body{}, err
		}
		if len(b) >= size {
			hiBody = b
			break
		}
		if hi > 1<<20 {
			return Body{}, fmt.Errorf("loadtest: cannot grow session %s to %d bytes", s.Session.ID, size)
		}
		lo, hi = hi, hi*2
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		b, err := build(mid)
		if err != nil {
			return Body{}, err
		}
		if len(b) >= size {
			hi, hiBody = mid, b
		} else {
			lo = mid
		}
	}
	n, body := hi, hiBody
	if lo >= 1 {
		lb, err := build(lo)
		if err != nil {
			return Body{}, err
		}
		if size-len(lb) < len(hiBody)-size {
			n, body = lo, lb
		}
	}
	return Body{Data: body, Rounds: n, Copies: (n + len(s.rounds) - 1) / len(s.rounds)}, nil
}

// buildOptions is how bodies of protocol p are built from a session: the
// session's Anthropic-shaped messages written in the API's shape
// (transcript.BuildOptions.Protocol), as Codex and opencode lay them out.
func buildOptions(p Protocol) transcript.BuildOptions {
	return transcript.BuildOptions{Protocol: string(p)}
}
