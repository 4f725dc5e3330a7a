package auth

import (
	"strings"
	"testing"
	"time"
)

const token = "s3cret-token-for-the-auth-tests"

var now = time.Date(2026, 11, 4, 10, 0, 0, 0, time.UTC)

func TestNoToken(t *testing.T) {
	var k *Keys
	if New("") != nil {
		t.Fatal("keys for no token")
	}
	if k.Token("") || k.CheckCookie("1.9999999999.x", now) || k.CheckBlob("abcdefghijklm", strings.Repeat("a", SigLen)) {
		t.Error("a nil Keys accepted something")
	}
}

func TestToken(t *testing.T) {
	k := New(token)
	for _, tc := range []struct {
		v    string
		want bool
	}{{token, true}, {token + " ", false}, {"", false}, {strings.ToUpper(token), false}, {token[:10], false}} {
		if got := k.Token(tc.v); got != tc.want {
			t.Errorf("Token(%q) = %v", tc.v, got)
		}
	}
}

// TestCookie: a cookie is accepted until it expires, by the keys of the
// same token only (another instance with that token too), and not once
// tampered with; it does not hold the token.
func TestCookie(t *testing.T) {
	k := New(token)
	c := k.Cookie(now)
	if strings.Contains(c, token) {
		t.Fatalf("the cookie %q holds the token", c)
	}
	if c != New(token).Cookie(now) {
		t.Error("two instances with one token issue different cookies")
	}
	for _, tc := range []struct {
		name string
		v    string
		at   time.Time
		want bool
	}{
		{"fresh", c, now, true},
		{"another instance", c, now.Add(time.Hour), true},
		{"just before expiry", c, now.Add(CookieLife - time.Second), true},
		{"expired", c, now.Add(CookieLife), false},
		{"another token", New(token + "x").Cookie(now), now, false},
		{"expiry moved", strings.Replace(c, "1.1", "1.2", 1), now, false},
		{"MAC changed", flip(c, len(c)-10), now, false},
		{"MAC's padding bits changed", flip(c, len(c)-1), now, false},
		{"no MAC", c[:strings.LastIndexByte(c, '.')], now, false},
		{"empty", "", now, false},
		{"the token", token, now, false},
	} {
		if got := k.CheckCookie(tc.v, tc.at); got != tc.want {
			t.Errorf("%s: CheckCookie(%q) = %v", tc.name, tc.v, got)
		}
	}
}

// flip changes the character at i of a base64url string to another one
// of its alphabet.
func flip(s string, i int) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// TestSignBlob: a signature is deterministic (no time in it), letters
// only, of SigLen; it opens its own blob only, under its own token.
func TestSignBlob(t *testing.T) {
	k := New(token)
	a, b := "abcdefghijklm", "abcdefghijkln"
	sa := k.SignBlob(a)
	if sa != New(token).SignBlob(a) {
		t.Fatal("two instances with one token sign a blob differently")
	}
	if len(sa) != SigLen || strings.Trim(sa, "abcdefghijklmnopqrstuvwxyz") != "" {
		t.Errorf("signature %q: want %d lowercase letters", sa, SigLen)
	}
	if sa == k.SignBlob(b) || sa == New(token+"x").SignBlob(a) {
		t.Error("a signature does not depend on the blob and the token")
	}
	tampered := []byte(sa)
	tampered[5] = 'a' + (tampered[5]-'a'+1)%26
	for _, tc := range []struct {
		id, sig string
		want    bool
	}{
		{a, sa, true}, {b, sa, false}, {a, string(tampered), false}, {a, sa[:SigLen-1], false},
		{a, sa + "a", false}, {a, "", false}, {a, strings.ToUpper(sa), false},
	} {
		if got := k.CheckBlob(tc.id, tc.sig); got != tc.want {
			t.Errorf("CheckBlob(%q, %q) = %v", tc.id, tc.sig, got)
		}
	}
}

// FuzzCheckCookie: whatever a browser sends as the cookie, the check
// answers without a panic, and accepts only what Cookie issued.
func FuzzCheckCookie(f *testing.F) {
	k := New(token)
	good := k.Cookie(now)
	for _, s := range []string{good, "", "1.", "1..", "1.x.y", "1.-5.AAAA", "2.9999999999." + good[strings.LastIndexByte(good, '.')+1:]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if k.CheckCookie(v, now) && v != good {
			t.Fatalf("accepted %q", v)
		}
	})
}
