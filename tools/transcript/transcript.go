// Package transcript loads real agent sessions and rebuilds the stream of
// requests their client sent, so that ctxguard's savings, validity and
// cache behaviour can be measured on real traffic.
//
// # Sources
//
// Claude Code JSONL transcripts (~/.claude/projects/*/*.jsonl): one record
// a line. Records of type "user" and "assistant" carry "message" as the
// API saw it; every other record type (summary, system, progress,
// file-history-snapshot, queue-operation, ...) is counted and ignored,
// except a "system" record with subtype "compact_boundary", which restarts
// the history (the client compacted: the next request holds only what
// follows). Lines that are not valid JSON objects are skipped and counted,
// never fatal. An assistant reply is stored one content block a line:
// consecutive assistant records sharing message.id are merged back into one
// message, and consecutive user records (parallel tool results, a prompt
// after results) into one user message, as the client does before sending.
// Assistant records the client made up itself (model "<synthetic>", API
// error notes) were never produced by the API and are skipped.
//
// Sidechains: records with isSidechain true belong to a subagent (the Task
// tool). The client sends them as requests of their own, with their own
// history, so each subagent (by agentId) becomes a separate Session with
// Sidechain set and Parent naming the main session. Options.SkipSidechains
// drops them instead (counted).
//
// SWE-agent trajectories (.traj, JSON): "history" is a list of OpenAI-chat
// messages. System messages become Session.System (the builder sends it as
// the main system block); assistant tool_calls become tool_use blocks
// (arguments parsed to the input object); role "tool" messages become
// tool_result blocks in a user message.
//
// Gemini CLI chat recordings (~/.gemini/tmp/<project>/chats/session-*.jsonl,
// whose first record has sessionId and projectHash) are kept as the
// Gemini API contents the CLI sends, one request per model answer
// (Session.Gemini; see geminicli.go). Their Messages are empty.
//
// Codex CLI rollouts (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl; a
// .jsonl file named rollout-* or starting with a session_meta record) are
// kept as what Codex sends: the Responses API items of the history, byte
// for byte, and one request per model turn (Session.Codex; see codex.go
// for the records read, turn boundaries, compaction and usage). Their
// Messages are empty and the repairs below do not apply.
//
// # Repairs
//
// After loading, every session is made valid for the Messages API in a
// documented way, each repair counted in Stats.Repairs and the touched
// message marked Repaired:
//   - a conversation (or a history after a compaction) that starts with an
//     assistant message, or two assistant messages in a row, get a user
//     placeholder message in between (MissingUser);
//   - a tool_use with no tool_result in the next user message gets an error
//     result added there (MissingResult);
//   - a tool_result whose call is not in the preceding assistant message is
//     removed (OrphanResult); a second result for the same call is removed
//     (DuplicateResult); a user message left empty gets a placeholder text;
//   - a tool_use id already used earlier in the history is renamed
//     "<id>_dup<n>", and the first result for it in the next user message
//     follows (DuplicateID);
//   - tool_result blocks are moved before the other blocks of their user
//     message (Reordered);
//   - empty text blocks and messages left empty are removed (EmptyText,
//     EmptyMessage); content elements that are not objects, tool_use or
//     tool_result blocks without the id, name and input the API requires,
//     and tool blocks in the wrong role's message are removed (BadBlock); cache_control members found in transcript
//     blocks are removed (CacheControl), since the builder places its own
//     markers.
//
// # Serialization
//
// Blocks are kept as the bytes the transcript holds: each content block is
// the block object from the transcript with insignificant whitespace
// removed, keys in the transcript's order and every string byte for byte
// (no unescaping or re-escaping). Blocks ctxguard constructs (a string
// content turned into a text block, repair blocks, SWE-agent conversions)
// put "type" first and reuse the transcript's raw string bytes where there
// are some; new strings (profile texts, repair notes) are written the way
// JavaScript's JSON.stringify writes them: only '"', '\' and control
// characters escaped, UTF-8 as is. So a request body contains the
// transcript's content exactly as it was recorded.
//
// # Requests
//
// A Builder rebuilds request k of a session, the one that produced its
// k-th assistant message: the history before that message (from the last
// compaction boundary on), with the client's own parts taken from a
// Profile. The layout follows Claude Code 2.1.197
// (anthropic/testdata/claude-code-2.1.197-first.json): top-level keys
// model, messages, system, tools, metadata, max_tokens, thinking,
// context_management, output_config, stream; system as three text blocks
// with cache_control on the second and third; a role "system" message at
// messages[1]; a reminder text block before the content of the first user
// message; metadata.user_id a JSON string holding device_id, account_uuid
// and session_id; adaptive thinking; clear_thinking keeping all; stream
// true. The third cache marker sits on the last block of the last message
// and moves every turn: one turn later that message is re-sent without it,
// and a user message whose content is a single plain text block is then
// re-sent as a string. So request k+1 repeats request k byte for byte up
// to that message (Request.Stable) and then only appends. Bodies are
// deterministic: the same session and profile give the same bytes.
//
// BuildOptions.Protocol writes the same sessions as OpenAI Responses or
// Chat Completions requests (render.go) or Gemini generateContent
// requests as the Gemini CLI sends them (gemini.go) instead; Codex
// rollouts are rebuilt as Codex CLI 0.169.0's Responses requests
// (codexbuild.go), Gemini CLI sessions as Gemini CLI 0.61.0's requests
// (gemini.go, geminicli.go).
package transcript

