// Package redisstore is a store.Store on a Redis server, shared by every
// ctxguard instance that points at it: blobs, records (calibration,
// session statistics, learned limits) and write-once decisions
// (compaction summaries, digests) are seen by all of them.
//
// Key layout, under Options.Prefix (default "ctxguard:"):
//
//	<prefix>blob:<id>    a blob (13 lowercase letters, store.ID)
//	<prefix>rec:<key>    a record; the key's bytes as given (Redis keys
//	                     are binary safe)
//
// The store reads and writes only keys it names, one at a time: it never
// scans, flushes or deletes other keys, so several stores (or other
// applications) may share a server and a database under other prefixes.
//
// Expiry is Redis's own: every key is written with a TTL — a blob lives
// TTL + store.RefreshInterval(TTL) after its last PutBlob or TouchBlob, a
// record TTL after its last Put, Get or PutIfAbsent — and Sweep has
// nothing to do. A TTL <= 0 writes keys without expiry.
//
// Every call is bounded: by its context, and by Options.Timeout as a
// whole (the client's one retry included) and on each network operation
// (dial, read, write), so a server that stops answering yields an error
// within Options.Timeout, never a hang.
package redisstore

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ctxguard/ctxguard/store"
)

// DefaultPrefix namespaces ctxguard's keys.
const DefaultPrefix = "ctxguard:"

// DefaultMaxBlob is the largest blob stored unless Options.MaxBlob says
// otherwise: 16 MiB, since Redis holds values in memory.
const DefaultMaxBlob = 16 << 20

// DefaultTimeout bounds each network operation unless Options.Timeout
// says otherwise.
const DefaultTimeout = 5 * time.Second

// ErrAuth is matched (errors.Is) by errors the server gives for a missing
// or wrong password (NOAUTH, WRONGPASS).
var ErrAuth = errors.New("redis: authentication failed")

// Options configure a Store.
type Options struct {
	// URL is the server: redis://[user@]host[:port][/db], or rediss://
	// for TLS. It must not carry a password (use Password) nor query
	// parameters. Port 6379 and database 0 are the defaults.
	URL string
	// Password authenticates to the server (with the URL's user name,
	// if any); empty sends none.
	Password string
	// Prefix starts every key; "" means DefaultPrefix.
	Prefix string
	// TTL: see the package comment. <= 0 writes keys without expiry.
	TTL time.Duration
	// MaxBlob is the largest blob stored, in bytes; <= 0 means
	// DefaultMaxBlob. Larger blobs are refused with an error matching
	// store.ErrTooLarge.
	MaxBlob int64
	// Timeout bounds each call, and each dial, read and write; <= 0
	// means DefaultTimeout.
	Timeout time.Duration
	// RootCAs are the CAs a rediss:// server's certificate must chain
	// to; nil means the system's (on Linux, SSL_CERT_FILE and
	// SSL_CERT_DIR choose them).
	RootCAs *x509.CertPool
}

// Store is a store.Store on a Redis server. It does not implement
// store.Files: its blobs are served through ctxguard's blob endpoint.
// Safe for concurrent use.
type Store struct {
	c       *redis.Client
	url     string // redacted, for messages
	prefix  string
	ttl     time.Duration
	maxBlob int64
	timeout time.Duration // bounds each call as a whole
}

var _ store.Store = (*Store)(nil)

// CheckURL reports what is wrong with u as a Store's URL, or nil.
func CheckURL(u string) error {
	p, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	if p.Scheme != "redis" && p.Scheme != "rediss" {
		return fmt.Errorf("scheme %q: use redis:// or rediss:// (TLS); Sentinel and Cluster URLs are not supported", p.Scheme)
	}
	if _, ok := p.User.Password(); ok {
		return errors.New("carries a password; remove it from the URL and give it in the environment instead")
	}
	if p.Hostname() == "" {
		return errors.New("no host")
	}
	if p.RawQuery != "" || p.ForceQuery || p.Fragment != "" {
		return errors.New("query parameters and fragments are not supported")
	}
	if _, err := redis.ParseURL(u); err != nil {
		return err
	}
	return nil
}

// Redact returns u without its password, if it has one (for messages).
func Redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "<unparsable URL>"
	}
	return p.Redacted()
}

