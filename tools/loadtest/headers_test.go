package loadtest

import (
	"net/http"
	"testing"

	"github.com/ctxguard/ctxguard/session"
)

// TestClientHeaders: every client sends a session header ctxguard knows,
// unless the run sends none (Options.NoSessionHeader); the other headers
// stay.
func TestClientHeaders(t *testing.T) {
	for _, p := range []Protocol{Anthropic, Responses, Chat} {
		with, without := http.Header{}, http.Header{}
		clientHeaders(with, p, "s-1")
		clientHeaders(without, p, "")
		found := 0
		for _, name := range session.Headers {
			if with.Get(name) == "s-1" {
				found++
			}
			if without.Get(name) != "" {
				t.Errorf("%s: session header %s sent without a session", p, name)
			}
		}
		if found != 1 || len(with) != len(without)+1 {
			t.Errorf("%s: %d session headers; %d headers with a session, %d without", p, found, len(with), len(without))
		}
	}
}
