// Package sessiongen generates realistic Claude Code sessions from a random
// source, for property tests and fuzzing of the passes.
//
// A generated session is written as the JSONL transcript Claude Code keeps
// (one record a line, an assistant reply one content block a record,
// parallel tool results one record each, with the client's bookkeeping
// records in between) and loaded back with transcript.ParseClaudeCode, so
// its request stream comes from transcript.Builder exactly as for a real
// session: the moving cache marker, the string re-encoding of a one-text
// user message, the reminder block, the role "system" message at
// messages[1].
//
// What a session holds: user prompts (some with a pasted image before
// their text, as Claude Code sends it, some sent while tools ran); assistant turns with optional thinking (with a
// signature) or redacted thinking, optional text, and 1-3 parallel tool
// calls of Bash, Read, Write (with large file content), Edit, TodoWrite,
// Grep, Glob, WebFetch and MCP tools; tool results from empty to
// MaxResult characters, some errors, some rejected, some arrays of text
// and image parts, Bash output over 30K characters replaced by Claude
// Code's <persisted-output> note; text-only turns that end a turn; now and
// then a model switch. Strings are escaped as JSON.stringify does, or (for
// some sessions) with every non-ASCII character as a \u escape; texts mix
// ASCII, accents, CJK, emoji, tabs, ANSI escapes, quotes and backslashes.
//
// Generation is deterministic: the same source values and Options give the
// same bytes. Every choice is drawn from the *rand.Rand, so a fuzzer can
// drive it through NewSource.
package sessiongen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/ctxguard/ctxguard/tools/transcript"
)

// Options shape a generated session. The zero value is usable.
type Options struct {
	// Turns is the number of assistant messages, which is the number of
	// requests; 0 picks 4 to 40 at random.
	Turns int
	// MaxResult caps one tool result (and one Write content) in
	// characters; 0 means 120,000.
	MaxResult int
	// FullProfile sends Claude Code's full-size system prompt and tool
	// schemas (transcript.DefaultProfile, about 10K tokens a request).
	// Otherwise a compact profile of a few hundred tokens is used, so
	// small thresholds measure the conversation and not the profile.
	FullProfile bool
	// TrailingImages puts a pasted image after the prompt's text in half
	// the prompts that have one, so it can be the block that carries the
	// moving cache marker (SDK clients do that). Claude Code itself puts
	// pasted images first.
	TrailingImages bool
	// Protocol is the API the session's requests are written for
	// (transcript.BuildOptions.Protocol): "" or "anthropic" as Claude Code
	// sends them, "responses" or "chat" for the same session rendered as
	// OpenAI requests, so one generator drives the tests of every
	// protocol.
	Protocol string
}

// Session is one generated session.
type Session struct {
	// JSONL is the transcript as Claude Code writes it.
	JSONL []byte
	// Session is JSONL loaded by transcript.ParseClaudeCode (the main
	// session; generated sessions have no subagents).
	Session *transcript.Session
	// Build holds the client profile the session's requests are built
	// with (with or without the role "system" message, and so on).
	Build transcript.BuildOptions
}