// New returns a Store for o without contacting the server (the first
// call connects). Open also checks that the server answers.
func New(o Options) (*Store, error) {
	if err := CheckURL(o.URL); err != nil {
		return nil, fmt.Errorf("redis store %s: %w", Redact(o.URL), err)
	}
	ro, err := redis.ParseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("redis store %s: %w", Redact(o.URL), err)
	}
	ro.Password = o.Password
	if ro.TLSConfig != nil && o.RootCAs != nil {
		ro.TLSConfig.RootCAs = o.RootCAs
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ro.DialTimeout = timeout
	ro.ReadTimeout = timeout
	ro.WriteTimeout = timeout
	ro.PoolTimeout = timeout
	ro.ContextTimeoutEnabled = true
	ro.MaxRetries = 1 // once, on a connection the server closed
	ro.DialerRetries = 2
	ro.DisableIdentity = true
	s := &Store{c: redis.NewClient(ro), url: Redact(o.URL), prefix: o.Prefix, ttl: o.TTL, maxBlob: o.MaxBlob, timeout: timeout}
	if s.prefix == "" {
		s.prefix = DefaultPrefix
	}
	if s.maxBlob <= 0 {
		s.maxBlob = DefaultMaxBlob
	}
	return s, nil
}

// Open returns a Store for o once the server has answered a PING within
// ctx: an unreachable server, or a refused password, is an error naming
// the URL (without credentials).
func Open(ctx context.Context, o Options) (*Store, error) {
	s, err := New(o)
	if err != nil {
		return nil, err
	}
	if err := s.Ping(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// String names the store: its URL without credentials, and its prefix.
func (s *Store) String() string { return s.url + " (prefix " + s.prefix + ")" }

func (s *Store) blobKey(id string) string { return s.prefix + "blob:" + id }
func (s *Store) recKey(key string) string { return s.prefix + "rec:" + key }
func (s *Store) blobLife() time.Duration  { return s.ttl + store.RefreshInterval(s.ttl) }
func (s *Store) expires() bool            { return s.ttl > 0 }
func (s *Store) life(blob bool) time.Duration {
	if !s.expires() {
		return 0
	}
	if blob {
		return s.blobLife()
	}
	return s.ttl
}

// fail wraps a client error: the URL for context, ErrAuth for a refused
// password.
func (s *Store) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "NOAUTH") || strings.HasPrefix(msg, "WRONGPASS") {
		return fmt.Errorf("redis store %s: %s: %w: %v", s.url, op, ErrAuth, err)
	}
	return fmt.Errorf("redis store %s: %s: %w", s.url, op, err)
}

// bound returns ctx bounded by the store's timeout: a call takes at most
// that long as a whole, the client's retry of a timed-out read included.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// setLua sets KEYS[1] to ARGV[1] with a life of ARGV[2] ms (none if
// <= 0), in the scripts below.
const setLua = `
local ms = tonumber(ARGV[2])
local function set()
  if ms > 0 then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ms)
  else
    redis.call('SET', KEYS[1], ARGV[1])
  end
end
`

// putBlob sets a blob unless present and refreshes its TTL either way.
var putBlob = redis.NewScript(setLua + `
if redis.call('EXISTS', KEYS[1]) == 1 then
  if ms > 0 then redis.call('PEXPIRE', KEYS[1], ms) end
  return 0
end
set()
return 1
`)

// PutBlob implements store.Store. A present blob is refreshed without
// sending its data again.
func (s *Store) PutBlob(ctx context.Context, id string, data []byte) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !store.ValidID(id) {
		return store.ErrBadID
	}
	if int64(len(data)) > s.maxBlob {
		return fmt.Errorf("%w (%d bytes, limit %d)", store.ErrTooLarge, len(data), s.maxBlob)
	}
	// Most puts are of a blob already there (every request re-keeps
	// what it removes): try a refresh first, which sends no data.
	if err := s.TouchBlob(ctx, id); err == nil || !errors.Is(err, store.ErrNotFound) {
		return err
	}
	ms := s.life(true).Milliseconds()
	return s.fail("PutBlob", putBlob.Run(ctx, s.c, []string{s.blobKey(id)}, data, ms).Err())
}

// HasBlob implements store.Store.
func (s *Store) HasBlob(ctx context.Context, id string) bool {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !store.ValidID(id) {
		return false
	}
	n, err := s.c.Exists(ctx, s.blobKey(id)).Result()
	return err == nil && n == 1
}