import (
	"github.com/ctxguard/ctxguard/internal/jsonscan"

	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Format is the kind of file a session came from.
type Format uint8

const (
	ClaudeCode Format = iota + 1
	SWEAgent
)

func (f Format) String() string {
	switch f {
	case ClaudeCode:
		return "claude-code"
	case SWEAgent:
		return "swe-agent"
	case Codex:
		return "codex"
	case GeminiCLI:
		return "gemini-cli"
	}
	return "unknown"
}

// Role is who wrote a message.
type Role string

const (
	User      Role = "user"
	Assistant Role = "assistant"
)

// Usage is the token usage the API reported for one assistant message.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// Prompt returns the prompt tokens of the request that produced the
// message: input + cache creation + cache read.
func (u Usage) Prompt() int {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

// Block is one content block.
type Block struct {
	// Type is the block's "type" (decoded); "" if it has none.
	Type string
	// Raw is the block object, compact (see the package doc).
	Raw []byte
	// ID is the tool_use id, or the tool_use_id a tool_result answers.
	ID string
	// plain is the raw JSON string of a text block whose only members are
	// type and text: such a block can travel as a plain string content.
	plain []byte
	// bad marks a tool_use or tool_result block without the fields the
	// API requires (id, name, input; tool_use_id).
	bad bool
}

// Message is one API message.
type Message struct {
	Role   Role
	Blocks []Block
	// ID is the API message id of an assistant message (message.id).
	ID string
	// Model is the model that wrote an assistant message.
	Model string
	// Usage is the usage the API reported for an assistant message, nil if
	// the transcript has none.
	Usage *Usage
	// Line is the 1-based line (JSONL) or history index (traj) of the
	// message's first record; 0 for messages a repair inserted.
	Line int
	// Time is the "timestamp" of the message's first record (Claude
	// Code); zero when the transcript has none.
	Time time.Time
	// Reset marks the first message after a compaction boundary: the
	// client's history restarts here.
	Reset bool
	// Gaps counts malformed lines skipped among this message's records or
	// just before its first one: part of what was sent may be missing.
	Gaps int
	// Repaired is set when a repair inserted this message or changed its
	// blocks.
	Repaired bool
}

// Stats counts what loading a session skipped, merged and repaired.
type Stats struct {
	Lines     int // non-empty lines (JSONL) or history entries (traj) read
	Malformed int // lines that are not valid JSON objects: skipped
	Ignored   int // valid records that are not messages (summary, progress, system, ...)
	Synthetic int // assistant records made up by the client: skipped
	Sidechain int // subagent records skipped (Options.SkipSidechains)
	Merged    int // records merged into the previous message
	Resets    int // compaction boundaries
	Repairs   Repairs
}

// Repairs counts each kind of repair (see the package doc).
type Repairs struct {
	MissingUser     int
	MissingResult   int
	OrphanResult    int
	DuplicateResult int
	DuplicateID     int
	Reordered       int
	EmptyText       int
	EmptyMessage    int
	CacheControl    int
	BadBlock        int // content elements that are not objects, tool blocks without id/name/input: removed
	BadInput        int // SWE-agent tool arguments that are not a JSON object: wrapped
	// RedactedSignature counts thinking signatures a redaction marker
	// ("[REDACTED…]") stood in for, replaced by a hash of the thinking
	// text (equal texts, equal signatures).
	RedactedSignature int
}

// Total is the number of repairs of all kinds.
func (r Repairs) Total() int {
	return r.MissingUser + r.MissingResult + r.OrphanResult + r.DuplicateResult + r.DuplicateID +
		r.Reordered + r.EmptyText + r.EmptyMessage + r.CacheControl + r.BadBlock + r.BadInput + r.RedactedSignature
}

// Session is one conversation with its own request stream.
type Session struct {
	// ID identifies the session: the client's session id, with
	// "/agent-<agentId>" appended for a subagent; for SWE-agent the file
	// name without extension.
	ID string
	// ClientSessionID is the session id the client sent in
	// metadata.user_id (for a subagent, its parent's).
	ClientSessionID string
	Path            string
	Format          Format
	// Sidechain marks a subagent session; Parent is then the main
	// session's ID.
	Sidechain bool
	Parent    string
	// Model is the model of the first assistant message that names one.
	Model string
	// System is the agent's own system prompt (SWE-agent), "" for Claude
	// Code, whose system prompt transcripts do not hold.
	System   string
	Messages []Message
	Stats    Stats
	// Codex holds a Codex rollout's history and requests (Format Codex;
	// Messages is then empty); nil for other formats.
	Codex *CodexSession
	// Gemini holds a Gemini CLI session's histories and requests (Format
	// GeminiCLI; Messages is then empty); nil for other formats.
	Gemini *GeminiSession
}

// Requests returns the number of requests the session's client sent:
// one per assistant message (for Codex, one per recorded model turn).
func (s *Session) Requests() int {
	if s.Codex != nil {
		return len(s.Codex.Turns)
	}
	if s.Gemini != nil {
		return len(s.Gemini.Turns)
	}
	n := 0
	for i := range s.Messages {
		if s.Messages[i].Role == Assistant {
			n++
		}
	}
	return n
}

// Options controls loading.
type Options struct {
	// SkipSidechains drops subagent records instead of returning them as
	// sessions of their own.
	SkipSidechains bool
}

// LoadFile loads one file: ".traj" as SWE-agent, a JSONL file whose
// first record is a Codex session_meta (or whose name is rollout-*.jsonl)
// as a Codex rollout, a Gemini CLI chat recording (IsGeminiCLI; JSONL, or
// an older version's session-*.json) as such, anything else as Claude
// Code JSONL. A file that cannot be read is an error; a malformed line is
// not (see Stats).
func LoadFile(path string, opt Options) ([]*Session, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if strings.EqualFold(filepath.Ext(path), ".traj") {
		s, err := ParseSWEAgent(data, path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return []*Session{s}, nil
	}
	if IsCodex(path, data) {
		return []*Session{ParseCodex(data, path)}, nil
	}
	if IsGeminiCLI(path, data) {
		return []*Session{ParseGeminiCLI(data, path)}, nil
	}
	return ParseClaudeCode(data, path, opt), nil
}

// Load loads files and folders; a folder is walked for *.jsonl and *.traj
// files and Gemini CLI's session-*.json, in lexical order. Sessions come back in the order of their files.
func Load(paths []string, opt Options) ([]*Session, error) {
	var out []*Session
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		files := []string{p}
		if fi.IsDir() {
			files = files[:0]
			err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if !d.IsDir() && isSessionFile(path) {
					files = append(files, path)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			slices.Sort(files)
		}
		for _, f := range files {
			ss, err := LoadFile(f, opt)
			if err != nil {
				return nil, err
			}
			out = append(out, ss...)
		}
	}
	return out, nil
}

// IsCodex reports whether a JSONL file is a Codex rollout: its name is
// rollout-*.jsonl, or its first non-empty line is a record of type
// session_meta.
func IsCodex(path string, data []byte) bool {
	if b := filepath.Base(path); strings.HasPrefix(b, "rollout-") && strings.HasSuffix(strings.ToLower(b), ".jsonl") {
		return true
	}
	codex := false
	eachLine(data, func(_ int, line []byte) bool {
		codex = bytes.Contains(line, []byte(`"type":"session_meta"`)) && bytes.Contains(line, []byte(`"payload":`))
		return false
	})
	return codex
}

func isSessionFile(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".jsonl", ".traj":
		return true
	case ".json":
		return strings.HasPrefix(filepath.Base(p), "session-")
	}
	return false
}

// errNotTraj is returned for .traj input without a history array.
var errNotTraj = errors.New("not a SWE-agent trajectory: no history array")

func baseName(path string) string {
	b := filepath.Base(path)
	return strings.TrimSuffix(b, filepath.Ext(b))
}

// recordTime parses a record's "timestamp" (RFC 3339, as Claude Code and
// Codex write it); zero when it is missing or malformed.
func recordTime(raw []byte, s jsonscan.Span) time.Time {
	t, err := time.Parse(time.RFC3339Nano, str(raw, s))
	if err != nil {
		return time.Time{}
	}
	return t
}