// Requests builds the session's request stream, oldest first: request k
// holds every message before assistant message k.
func (s *Session) Requests() ([]*transcript.Request, error) {
	b, err := transcript.NewBuilder(s.Session, s.Build)
	if err != nil {
		return nil, err
	}
	out := make([]*transcript.Request, b.Len())
	for k := range out {
		if out[k], err = b.Request(k); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Bodies returns the bodies of the session's request stream (Requests),
// oldest first.
func (s *Session) Bodies() ([][]byte, error) {
	reqs, err := s.Requests()
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(reqs))
	for k, r := range reqs {
		out[k] = r.Body
	}
	return out, nil
}

// Generate makes one session from r. It fails only if the transcript it
// wrote does not load as exactly one session, which is a bug here.
func Generate(r *rand.Rand, opt Options) (*Session, error) {
	g := &gen{r: r, opt: opt}
	if g.opt.MaxResult <= 0 {
		g.opt.MaxResult = 120_000
	}
	if g.opt.Turns <= 0 {
		g.opt.Turns = 4 + r.IntN(37)
	}
	g.ascii = r.IntN(7) == 0
	g.sid = g.uuid()
	g.model = models[r.IntN(len(models))]
	g.session()
	ss := transcript.ParseClaudeCode(g.out, "generated-"+g.sid+".jsonl", transcript.Options{})
	if len(ss) != 1 {
		return nil, fmt.Errorf("sessiongen: transcript loaded as %d sessions", len(ss))
	}
	s := &Session{JSONL: g.out, Session: ss[0], Build: transcript.BuildOptions{Profile: g.profile(), Protocol: opt.Protocol}}
	if n := s.Session.Requests(); n != g.opt.Turns {
		return nil, fmt.Errorf("sessiongen: %d requests loaded, %d generated", n, g.opt.Turns)
	}
	return s, nil
}

var models = []string{"claude-opus-4-5-20251101", "claude-sonnet-4-5-20250929", "claude-opus-4-8", "claude-haiku-4-5-20251001"}

type gen struct {
	r     *rand.Rand
	opt   Options
	ascii bool // escape every non-ASCII character
	sid   string
	model string
	out   []byte
	prev  string // uuid of the previous record
	clock int    // seconds since the session started
	nid   int
}

// session writes the records of a whole session.
func (g *gen) session() {
	g.noise()
	g.userPrompt(true)
	for turn := 0; turn < g.opt.Turns; turn++ {
		if g.r.IntN(60) == 0 {
			g.model = models[g.r.IntN(len(models))] // /model mid-session
		}
		last := turn == g.opt.Turns-1
		calls := g.assistant(last)
		if last {
			break
		}
		if len(calls) == 0 {
			g.userPrompt(false)
			continue
		}
		for _, c := range calls {
			g.toolResult(c)
			if g.r.IntN(4) == 0 {
				g.noise()
			}
		}
		switch g.r.IntN(25) {
		case 0:
			// The user typed while the tools ran: sent with the results.
			g.userRecord(g.textContent(g.prompt()))
		case 1:
			g.userRecord(g.textContent("[Request interrupted by user]"))
		}
	}
}

// call is a tool call whose result is still to be written.
type call struct {
	id, name string
	input    map[string]string // decoded string inputs the result refers to
}

// assistant writes one assistant message, one record a block, and returns
// its tool calls. The last message of a session is short: it is the
// answer to the last request, whose content does not matter.
func (g *gen) assistant(last bool) []call {
	mid := "msg_01" + g.base62(22)
	var blocks [][]byte
	switch n := g.r.IntN(10); {
	case n < 5:
		sig := g.base64(120 + g.r.IntN(800))
		blocks = append(blocks, g.obj("type", q("thinking"), "thinking", g.q(g.prose(g.size(0, 6000))), "signature", q(sig)))
	case n == 5:
		blocks = append(blocks, g.obj("type", q("redacted_thinking"), "data", q(g.base64(200+g.r.IntN(1500)))))
	}
	var calls []call
	endTurn := g.r.IntN(6) == 0
	if last {
		endTurn = g.r.IntN(2) == 0
	}
	if g.r.IntN(3) > 0 || endTurn {
		blocks = append(blocks, g.obj("type", q("text"), "text", g.q(g.text(g.size(1, 3000)))))
	}
	if !endTurn {
		n := 1
		if g.r.IntN(4) == 0 {
			n += 1 + g.r.IntN(2)
		}
		for range n {
			c, input := g.toolCall()
			calls = append(calls, c)
			blocks = append(blocks, g.obj("type", q("tool_use"), "id", q(c.id), "name", q(c.name), "input", input))
		}
	}
	for i, b := range blocks {
		stop := []byte("null")
		if i == len(blocks)-1 {
			stop = q("end_turn")
			if len(calls) > 0 {
				stop = q("tool_use")
			}
		}
		msg := g.obj("model", q(g.model), "id", q(mid), "type", q("message"), "role", q("assistant"),
			"content", append(append([]byte{'['}, b...), ']'), "stop_reason", stop, "stop_sequence", []byte("null"),
			"usage", g.obj("input_tokens", num(3+g.r.IntN(10)), "cache_creation_input_tokens", num(g.r.IntN(5000)),
				"cache_read_input_tokens", num(g.r.IntN(100000)), "output_tokens", num(1+g.r.IntN(2000))))
		g.record("assistant", msg, "requestId", q("req_011"+g.base62(21)))
	}
	return calls
}

// toolCall draws a tool and its input object.
func (g *gen) toolCall() (call, []byte) {
	c := call{id: "toolu_01" + g.base62(22), input: map[string]string{}}
	var in []byte
	switch n := g.r.IntN(100); {
	case n < 30:
		c.name = "Bash"
		cmd := bashCommands[g.r.IntN(len(bashCommands))]
		if g.r.IntN(8) == 0 {
			cmd = "cat > /tmp/script.sh <<'EOF'\n" + g.code(g.size(200, 4000)) + "\nEOF\nbash /tmp/script.sh"
		}
		c.input["command"] = cmd
		if g.r.IntN(5) == 0 {
			in = g.obj("command", g.q(cmd), "description", g.q(g.phrase()), "timeout", num(120000))
		} else {
			in = g.obj("command", g.q(cmd), "description", g.q(g.phrase()))
		}
	case n < 50:
		c.name = "Read"
		p := g.path()
		c.input["file_path"] = p
		if g.r.IntN(4) == 0 {
			in = g.obj("file_path", g.q(p), "offset", num(1+g.r.IntN(500)), "limit", num(100+g.r.IntN(400)))
		} else {
			in = g.obj("file_path", g.q(p))
		}
	case n < 58:
		c.name = "Write"
		p := g.path()
		c.input["file_path"] = p
		in = g.obj("file_path", g.q(p), "content", g.q(g.code(g.size(100, min(g.opt.MaxResult, 40000)))))
	case n < 70:
		c.name = "Edit"
		p := g.path()
		c.input["file_path"] = p
		if g.r.IntN(3) == 0 {
			in = g.obj("file_path", g.q(p), "old_string", g.q(g.code(g.size(10, 2500))), "new_string", g.q(g.code(g.size(10, 3000))), "replace_all", []byte("false"))
		} else {
			in = g.obj("file_path", g.q(p), "old_string", g.q(g.code(g.size(10, 2500))), "new_string", g.q(g.code(g.size(10, 3000))))
		}
	case n < 76:
		c.name = "TodoWrite"
		var todos [][]byte
		for range 1 + g.r.IntN(8) {
			s := []string{"pending", "in_progress", "completed"}[g.r.IntN(3)]
			ph := g.phrase()
			todos = append(todos, g.obj("content", g.q(ph), "status", q(s), "activeForm", g.q(ph+"ing")))
		}
		in = g.obj("todos", join(todos))
	case n < 84:
		c.name = "Grep"
		pat := []string{"func (p \\*Pass)", "TODO|FIXME", "cache_control", "import \"", "\\bctx\\b"}[g.r.IntN(5)]
		in = g.obj("pattern", g.q(pat), "path", g.q(g.dir()), "output_mode", q("content"), "-n", []byte("true"))
	case n < 88:
		c.name = "Glob"
		in = g.obj("pattern", q("**/*.go"))
	case n < 93:
		c.name = "WebFetch"
		u := "https://" + []string{"pkg.go.dev/net/http", "docs.anthropic.com/en/docs/build-with-claude/prompt-caching", "go.dev/doc/effective_go", "github.com/golang/go/issues/40747"}[g.r.IntN(4)]
		c.input["url"] = u
		in = g.obj("url", q(u), "prompt", g.q(g.phrase()))
	default:
		c.name = []string{"mcp__playwright__browser_snapshot", "mcp__playwright__browser_take_screenshot", "mcp__github__get_file_contents"}[g.r.IntN(3)]
		if c.name == "mcp__github__get_file_contents" {
			in = g.obj("owner", q("ctxguard"), "repo", q("ctxguard"), "path", g.q(strings.TrimPrefix(g.path(), "/home/dev/proj/")))
		} else {
			in = []byte("{}")
		}
	}
	return c, in
}

var bashCommands = []string{
	"go test ./...", "go build ./... && go vet ./...", "ls -la", "git status", "git diff", "git log --oneline -20",
	"make test 2>&1 | tail -100", "npm run build", "cat /etc/os-release", "find . -name '*.go' | head -50",
	"grep -rn \"TODO\" --include=*.go .", "docker ps", "python3 -m pytest -x -q", "curl -s localhost:8787/healthz",
}

// toolResult writes the user record answering c.
func (g *gen) toolResult(c call) {
	content, isErr := g.result(c)
	var blk []byte
	if isErr {
		blk = g.obj("tool_use_id", q(c.id), "type", q("tool_result"), "content", content, "is_error", []byte("true"))
	} else {
		blk = g.obj("tool_use_id", q(c.id), "type", q("tool_result"), "content", content)
	}
	g.record("user", g.obj("role", q("user"), "content", append(append([]byte{'['}, blk...), ']')),
		"toolUseResult", g.obj("interrupted", []byte("false"), "isImage", []byte("false")))
}

// result draws the content of c's result (a JSON value) and whether it is
// an error.
func (g *gen) result(c call) ([]byte, bool) {
	switch n := g.r.IntN(100); {
	case n < 4:
		return q("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed."), true
	case n < 10:
		return g.q("<tool_use_error>" + []string{"File does not exist.", "String to replace not found in file.\nString: " + g.code(g.size(10, 400)), "InputValidationError: " + g.phrase()}[g.r.IntN(3)] + "</tool_use_error>"), true
	}
	max := g.opt.MaxResult
	switch c.name {
	case "Bash":
		out := g.logs(g.size(0, min(max, 60000)))
		if len(out) > 30000 {
			out = "<persisted-output>\nOutput too large (" + strconv.Itoa(len(out)/1024) + "KB). Full output saved to: /home/dev/.claude/projects/-home-dev-proj/" + g.sid + "/tool-results/" + c.id + ".txt\n\nPreview (first 2KB):\n" + cut(out, 2000) + "\n...\n</persisted-output>"
		}
		if g.r.IntN(10) == 0 {
			return g.q("Exit code 1\n" + out), true
		}
		return g.q(out), false
	case "Read":
		return g.q(g.numbered(g.code(g.size(20, max)))), false
	case "Write":
		return g.q("File created successfully at: " + c.input["file_path"]), false
	case "Edit":
		return g.q("The file " + c.input["file_path"] + " has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n" + g.numbered(g.code(g.size(50, 3000)))), false
	case "TodoWrite":
		return q("Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress. Please proceed with the current tasks if applicable"), false
	case "Grep":
		return g.q(g.grep(g.size(0, min(max, 20000)))), false
	case "Glob":
		var b strings.Builder
		for range g.r.IntN(200) {
			b.WriteString(g.path() + "\n")
		}
		return g.q(b.String()), false
	case "WebFetch":
		return g.q(g.markdown(g.size(200, max))), false
	case "mcp__playwright__browser_take_screenshot":
		img := g.obj("type", q("image"), "source", g.obj("type", q("base64"), "media_type", q("image/png"), "data", q("iVBORw0KGgo"+g.base64(g.size(500, min(max, 80000))))))
		return join([][]byte{g.obj("type", q("text"), "text", g.q("Took the viewport screenshot and saved it as /tmp/page.png")), img}), false
	case "mcp__playwright__browser_snapshot":
		return join([][]byte{g.obj("type", q("text"), "text", g.q(g.snapshot(g.size(100, max))))}), false
	default:
		parts := [][]byte{g.obj("type", q("text"), "text", g.q(g.code(g.size(50, max/2))))}
		if g.r.IntN(2) == 0 {
			parts = append(parts, g.obj("type", q("text"), "text", g.q(g.phrase())))
		}
		return join(parts), false
	}
}

// userPrompt writes a user prompt: mostly a plain string, sometimes with a
// pasted image, sometimes a caveat record before it.
func (g *gen) userPrompt(first bool) {
	if !first && g.r.IntN(15) == 0 {
		g.userRecord(g.q("<local-command-stdout>" + g.phrase() + "</local-command-stdout>"))
	}
	text := g.prompt()
	switch g.r.IntN(12) {
	case 0:
		img := g.obj("type", q("image"), "source", g.obj("type", q("base64"), "media_type", q("image/png"), "data", q(g.base64(g.size(300, 20000)))))
		txt := g.obj("type", q("text"), "text", g.q(text))
		if g.opt.TrailingImages && g.r.IntN(2) == 0 {
			g.userRecord(join([][]byte{txt, img}))
		} else {
			g.userRecord(join([][]byte{img, txt}))
		}
	case 1:
		g.userRecord(g.textContent(text))
	default:
		g.userRecord(g.q(text))
	}
}

func (g *gen) textContent(s string) []byte {
	return join([][]byte{g.obj("type", q("text"), "text", g.q(s))})
}

func (g *gen) userRecord(content []byte) {
	g.record("user", g.obj("role", q("user"), "content", content))
}

// record writes one transcript line of type typ carrying message msg,
// with Claude Code's bookkeeping members around it.
func (g *gen) record(typ string, msg []byte, extra ...any) {
	u := g.uuid()
	parent := []byte("null")
	if g.prev != "" {
		parent = q(g.prev)
	}
	kv := []any{"parentUuid", parent, "isSidechain", []byte("false"), "userType", q("external"), "cwd", q("/home/dev/proj"),
		"sessionId", q(g.sid), "version", q("2.1.197"), "gitBranch", q("main")}
	if typ == "assistant" {
		kv = append(kv, "message", msg)
		kv = append(kv, extra...)
		kv = append(kv, "type", q(typ))
	} else {
		kv = append(kv, "type", q(typ), "message", msg)
		kv = append(kv, extra...)
	}
	kv = append(kv, "uuid", q(u), "timestamp", q(g.timestamp()))
	g.out = append(g.out, g.obj(kv...)...)
	g.out = append(g.out, '\n')
	g.prev = u
}

// noise writes a record the loader ignores.
func (g *gen) noise() {
	var rec []byte
	switch g.r.IntN(4) {
	case 0:
		rec = g.obj("type", q("file-history-snapshot"), "messageId", q(g.uuid()), "snapshot", g.obj("messageId", q(g.uuid()), "trackedFileBackups", []byte("{}"), "timestamp", q(g.timestamp())), "isSnapshotUpdate", []byte("false"))
	case 1:
		rec = g.obj("type", q("progress"), "data", g.obj("type", q("hook_progress"), "hookEvent", q("PostToolUse")), "sessionId", q(g.sid), "uuid", q(g.uuid()), "timestamp", q(g.timestamp()))
	case 2:
		rec = g.obj("type", q("system"), "subtype", q("stop_hook_summary"), "content", g.q(g.phrase()), "sessionId", q(g.sid), "uuid", q(g.uuid()), "timestamp", q(g.timestamp()))
	default:
		rec = g.obj("type", q("summary"), "summary", g.q(g.phrase()), "leafUuid", q(g.uuid()))
	}
	g.out = append(g.out, rec...)
	g.out = append(g.out, '\n')
}

// profile returns the client's profile for the session: with or without
// the role "system" message (at messages[1], or later) and the reminder.
func (g *gen) profile() *transcript.Profile {
	p := transcript.DefaultProfile()
	if !g.opt.FullProfile {
		p.System = [3]string{"x-anthropic-billing-header: cc_version=2.1.197; cc_entrypoint=cli",
			"You are Claude Code, Anthropic's official CLI for Claude.",
			"You are an interactive CLI tool that helps users with software engineering tasks.\n\n# Tone\nBe concise. Use the tools.\n"}
		p.SystemMessage = "# Environment\nWorking directory: /home/dev/proj\nPlatform: linux\nIs a git repository: true\n"
		p.Reminder = "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# claudeMd\nRun go test before committing.\n</system-reminder>"
		p.Tools = []byte(`[{"name":"Bash","description":"Runs a shell command.","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}},` +
			`{"name":"Read","description":"Reads a file.","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}},` +
			`{"name":"Write","description":"Writes a file.","input_schema":{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}}}}]`)
	}
	if g.r.IntN(6) == 0 {
		p.SystemMessage = "" // no role "system" message
	}
	if g.r.IntN(6) == 0 {
		p.Reminder = ""
	}
	if g.r.IntN(4) == 0 {
		p.Effort = ""
	}
	return &p
}

// Sizes and texts.

// size draws a length in [lo, hi], log-uniformly, so small and huge
// values are both common.
func (g *gen) size(lo, hi int) int {
	if hi <= lo {
		return lo
	}
	f := math.Exp(g.r.Float64() * math.Log(float64(hi-lo+1)))
	return min(hi, lo+int(f)-1)
}
