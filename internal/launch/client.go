// Package launch starts an agent client (Claude Code, Codex CLI, opencode,
// Gemini CLI, or any command) through ctxguard: it finds the ctxguard
// serving on the configured address or starts one, points the client at
// it for that one process (environment variables or command-line
// overrides; the user's own config files are never read or written),
// and passes signals, the standard streams and the exit status through.
package launch

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/ctxguard/ctxguard/proxy"
)

// Kind is a client whose way of naming its API base URL launch knows.
type Kind string

const (
	// Claude is Claude Code: ANTHROPIC_BASE_URL, the root URL.
	Claude Kind = "claude"
	// Codex is Codex CLI: the override -c openai_base_url="BASE/v1",
	// which points its built-in openai provider at ctxguard.
	Codex Kind = "codex"
	// Opencode is opencode: its built-in anthropic and openai providers
	// (the AI SDK's) read ANTHROPIC_BASE_URL and OPENAI_BASE_URL, both
	// ending in /v1.
	Opencode Kind = "opencode"
	// Gemini is Gemini CLI: GOOGLE_GEMINI_BASE_URL.
	Gemini Kind = "gemini"
	// Other is any other command: ANTHROPIC_BASE_URL (the root URL, as
	// the Anthropic SDKs want it) and OPENAI_BASE_URL (BASE/v1, as the
	// OpenAI SDKs want it).
	Other Kind = "other"
)

// KindOf names the client a command runs, from its file name
// ("/usr/local/bin/claude", "claude.exe" and "claude.cmd" are Claude).
func KindOf(command string) Kind {
	name := strings.ToLower(filepath.Base(command))
	for _, ext := range []string{".exe", ".cmd", ".bat", ".js"} {
		name = strings.TrimSuffix(name, ext)
	}
	switch k := Kind(name); k {
	case Claude, Codex, Opencode, Gemini:
		return k
	}
	return Other
}

// Setup is how a client is started so that it talks to ctxguard.
type Setup struct {
	// Args are the client's arguments (without the command itself), with
	// launch's overrides before the user's, so that an override the user
	// gives wins.
	Args []string
	// Env is the client's whole environment.
	Env []string
	// Vars lists the variables Env sets, in the order they were set, as
	// "NAME=value" (for the message launch prints and for tests).
	Vars []string
	// Warnings say what the user may not expect (a base URL of theirs that
	// is replaced, an auth token the client cannot send).
	Warnings []string
}

// Point returns the arguments and environment that make a client of kind
// k send its model requests to ctxguard at base ("http://HOST:PORT", no
// trailing slash), for this process only. args are the client's own
// arguments, environ the environment it would otherwise get. token is
// ctxguard's auth token ("" when none is required); only Claude Code can
// be made to send it (ANTHROPIC_CUSTOM_HEADERS).
func Point(k Kind, args, environ []string, base, token string) Setup {
	s := Setup{Args: slices.Clone(args), Env: slices.Clone(environ)}
	v1 := base + "/v1"
	switch k {
	case Claude:
		s.set("ANTHROPIC_BASE_URL", base, base)
	case Codex:
		// OPENAI_BASE_URL is no longer read by Codex CLI (0.169 sends to
		// api.openai.com with it set). A custom provider would work too,
		// but Codex files sessions by provider: `codex resume` would not
		// see the sessions started through ctxguard, nor the other way
		// round. openai_base_url keeps the built-in provider, its login
		// and its sessions; its WebSocket attempt gets 426 from ctxguard
		// and Codex goes on over HTTP at once.
		s.Args = append([]string{"-c", `openai_base_url="` + v1 + `"`}, s.Args...)
	case Opencode:
		// The AI SDK providers take base URLs that end in /v1. A
		// provider block in OPENCODE_CONFIG_CONTENT would do the same,
		// but it lists the provider's models even without a key for it,
		// which changes the model opencode picks by default.
		s.set("ANTHROPIC_BASE_URL", v1, base)
		s.set("OPENAI_BASE_URL", v1, base)
	case Gemini:
		// The CLI appends /v1beta/models/{model}:{method} to the root
		// URL. It sends there only when it signs in with an API key
		// (security.auth.selectedType "gemini-api-key"); a Google sign-in
		// talks to Code Assist, not the Gemini API, and bypasses ctxguard.
		s.set("GOOGLE_GEMINI_BASE_URL", base, base)
		if lookup(s.Env, "GEMINI_API_KEY") == "" {
			s.Warnings = append(s.Warnings, geminiKeyWarning)
		}
	default:
		s.set("ANTHROPIC_BASE_URL", base, base)
		s.set("OPENAI_BASE_URL", v1, base)
	}
	if token != "" {
		if k == Claude {
			h := proxy.TokenHeader + ": " + token
			if old := lookup(s.Env, "ANTHROPIC_CUSTOM_HEADERS"); old != "" {
				h = old + "\n" + h
			}
			s.Env = setEnv(s.Env, "ANTHROPIC_CUSTOM_HEADERS", h)
			s.Vars = append(s.Vars, "ANTHROPIC_CUSTOM_HEADERS="+proxy.TokenHeader+": (the auth token)")
		} else {
			s.Warnings = append(s.Warnings, "ctxguard requires its auth token; this client must send it in the "+proxy.TokenHeader+" header itself (ctxguard run adds it for Claude Code only)")
		}
	}
	return s
}

// geminiKeyWarning is said when Gemini CLI starts without GEMINI_API_KEY.
const geminiKeyWarning = "Gemini CLI goes through ctxguard only with a Gemini API key (GEMINI_API_KEY, or the key it keeps, with \"Use Gemini API key\" as its auth method); signed in with Google it talks to Code Assist directly"

// set sets the variable name to value in s.Env, with a warning when the
// environment had pointed it somewhere else than ctxguard (whose root URL
// is base): that base URL is no longer used.
func (s *Setup) set(name, value, base string) {
	if old := lookup(s.Env, name); old != "" && !strings.HasPrefix(old, base) {
		s.Warnings = append(s.Warnings, name+" was "+old+"; the client now sends to ctxguard, which forwards to its own upstream (set it with --upstream or upstreams in the config to keep that endpoint)")
	}
	s.Env = setEnv(s.Env, name, value)
	s.Vars = append(s.Vars, name+"="+value)
}

// lookup returns the value of the last entry for name in env ("" when
// there is none), as a process started with env would read it.
func lookup(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// setEnv returns env with every entry for name removed and name=value
// appended.
func setEnv(env []string, name, value string) []string {
	env = slices.DeleteFunc(env, func(e string) bool { return strings.HasPrefix(e, name+"=") })
	return append(env, name+"="+value)
}