// OpenBlob implements store.Store: it reads the whole blob.
func (s *Store) OpenBlob(ctx context.Context, id string) (io.ReadCloser, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !store.ValidID(id) {
		return nil, store.ErrBadID
	}
	b, err := s.c.Get(ctx, s.blobKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, s.fail("OpenBlob", err)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// TouchBlob implements store.Store.
func (s *Store) TouchBlob(ctx context.Context, id string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if !store.ValidID(id) {
		return store.ErrBadID
	}
	var ok bool
	var err error
	if s.expires() {
		ok, err = s.c.PExpire(ctx, s.blobKey(id), s.blobLife()).Result()
	} else {
		var n int64
		n, err = s.c.Exists(ctx, s.blobKey(id)).Result()
		ok = n == 1
	}
	if err != nil {
		return s.fail("TouchBlob", err)
	}
	if !ok {
		return store.ErrNotFound
	}
	return nil
}

// Get implements store.Store: GETEX refreshes the record's TTL.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var cmd *redis.StringCmd
	if s.expires() {
		cmd = s.c.GetEx(ctx, s.recKey(key), s.ttl)
	} else {
		cmd = s.c.Get(ctx, s.recKey(key))
	}
	b, err := cmd.Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, s.fail("Get", err)
	}
	return b, nil
}

// Put implements store.Store.
func (s *Store) Put(ctx context.Context, key string, val []byte) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return s.fail("Put", s.c.Set(ctx, s.recKey(key), val, s.life(false)).Err())
}

// putIfAbsent sets a record unless present, and otherwise returns the
// record found with its TTL refreshed: {1} or {0, value}. One script, so
// atomic for every client of the server.
var putIfAbsent = redis.NewScript(setLua + `
local cur = redis.call('GET', KEYS[1])
if cur then
  if ms > 0 then redis.call('PEXPIRE', KEYS[1], ms) end
  return {0, cur}
end
set()
return {1}
`)

// PutIfAbsent implements store.Store, atomically (a server-side script).
func (s *Store) PutIfAbsent(ctx context.Context, key string, val []byte) ([]byte, bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	ms := s.life(false).Milliseconds()
	res, err := putIfAbsent.Run(ctx, s.c, []string{s.recKey(key)}, val, ms).Slice()
	if err != nil {
		return nil, false, s.fail("PutIfAbsent", err)
	}
	if len(res) == 1 {
		return bytes.Clone(val), true, nil
	}
	if len(res) != 2 {
		return nil, false, s.fail("PutIfAbsent", fmt.Errorf("unexpected reply %v", res))
	}
	cur, ok := res[1].(string)
	if !ok {
		return nil, false, s.fail("PutIfAbsent", fmt.Errorf("unexpected reply %T", res[1]))
	}
	return []byte(cur), false, nil
}

// Sweep implements store.Store: Redis expires keys itself.
func (s *Store) Sweep(context.Context, time.Time) (int, error) { return 0, nil }

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return s.fail("PING", s.c.Ping(ctx).Err())
}

// Close implements store.Store: it closes the client's connections.
func (s *Store) Close() error { return s.c.Close() }

// TTL reports how long the blob (kind "blob") or record (kind "record")
// named has left: negative when it never expires, store.ErrNotFound
// when absent. It implements storetest.Expiring.
func (s *Store) TTL(ctx context.Context, kind, name string) (time.Duration, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	key, err := s.key(kind, name)
	if err != nil {
		return 0, err
	}
	d, err := s.c.PTTL(ctx, key).Result()
	if err != nil {
		return 0, s.fail("PTTL", err)
	}
	if d == -2 { // go-redis passes PTTL's -2 (no such key) through
		return 0, store.ErrNotFound
	}
	if d < 0 { // -1: no expiry
		return -1, nil
	}
	return d, nil
}

// Age shortens the remaining life of the blob or record named by d, as if
// d had passed (tests: Redis expires by its own clock). An entry without
// expiry is left alone; one whose life runs out is gone.
// It implements storetest.Expiring.
func (s *Store) Age(ctx context.Context, kind, name string, d time.Duration) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	left, err := s.TTL(ctx, kind, name)
	if err != nil || left < 0 {
		return err
	}
	key, _ := s.key(kind, name)
	if left-d <= 0 {
		return s.fail("DEL", s.c.Del(ctx, key).Err())
	}
	return s.fail("PEXPIRE", s.c.PExpire(ctx, key, left-d).Err())
}

func (s *Store) key(kind, name string) (string, error) {
	switch kind {
	case "blob":
		if !store.ValidID(name) {
			return "", store.ErrBadID
		}
		return s.blobKey(name), nil
	case "record":
		return s.recKey(name), nil
	}
	return "", fmt.Errorf("redis store: kind %q is neither blob nor record", kind)
}

// SetLogger sends what the Redis client library logs by itself (a
// connection pool that cannot dial, say) to l, at warning level, instead
// of the standard logger's stderr. It applies to the whole process: the
// library has one logger.
func SetLogger(l *slog.Logger) { redis.SetLogger(slogPrintf{l}) }

type slogPrintf struct{ l *slog.Logger }

func (p slogPrintf) Printf(ctx context.Context, format string, v ...any) {
	p.l.WarnContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}
