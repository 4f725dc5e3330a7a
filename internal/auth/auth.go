// Package auth derives from ctxguard's auth_token what checks a client:
// the token itself (the X-Ctxguard-Token header), the dashboard's sign-in
// cookie, and the signatures of blob links.
//
// Each is keyed by a secret of its own, an HMAC-SHA256 of the token with
// a label, so that none gives away the token or another: a cookie says
// nothing of the blob links' key, a signature nothing of the cookie's.
// Everything is a function of the token alone (and, for a cookie, of its
// expiry): every instance configured with the same token accepts the
// same cookies and signs a blob's link with the same bytes. Every check
// compares in constant time.
package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"strconv"
	"strings"
	"time"
)

// Keys are the secrets derived from one token. A nil *Keys is no token:
// every check fails.
type Keys struct {
	token  [sha256.Size]byte // SHA-256 of the token
	cookie []byte            // keys the sign-in cookie
	blob   []byte            // keys the blob links' signatures
}

// New derives the keys of token, or returns nil for "".
func New(token string) *Keys {
	if token == "" {
		return nil
	}
	return &Keys{
		token:  sha256.Sum256([]byte(token)),
		cookie: derive(token, "ctxguard/v1 dashboard sign-in cookie"),
		blob:   derive(token, "ctxguard/v1 blob link signature"),
	}
}

func derive(token, label string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(label))
	return m.Sum(nil)
}

// Token reports whether v is the token. The digests are compared, in
// constant time, so that neither the token nor its length leaks.
func (k *Keys) Token(v string) bool {
	if k == nil {
		return false
	}
	sum := sha256.Sum256([]byte(v))
	return subtle.ConstantTimeCompare(sum[:], k.token[:]) == 1
}

// CookieName is the dashboard's sign-in cookie.
const CookieName = "ctxguard_session"

// CookieLife is how long a sign-in lasts.
const CookieLife = 30 * 24 * time.Hour

// Cookie returns the value of a sign-in cookie issued at now: its expiry
// and an HMAC of it, "1.<unix seconds>.<base64url MAC>".
func (k *Keys) Cookie(now time.Time) string {
	payload := "1." + strconv.FormatInt(now.Add(CookieLife).Unix(), 10)
	return payload + "." + base64.RawURLEncoding.EncodeToString(k.mac(k.cookie, payload))
}

// CheckCookie reports whether v is a sign-in cookie of these keys that
// has not expired at now.
func (k *Keys) CheckCookie(v string, now time.Time) bool {
	if k == nil || len(v) > 128 {
		return false
	}
	for i := 0; i < len(v); i++ {
		// The decoder would skip line breaks: only the cookie's own
		// alphabet, so that one MAC has one spelling.
		if c := v[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	i := strings.LastIndexByte(v, '.')
	if i < 0 || !strings.HasPrefix(v, "1.") {
		return false
	}
	payload := v[:i]
	got, err := base64.RawURLEncoding.Strict().DecodeString(v[i+1:])
	if err != nil || !hmac.Equal(got, k.mac(k.cookie, payload)) {
		return false
	}
	exp, err := strconv.ParseInt(payload[2:], 10, 64)
	return err == nil && now.Unix() < exp
}

func (k *Keys) mac(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// SigLen is the length of a blob link's signature: 22 lowercase letters,
// about 103 bits of an HMAC-SHA256 of the blob's id. Letters only, like
// blob ids, since a model reads them.
const SigLen = 22

// SignBlob returns the signature of the link to blob id: it opens that
// blob, and only that, for as long as the blob lives.
func (k *Keys) SignBlob(id string) string {
	sum := k.mac(k.blob, id)
	var b [SigLen]byte
	for half := range 2 {
		v := binary.BigEndian.Uint64(sum[8*half:])
		for i := range SigLen / 2 {
			b[half*SigLen/2+i] = 'a' + byte(v%26)
			v /= 26
		}
	}
	return string(b[:])
}

// CheckBlob reports whether sig is the signature of the link to blob id.
func (k *Keys) CheckBlob(id, sig string) bool {
	if k == nil || len(sig) != SigLen {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(k.SignBlob(id)), []byte(sig)) == 1
}
