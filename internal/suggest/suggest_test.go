package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "abc", 3}, {"listen", "listen", 0},
		{"lisen", "listen", 1},      // deletion
		{"upstreem", "upstream", 1}, // substitution
		{"prepaer", "prepare", 1},   // transposition
		{"trigerr", "trigger", 2},   // two edits
		{"kitten", "sitting", 3},    // the textbook case
		{"ünïcode", "unicode", 2},   // runes, not bytes
		{"ca", "abc", 3},            // optimal string alignment, not Damerau
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (not symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	keys := []string{"listen", "auth_token", "public_url", "upstreams", "routes", "log", "dry_run"}
	for _, tc := range []struct {
		word, want string
		ok         bool
	}{
		{"lisen", "listen", true},
		{"upstream", "upstreams", true},
		{"Listen", "listen", true}, // case differs only: still the hint
		{"dryrun", "dry_run", true},
		{"lg", "log", true},
		{"lgo", "log", true},
		{"xyz", "", false}, // nothing near
		{"authtokn", "auth_token", true},
		{"publicurlx", "public_url", true},
		{"compression", "", false}, // too far from every key
		{"listen", "", false},      // not a typo
	} {
		got, ok := Closest(tc.word, keys)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Closest(%q) = %q, %v; want %q, %v", tc.word, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := Closest("x", nil); ok {
		t.Error("a suggestion from no candidates")
	}
}
