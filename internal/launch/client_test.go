package launch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestKindOf(t *testing.T) {
	for cmd, want := range map[string]Kind{
		"claude":                         Claude,
		"/usr/local/bin/claude":          Claude,
		"CLAUDE.EXE":                     Claude,
		"codex":                          Codex,
		"./node_modules/.bin/codex.js":   Codex,
		"opencode":                       Opencode,
		"gemini":                         Gemini,
		"claude-code":                    Other,
		"python3":                        Other,
		"/home/u/bin/my-agent":           Other,
		"node_modules/.bin/opencode.cmd": Opencode,
	} {
		if got := KindOf(cmd); got != want {
			t.Errorf("KindOf(%q) = %q, want %q", cmd, got, want)
		}
	}
}

func TestPoint(t *testing.T) {
	const base = "http://127.0.0.1:8787"
	env := []string{"PATH=/bin", "HOME=/home/u"}
	for _, tc := range []struct {
		name    string
		kind    Kind
		args    []string
		environ []string
		token   string
		want    Setup
	}{
		{
			name: "claude", kind: Claude, args: []string{"-p", "hi"}, environ: env,
			want: Setup{
				Args: []string{"-p", "hi"},
				Env:  []string{"PATH=/bin", "HOME=/home/u", "ANTHROPIC_BASE_URL=" + base},
				Vars: []string{"ANTHROPIC_BASE_URL=" + base},
			},
		},
		{
			// The user's own -c comes after launch's, so it wins.
			name: "codex", kind: Codex, args: []string{"exec", "-c", "model=o3", "hi"}, environ: env,
			want: Setup{
				Args: []string{"-c", `openai_base_url="` + base + `/v1"`, "exec", "-c", "model=o3", "hi"},
				Env:  env,
			},
		},
		{
			name: "opencode", kind: Opencode, args: []string{"run", "hi"}, environ: env,
			want: Setup{
				Args: []string{"run", "hi"},
				Env:  []string{"PATH=/bin", "HOME=/home/u", "ANTHROPIC_BASE_URL=" + base + "/v1", "OPENAI_BASE_URL=" + base + "/v1"},
				Vars: []string{"ANTHROPIC_BASE_URL=" + base + "/v1", "OPENAI_BASE_URL=" + base + "/v1"},
			},
		},
		{
			// The root URL: the CLI appends /v1beta/models/...
			name: "gemini", kind: Gemini, args: []string{"-p", "hi"}, environ: append(env, "GEMINI_API_KEY=k"),
			want: Setup{
				Args: []string{"-p", "hi"},
				Env:  []string{"PATH=/bin", "HOME=/home/u", "GEMINI_API_KEY=k", "GOOGLE_GEMINI_BASE_URL=" + base},
				Vars: []string{"GOOGLE_GEMINI_BASE_URL=" + base},
			},
		},
		{
			// Without an API key the CLI signs in with Google, which
			// bypasses ctxguard: said so.
			name: "gemini without a key", kind: Gemini, environ: env,
			want: Setup{
				Env:      []string{"PATH=/bin", "HOME=/home/u", "GOOGLE_GEMINI_BASE_URL=" + base},
				Vars:     []string{"GOOGLE_GEMINI_BASE_URL=" + base},
				Warnings: []string{geminiKeyWarning},
			},
		},
		{
			name: "other", kind: Other, args: []string{"app.py"}, environ: env,
			want: Setup{
				Args: []string{"app.py"},
				Env:  []string{"PATH=/bin", "HOME=/home/u", "ANTHROPIC_BASE_URL=" + base, "OPENAI_BASE_URL=" + base + "/v1"},
				Vars: []string{"ANTHROPIC_BASE_URL=" + base, "OPENAI_BASE_URL=" + base + "/v1"},
			},
		},
		{
			// A base URL of the user's is replaced, every copy of it, and
			// said so; one that already names ctxguard is not worth a word.
			name: "replaced", kind: Other,
			environ: []string{"ANTHROPIC_BASE_URL=https://gw.example/anthropic", "PATH=/bin", "ANTHROPIC_BASE_URL=https://gw.example/a2", "OPENAI_BASE_URL=" + base + "/v1"},
			want: Setup{
				Env:  []string{"PATH=/bin", "ANTHROPIC_BASE_URL=" + base, "OPENAI_BASE_URL=" + base + "/v1"},
				Vars: []string{"ANTHROPIC_BASE_URL=" + base, "OPENAI_BASE_URL=" + base + "/v1"},
				Warnings: []string{
					"ANTHROPIC_BASE_URL was https://gw.example/a2; the client now sends to ctxguard, which forwards to its own upstream (set it with --upstream or upstreams in the config to keep that endpoint)",
				},
			},
		},
		{
			// Claude Code sends the token in a header of its own; the
			// user's other custom headers stay.
			name: "claude token", kind: Claude, environ: []string{"ANTHROPIC_CUSTOM_HEADERS=X-Team: a"}, token: "0123456789abcdef",
			want: Setup{
				Env:  []string{"ANTHROPIC_BASE_URL=" + base, "ANTHROPIC_CUSTOM_HEADERS=X-Team: a\nX-Ctxguard-Token: 0123456789abcdef"},
				Vars: []string{"ANTHROPIC_BASE_URL=" + base, "ANTHROPIC_CUSTOM_HEADERS=X-Ctxguard-Token: (the auth token)"},
			},
		},
		{
			name: "codex token", kind: Codex, token: "0123456789abcdef",
			want: Setup{
				Args:     []string{"-c", `openai_base_url="` + base + `/v1"`},
				Warnings: []string{"ctxguard requires its auth token; this client must send it in the X-Ctxguard-Token header itself (ctxguard run adds it for Claude Code only)"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Point(tc.kind, tc.args, tc.environ, base, tc.token)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Point (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPointKeepsCallerSlices: Point works on copies.
func TestPointKeepsCallerSlices(t *testing.T) {
	args := []string{"exec", "hi"}
	env := []string{"ANTHROPIC_BASE_URL=https://gw.example", "PATH=/bin"}
	Point(Codex, args, env, "http://127.0.0.1:1", "")
	Point(Other, args, env, "http://127.0.0.1:1", "")
	if diff := cmp.Diff([]string{"exec", "hi"}, args); diff != "" {
		t.Errorf("args changed:\n%s", diff)
	}
	if diff := cmp.Diff([]string{"ANTHROPIC_BASE_URL=https://gw.example", "PATH=/bin"}, env); diff != "" {
		t.Errorf("environ changed:\n%s", diff)
	}
}

func TestAddrDir(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8787": "127.0.0.1-8787",
		"[::1]:8787":     "---1--8787",
		"localhost:80":   "localhost-80",
		"../../etc:1":    "..-..-etc-1",
	} {
		if got := addrDir(addr); got != want {
			t.Errorf("addrDir(%q) = %q, want %q", addr, got, want)
		}
	}
}
