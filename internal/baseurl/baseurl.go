// Package baseurl checks and prints the base URLs a configuration names
// (upstreams, routes, the summarizer's endpoint): the same rules and the
// same redaction wherever the key lives.
package baseurl

import (
	"fmt"
	"net/url"
	"strings"
)

// Redact returns u with any password replaced by "xxxxx" (and a user
// name alone kept); a string that does not parse as a URL is returned as
// "<unparsable URL>", since it may hold a secret.
func Redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "<unparsable URL>"
	}
	return p.Redacted()
}

// apiPaths are the paths clients append to a base URL, longest first;
// a base URL that ends in one of them would have it twice.
var apiPaths = []string{"/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1"}

// Check refuses a base URL (an upstream, a route, the summarizer's
// endpoint) whose path ends in /v1 or in a whole API path: clients send
// /v1/... themselves, and ctxguard appends that path to the base, so the
// upstream would get /v1/v1/messages. The error gives the URL to write.
//
// Refusing, rather than dropping the segment with a warning, keeps the
// configuration meaning what it says: `ctxguard config` prints what is in
// force, the fix is one edit, and no provider's base URL genuinely ends
// in the path its clients append.
func Check(key, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return nil // reported as not a URL
	}
	p := strings.TrimSuffix(u.Path, "/")
	for _, api := range apiPaths {
		if rest, ok := strings.CutSuffix(p, api); ok {
			fixed := *u
			fixed.Path, fixed.RawPath = rest, ""
			return fmt.Errorf("%s: %q ends in %s, which clients add themselves (a request for /v1/messages would reach %s/v1/messages); write %s",
				key, Redact(raw), api, strings.TrimSuffix(Redact(raw), "/"), Redact(fixed.String()))
		}
	}
	return nil
}
